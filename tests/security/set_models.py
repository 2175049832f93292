"""Small real models of the artifact-set mutation test, built with both executors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from ember.runtime.artifact_set import ArtifactSet


def strings_model() -> object:
    """z = StringConcat(x, c) on string[3], ``c`` a constant: string params and kernels."""
    onnx = pytest.importorskip("onnx")
    helper, tp = onnx.helper, onnx.TensorProto
    c = onnx.numpy_helper.from_array(np.array(["ab", "", "xyz"], dtype=object), "c")
    graph = helper.make_graph(
        [helper.make_node("StringConcat", ["x", "c"], ["z"])],
        "strings",
        [helper.make_tensor_value_info("x", tp.STRING, [3])],
        [helper.make_tensor_value_info("z", tp.STRING, [3])],
        initializer=[c],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


def quantized_model() -> object:
    """ds_cnn_kws quantized by onnxruntime (QDQ, int8 weights): int8 kernels and params."""
    from ember.examples.models import make_model  # noqa: PLC0415  (onnx is optional)
    from ember.testing.quantize import quantize_static  # noqa: PLC0415

    case = make_model("ds_cnn_kws")
    return quantize_static(case.model, case.inputs)


def zoo_model(name: str) -> Callable[[], object]:
    """The builder of ember.examples.models' ``name``."""

    def build() -> object:
        from ember.examples.models import make_model  # noqa: PLC0415  (onnx is optional)

        return make_model(name).model

    return build


def save_builds(model: object, name: str, root: Path, executors: tuple[str, ...]) -> list[Path]:
    """Build ``model`` with each executor and save each set as ``root/<name>_<executor>``."""
    from ember.testing import compile_onnx  # noqa: PLC0415  (onnx is optional)

    out = []
    for executor in executors:
        arts: ArtifactSet = compile_onnx(model, executor=executor)
        out.append(arts.save(root / f"{name}_{executor}"))
    return out
