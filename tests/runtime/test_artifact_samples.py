"""Hand-built artifacts shared by the artifact, loading, export and inspection tests."""

from __future__ import annotations

import json
from typing import Any

from ember.runtime.artifact import Artifact
from ember.runtime.artifact_set import ArtifactSet
from ember.runtime.module import Module, PythonModule

#: A packed function in the runtime ABI: add_one(int) -> int, and a float scaler.
C_SOURCE = b"""\
#include <ember/runtime_api.h>

EMBER_DLL int32_t add_one(EmberValue* args, int32_t* type_codes, int32_t num_args,
                          EmberValue* ret, int32_t* ret_tcode, void* resource_handle) {
  (void)resource_handle;
  if (num_args != 1 || type_codes[0] != EMBER_INT) {
    EmberAPISetLastError("add_one: expected one int argument");
    return -1;
  }
  ret->v_int64 = args[0].v_int64 + 1;
  *ret_tcode = EMBER_INT;
  return 0;
}

EMBER_DLL int32_t scale(EmberValue* args, int32_t* type_codes, int32_t num_args,
                        EmberValue* ret, int32_t* ret_tcode, void* resource_handle) {
  (void)resource_handle;
  (void)type_codes;
  if (num_args != 2) {
    EmberAPISetLastError("scale: expected two arguments");
    return -1;
  }
  ret->v_float64 = args[0].v_float64 * args[1].v_float64;
  *ret_tcode = EMBER_FLOAT;
  return 0;
}
"""

JSON_CONTENT = b'{"functions": {"double_it": 2, "triple_it": 3}}'


def c_artifact(extra: str = "") -> Artifact:
    """The C source artifact; ``extra`` (a comment) makes its content, and cache key, unique."""
    content = C_SOURCE + (f"/* {extra} */\n".encode() if extra else b"")
    return Artifact("c", "native", "lib0.c", content, {"format": "c", "target": "c"})


def json_artifact() -> Artifact:
    """A JSON artifact for the Python-registered ``test_json`` loader."""
    return Artifact("ext", "test_json", "funcs.json", JSON_CONTENT, {"format": "json"})


def sample_set(extra: str = "") -> ArtifactSet:
    """A C source plus a JSON artifact."""
    return ArtifactSet([c_artifact(extra), json_artifact()])


def metadata_artifact() -> Artifact:
    """A metadata artifact naming the host function the top module's ``run`` calls."""
    return Artifact("exec", "metadata", "graph.json", b'{"entry": "add_one"}')


def load_test_json(arts: list[Artifact]) -> Module:
    """``runtime.module.loadbinary_test_json``: one Python function per JSON entry."""
    funcs: dict[str, Any] = {}
    for art in arts:
        for name, factor in json.loads(art.content)["functions"].items():
            funcs[name] = lambda x, f=factor: x * f
    return PythonModule(funcs, type_key="test_json")


def load_test_metadata(arts: list[Artifact], host: Module) -> Module:
    """``runtime.module.loadbinary_metadata``: a top module whose ``run`` calls the entry."""
    entry = json.loads(arts[0].content)["entry"]
    top = PythonModule({"run": lambda x: host[entry](x)}, type_key="test_metadata")
    top.import_module(host)
    return top


def tree(module: Module) -> list[Any]:
    """The module tree as nested ``[type_key, [imports...]]`` lists."""
    return [module.type_key, [tree(m) for m in module.imports]]


def run_all(top: Module) -> dict[str, Any]:
    """Call every function of the sample set through the top module."""
    return {
        "add_one": top["add_one"](41),
        "scale": top["scale"](2.0, 3.5),
        "double_it": top["double_it"](21),
        "triple_it": top["triple_it"](-3),
        "run": top["run"](1) if "run" in top else None,
        "tree": tree(top),
    }


def test_samples_are_well_formed() -> None:
    arts = sample_set("x")
    assert [a.loader for a in arts] == ["native", "test_json"]
    assert arts.get("c", "lib0.c").content.endswith(b"/* x */\n")
    assert sample_set().content_hash() != sample_set("x").content_hash()
