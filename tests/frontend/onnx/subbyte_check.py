"""Test helper for the sub-byte and 8-bit float types in ONNX models: build a one-opset
model, compile and run it (c or llvm, graph or AOT executor), compare exactly with onnx's
reference implementation.

Every comparison is exact: these are conversions, ember computes them as onnx's reference
and ml_dtypes do (a float truncated toward zero then wrapped into int4, round half to even
into float4, ONNX's e8m0 rounding modes on the float32 exponent).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper
from onnx.reference import ReferenceEvaluator

import ember

DEV = ember.cpu(0)
#: the ONNX sub-byte integer types and the 8-bit type onnxruntime returns them as.
SUB_INTS = {"INT4": "int8", "UINT4": "uint8", "INT2": "int8", "UINT2": "uint8"}
#: the code generators the integer types run through.
TARGETS = ["c", "llvm"]


def model_of(
    nodes: list[onnx.NodeProto], inputs: dict[str, int], outputs: dict[str, int]
) -> onnx.ModelProto:
    """A model of ``nodes`` at opset 25; inputs and outputs typed by ONNX element type."""
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, t, None) for n, t in inputs.items()],
        [helper.make_tensor_value_info(n, t, None) for n, t in outputs.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)])
    model.ir_version = 10
    return model


def run(
    model: onnx.ModelProto, feeds: dict[str, np.ndarray], target: str = "c", **kw: Any
) -> list[np.ndarray]:
    """Compile ``model`` for ``target`` and run it once (``executor="aot"`` for AOT)."""
    shapes = {k: v.shape for k, v in feeds.items()}
    mod, params = ember.import_onnx(model, shape=shapes)
    top = ember.load_artifacts(ember.build(mod, target=target, params=params, **kw), DEV)
    executor = kw.get("executor", "graph")
    ex = (ember.AotExecutor if executor == "aot" else ember.GraphExecutor)(top["default"](DEV))
    for name, value in feeds.items():
        ex.set_input(name, value)
    ex.run()
    return [ex.get_output(i).numpy() for i in range(ex.get_num_outputs())]


def same(got: np.ndarray, want: np.ndarray) -> None:
    """Equal dtype, shape and values (NaN where NaN; -0.0 equals 0.0)."""
    assert got.dtype == want.dtype and got.shape == want.shape
    g, w = got.astype(np.float64), want.astype(np.float64)
    assert np.array_equal(g, w, equal_nan=True), np.stack([g, w])[:, g != w]


def check_reference(
    model: onnx.ModelProto, feeds: dict[str, np.ndarray], target: str = "c"
) -> None:
    """The compiled outputs equal those of onnx's ReferenceEvaluator."""
    with np.errstate(all="ignore"):
        want = ReferenceEvaluator(model).run(None, feeds)
    got = run(model, feeds, target)
    for g, w in zip(got, want, strict=True):
        same(g, w)


def cast_model(src: int, dst: int, **attrs: object) -> onnx.ModelProto:
    """One Cast from ``src`` to ``dst`` (ONNX element types)."""
    node = helper.make_node("Cast", ["x"], ["y"], to=dst, **attrs)
    return model_of([node], {"x": src}, {"y": dst})


#: floats where the conversions decide: ties, saturation, overflow, subnormals, NaN.
FLOATS = np.array(
    [0.0, -0.0, 0.24, 0.25, 0.26, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 5.5, 6.0, 7.0, -3.4, -9.5]
    + [1e6, -1e6, 1e-7, 1e-40, 3e38, 2.0**127, 1.5 * 2.0**126, np.inf, -np.inf, np.nan],
    np.float32,
)
