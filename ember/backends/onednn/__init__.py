"""The ``onednn`` back end: float32 convolution and matmul (with bias and relu fused as
post-ops) run by oneDNN (pip ``onednn``), through ``relay_to_runtime`` with a JSON
primitive description, its ``loadbinary_onednn`` loader, and ``constant_updater`` handing
the weights to that loader. See docs/backends/onednn.md.
"""

from __future__ import annotations

from ember.backends.onednn.compile import LOADER, constants, conv_ok, matmul_ok, relay_to_runtime
from ember.backends.onednn.runtime import loadbinary
from ember.runtime.registry import register_func
from ember.target import TargetKind, register_target_kind
from ember.transform.partition_patterns import Pattern, register_pattern_table

KIND = "onednn"

register_func("target.onednn.relay_to_runtime", relay_to_runtime)
register_func("target.onednn.constant_updater", constants)
register_func("runtime.module.loadbinary_" + LOADER, loadbinary)
register_pattern_table(
    KIND,
    [
        Pattern("onednn.conv_bias_relu", ("nn.conv", "add", "relu"), conv_ok),
        Pattern("onednn.conv_bias", ("nn.conv", "add"), conv_ok),
        Pattern("onednn.conv_relu", ("nn.conv", "relu"), conv_ok),
        Pattern("onednn.conv", ("nn.conv",), conv_ok),
        Pattern("onednn.matmul_bias_relu", ("nn.matmul", "add", "relu"), matmul_ok),
        Pattern("onednn.matmul_bias", ("nn.matmul", "add"), matmul_ok),
        Pattern("onednn.matmul", ("nn.matmul",), matmul_ok),
        Pattern("onednn.dense_bias", ("nn.dense", "add"), matmul_ok),
        Pattern("onednn.dense", ("nn.dense",), matmul_ok),
    ],
    merge=False,  # the hook lowers one matched pattern per region
)
register_target_kind(
    TargetKind(
        KIND,
        hooks={
            "relay_to_runtime": "target.onednn.relay_to_runtime",
            "constant_updater": "target.onednn.constant_updater",
        },
        doc="float32 conv/matmul (+bias, relu) through oneDNN primitives (pip onednn)",
    )
)
