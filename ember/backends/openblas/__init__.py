"""The ``openblas`` back end: float32 MatMul/Gemm/Dense and batched matmul as OpenBLAS
sgemm calls (pip ``scipy-openblas32``), through the ``relay_to_tir`` hook.

Use it in a composite target: ``ember.build(mod, "openblas, c", params)``. See
docs/backends/openblas.md.
"""

from __future__ import annotations

import ctypes

from ember.backends.openblas.lower import LOADER, lower, matmul_ok
from ember.errors import ModuleLoadError
from ember.runtime.artifact import Artifact
from ember.runtime.module import Module, PythonModule
from ember.runtime.registry import register_func
from ember.target import TargetKind, TargetOption, register_target_kind
from ember.transform.partition_patterns import Pattern, register_pattern_table

KIND = "openblas"

try:  # optional dependency: pip install scipy-openblas32 (the ``backends`` extra)
    import scipy_openblas32
except ImportError:  # pragma: no cover - exercised through a test that hides the module
    scipy_openblas32 = None


def load_library() -> ctypes.CDLL:
    """Put libscipy_openblas into the process with its symbols global (for the shim)."""
    if scipy_openblas32 is None:
        raise ModuleLoadError(
            "the openblas back end needs the OpenBLAS library: pip install scipy-openblas32 "
            "(or `pip install ember[backends]`)"
        )
    path = f"{scipy_openblas32.get_lib_dir()}/libscipy_openblas.so"
    try:
        return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    except OSError as err:
        raise ModuleLoadError(
            f"openblas: cannot load {path} ({err}); reinstall scipy-openblas32"
        ) from None


def loadbinary(artifacts: list[Artifact]) -> Module:
    """runtime.module.loadbinary_openblas: load the library (and set its thread count from
    the marker artifact); the kernels themselves are native code."""
    lib = load_library()
    for art in artifacts:
        for word in art.content.decode().split():
            if word.startswith("threads="):
                lib.scipy_openblas_set_num_threads(int(word.split("=", 1)[1]))
    return PythonModule({}, type_key=KIND)


register_func("target.openblas.relay_to_tir", lower)
register_func("runtime.module.loadbinary_" + LOADER, loadbinary)
register_pattern_table(
    KIND,
    [
        Pattern("openblas.matmul_bias", ("nn.matmul", "add"), matmul_ok),
        Pattern("openblas.dense_bias", ("nn.dense", "add"), matmul_ok),
        Pattern("openblas.matmul", ("nn.matmul",), matmul_ok),
        Pattern("openblas.dense", ("nn.dense",), matmul_ok),
    ],
    merge=False,  # the hook lowers one matched pattern per region
)
register_target_kind(
    TargetKind(
        KIND,
        hooks={"relay_to_tir": "target.openblas.relay_to_tir"},
        options={
            "num-threads": TargetOption(
                int,
                1,
                "OpenBLAS threads (1: ember's own pool runs the other kernels; more "
                "oversubscribes a small machine)",
                lambda v: None if v >= 1 else "must be at least 1",
            )
        },
        doc="float32 matmul/dense/batched matmul through OpenBLAS sgemm (scipy-openblas32)",
    )
)
