"""A test back end that needs no library: ``npdense`` claims float32 ``nn.dense`` and
compiles it through ``relay_to_runtime`` to a JSON description whose weight is handed over
by ``constant_updater``; its loader runs it with numpy. Importing this module registers it
(the fresh-process tests import it by file path)."""

import json

import numpy as np

import ember
from ember.formats.params import load_params
from ember.ir import Call, Constant, Var, post_order
from ember.runtime.artifact import CONSTANTS_SUFFIX, SYMBOL_KEY, Artifact
from ember.runtime.module import PythonModule
from ember.target import TargetKind, register_target_kind
from ember.target.kind import TARGET_KINDS
from ember.transform.partition_patterns import Pattern, dtype_is, register_pattern_table


def relay_to_runtime(region, name, target):
    (dense,) = [n for n in post_order(region.body) if isinstance(n, Call)]
    x, w = dense.args
    assert isinstance(x, Var) and isinstance(w, Constant)
    desc = {"weight": f"{name}.w"}
    return [Artifact("npdense", "npdense", f"{name}.json", json.dumps(desc).encode())]


def constant_updater(region, name, target):
    (w,) = [n for n in post_order(region.body) if isinstance(n, Constant)]
    return {f"{name}.w": np.asarray(w.data)}


def loadbinary(artifacts):
    consts = {}
    for art in artifacts:
        if art.file_name.endswith(CONSTANTS_SUFFIX):
            consts.update(load_params(art.content))
    funcs = {}
    for art in artifacts:
        if art.file_name.endswith(".json"):
            w = consts[json.loads(art.content)["weight"]]

            def run(x, out, w=w):
                out.copyfrom((x.numpy() @ w.T).astype("float32"))

            funcs[art.metadata[SYMBOL_KEY]] = run
            ember.register_func(art.metadata[SYMBOL_KEY], run, override=True)
    return PythonModule(funcs, type_key="npdense")


if "npdense" not in TARGET_KINDS:
    ember.register_func("target.npdense.relay_to_runtime", relay_to_runtime)
    ember.register_func("target.npdense.constant_updater", constant_updater)
    ember.register_func("runtime.module.loadbinary_npdense", loadbinary)
    register_pattern_table(
        "npdense", [Pattern("npdense.dense", ("nn.dense",), dtype_is("float32"))]
    )
    hooks = {
        "relay_to_runtime": "target.npdense.relay_to_runtime",
        "constant_updater": "target.npdense.constant_updater",
    }
    register_target_kind(TargetKind("npdense", hooks=hooks))
