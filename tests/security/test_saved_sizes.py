"""Sizes a saved artifact set states are checked by the code that relies on them.

Regression: graph.json's ``scratch_bytes`` (a kernel node's scratch, graph builds) and
metadata.json's ``workspace_size_bytes`` (the run's workspace, AOT builds) are data; a set
edited to a smaller value, its manifest rehashed, corrupted the heap (graph: abort in
free(); AOT: a silent write past a 64-byte buffer). The kernels now check the length of
the pool they are given against their plan and the run fails with an ember error.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

import ember
from ember.errors import EmberError
from ember.examples.models import make_model

pytestmark = pytest.mark.cc

DEV = ember.cpu(0)


@pytest.fixture(scope="module")
def resnet8() -> tuple[Any, Any, Any]:
    case = make_model("resnet8")
    mod, params = ember.frontend.from_onnx(case.model, shape=case.shapes)
    return case, mod, params


def _shrink(node: Any, key: str) -> int:
    """Set every non-zero ``key`` below ``node`` (JSON) to 64; how many were changed."""
    changed = 0
    if isinstance(node, dict):
        for k, v in node.items():
            if k == key and v not in (0, "0"):
                node[k] = "64" if isinstance(v, str) else 64
                changed += 1
            else:
                changed += _shrink(v, key)
    elif isinstance(node, list):
        changed += sum(_shrink(v, key) for v in node)
    return changed


def _edit_saved(root: Path, file_name: str, key: str) -> None:
    """Shrink ``key`` in the saved set's ``file_name`` and rehash its manifest, as an
    attacker who can write the directory would."""
    path = next(root.rglob(file_name))
    doc = json.loads(path.read_text())
    assert _shrink(doc, key), f"{file_name} has no non-zero {key}: pick another model"
    path.write_text(json.dumps(doc))
    manifest = json.loads((root / "manifest.json").read_text())
    for entry in manifest["artifacts"]:
        data = (root / entry["codegen_id"] / entry["file_name"]).read_bytes()
        entry["sha256"], entry["size"] = hashlib.sha256(data).hexdigest(), len(data)
    (root / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize(
    ("executor", "file_name", "key"),
    [("graph", "graph.json", "scratch_bytes"), ("aot", "metadata.json", "workspace_size_bytes")],
)
def test_a_smaller_planned_size_in_a_saved_set_is_refused(
    resnet8: Any, tmp_path: Path, executor: str, file_name: str, key: str
) -> None:
    case, mod, params = resnet8
    root = ember.build(mod, "c", params=params, executor=executor).save(tmp_path / "set")
    _edit_saved(root, file_name, key)
    factory = ember.load_artifacts(root, DEV, trust_native=True)["default"](DEV)
    ex = ember.AotExecutor(factory) if executor == "aot" else ember.GraphExecutor(factory)
    ex.set_input(**case.inputs)
    with pytest.raises(EmberError, match="holds fewer than the .* bytes the kernel needs"):
        ex.run()
