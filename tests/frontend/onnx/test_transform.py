"""Transform handlers against onnxruntime: Reshape Flatten Squeeze Unsqueeze Transpose
Concat Split Slice Expand Tile Pad CenterCropPad ReverseSequence, across the opsets where
attributes became inputs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from onnx import helper

from ember.errors import FrontendError

from .conftest import ember_run, make_model, one

Compare = Callable[..., list[np.ndarray]]
RNG = np.random.default_rng(7)
I64 = np.int64


def rand(shape: tuple[int, ...], dtype: str = "float32") -> np.ndarray:
    if dtype == "bool":
        return RNG.integers(0, 2, shape).astype(bool)
    if dtype.startswith("int"):
        return RNG.integers(-50, 50, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "float16"])
@pytest.mark.parametrize(
    ("shape", "target", "allowzero"),
    [
        ((2, 3, 4), [4, -1], 0),
        ((2, 3, 4), [0, 0, -1], 0),
        ((2, 3, 4), [24], 0),
        ((0, 3), [3, 0], 1),
    ],
)
def test_reshape(
    compare_ort: Compare, dtype: str, shape: tuple, target: list, allowzero: int
) -> None:
    x = rand(shape, dtype)
    model = one("Reshape", x, {"s": np.array(target, I64)}, opset=14, allowzero=allowzero)
    compare_ort(model, {"x": x})


def test_reshape_errors() -> None:
    x = rand((2, 3))
    with pytest.raises(
        FrontendError, match=r"cannot reshape an input of shape \(2, 3\) to \[4, 2\]"
    ):
        ember_run(one("Reshape", x, {"s": np.array([4, 2], I64)}), {"x": x})


@pytest.mark.parametrize("axis", [0, 1, 2, -1, 3])
def test_flatten(compare_ort: Compare, axis: int) -> None:
    x = rand((2, 3, 4))
    compare_ort(one("Flatten", x, opset=13, axis=axis), {"x": x})


@pytest.mark.parametrize("opset", [11, 13])
def test_squeeze_unsqueeze(compare_ort: Compare, opset: int) -> None:
    x = rand((1, 3, 1, 4))
    for axes in ([0], [-2, 0], None):
        if axes is None:
            model = one("Squeeze", x, opset=opset)
        elif opset >= 13:
            model = one("Squeeze", x, {"a": np.array(axes, I64)}, opset=opset)
        else:
            model = one("Squeeze", x, opset=opset, axes=axes)
        compare_ort(model, {"x": x})
    y = rand((3, 4))
    for axes in ([0], [-1, 1], [3, 0]):
        if opset >= 13:
            model = one("Unsqueeze", y, {"a": np.array(axes, I64)}, opset=opset)
        else:
            model = one("Unsqueeze", y, opset=opset, axes=axes)
        compare_ort(model, {"x": y})
    with pytest.raises(FrontendError, match=r"cannot squeeze axes \[1\]"):
        ember_run(one("Squeeze", x, {"a": np.array([1], I64)}, opset=13), {"x": x})


LAYOUT_DTYPES = ["float32", "float64", "float16", "int32", "int64", "bool"]


@pytest.mark.parametrize("dtype", LAYOUT_DTYPES)
@pytest.mark.parametrize("perm", [None, [0, 2, 1], [2, 0, 1]])
def test_transpose(compare_ort: Compare, perm: list | None, dtype: str) -> None:
    x = rand((2, 3, 4), dtype)
    attrs = {} if perm is None else {"perm": perm}
    compare_ort(one("Transpose", x, **attrs), {"x": x})


@pytest.mark.parametrize("dtype", LAYOUT_DTYPES)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat(compare_ort: Compare, axis: int, dtype: str) -> None:
    a = rand((2, 3, 4), dtype)
    b = rand(tuple(5 if i == axis % 3 else d for i, d in enumerate(a.shape)), dtype)
    node = helper.make_node("Concat", ["a", "b", "a"], ["y"], axis=axis)
    model = make_model([node], {"a": (dtype, a.shape), "b": (dtype, b.shape)}, ["y"])
    compare_ort(model, {"a": a, "b": b})


@pytest.mark.parametrize(
    ("opset", "sizes", "parts", "num_outputs"),
    [
        (11, [2, 4], 2, None),
        (11, None, 3, None),
        (13, [1, 0, 5], 3, None),
        (18, None, 4, 4),
        (18, None, 3, 3),
    ],
)
def test_split(
    compare_ort: Compare, opset: int, sizes: list | None, parts: int, num_outputs: int | None
) -> None:
    x = rand((3, 7 if num_outputs == 4 else 6))  # 7 = 2 + 2 + 2 + 1: a smaller last chunk
    attrs: dict[str, Any] = {"axis": 1}
    consts = {}
    if sizes is not None and opset >= 13:
        consts["s"] = np.array(sizes, I64)
    elif sizes is not None:
        attrs["split"] = sizes
    if num_outputs is not None:
        attrs["num_outputs"] = num_outputs
    compare_ort(one("Split", x, consts, opset=opset, outputs=parts, **attrs), {"x": x})


SLICES = [
    ([1], [3], None, None),
    ([0, 1], [2, -1], [0, 2], None),
    ([-1], [-1000], [1], [-1]),
    ([10, -100], [-10, 100], [2, 0], [-2, 3]),
    ([0], [2**62], [-1], [2]),
    ([3], [1], [2], [-1]),
]


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
@pytest.mark.parametrize(("starts", "ends", "axes", "steps"), SLICES)
def test_slice(
    compare_ort: Compare,
    starts: list,
    ends: list,
    axes: list | None,
    steps: list | None,
    dtype: str,
) -> None:
    x = rand((4, 5, 6), dtype)
    consts = {"s": np.array(starts, I64), "e": np.array(ends, I64)}
    if axes is not None:
        consts["a"] = np.array(axes, I64)
    elif steps is not None:
        consts["_a"] = np.array([])
    if steps is not None:
        consts["t"] = np.array(steps, I64)
    compare_ort(one("Slice", x, consts, opset=13), {"x": x})


def test_slice_legacy_attributes(compare_ort: Compare) -> None:
    x = rand((4, 5))
    compare_ort(one("Slice", x, opset=9, starts=[1, -3], ends=[100, -1], axes=[0, 1]), {"x": x})


@pytest.mark.parametrize(("shape", "target"), [((3, 1), [2, 3, 4]), ((1, 4), [3, 1]), ((2,), [2])])
@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "float16"])
def test_expand(compare_ort: Compare, shape: tuple, target: list, dtype: str) -> None:
    x = rand(shape, dtype)
    compare_ort(one("Expand", x, {"s": np.array(target, I64)}, opset=13), {"x": x})


@pytest.mark.parametrize("dtype", ["float32", "int32", "bool", "float64"])
def test_tile(compare_ort: Compare, dtype: str) -> None:
    x = rand((2, 3), dtype)
    for reps in ([1, 1], [2, 3], [3, 1]):
        compare_ort(one("Tile", x, {"r": np.array(reps, I64)}, opset=13), {"x": x})


PADS = [
    ("constant", [1, 2, 0, 3]),
    ("constant", [0, -1, 2, 1]),
    ("reflect", [2, 1, 1, 2]),
    ("edge", [1, 0, 2, 3]),
    ("wrap", [1, 2, 2, 1]),
]


@pytest.mark.parametrize(("mode", "pads"), PADS)
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_pad(compare_ort: Compare, mode: str, pads: list, dtype: str) -> None:
    x = rand((3, 4), dtype)
    consts = {"p": np.array(pads, I64), "v": np.array(7, dtype)}
    compare_ort(one("Pad", x, consts, opset=19, mode=mode), {"x": x})


def test_pad_legacy_and_axes(compare_ort: Compare) -> None:
    x = rand((2, 3, 4))
    compare_ort(one("Pad", x, opset=10, pads=[0, 1, 0, 0, 1, 2], value=1.5), {"x": x})
    consts = {"p": np.array([1, 2, 0, 1], I64), "_v": np.array([]), "a": np.array([2, 0], I64)}
    compare_ort(one("Pad", x, consts, opset=18), {"x": x})


def test_pad_runtime_value(compare_ort: Compare) -> None:
    x = rand((2, 3))
    node = helper.make_node("Pad", ["x", "p", "v"], ["y"])
    inputs = {"x": ("float32", x.shape), "v": ("float32", ())}
    model = make_model([node], inputs, ["y"], {"p": np.array([1, 0, 0, 2], I64)}, opset=13)
    compare_ort(model, {"x": x, "v": np.array(-4.0, np.float32)})


def test_dynamic_shape_argument_is_reported() -> None:
    x = rand((2, 3))
    node = helper.make_node("Reshape", ["x", "s"], ["y"], name="dyn")
    model = make_model([node], {"x": ("float32", x.shape), "s": ("int64", (2,))}, ["y"], opset=14)
    with pytest.raises(FrontendError, match="dyn.*the target shape must be constant"):
        ember_run(model, {"x": x, "s": np.array([3, 2], I64)})


@pytest.mark.parametrize(
    ("op", "consts", "attrs", "message"),
    [
        ("Slice", {"s": [0], "e": [2], "a": [0], "t": [0]}, {}, "step of axis 0 is 0"),
        ("Slice", {"s": [0, 0], "e": [2, 2], "a": [1, -1]}, {}, "axis -1 is sliced twice"),
        ("Split", {"s": [1, 1]}, {"axis": 1}, r"split sizes \[1, 1\] do not add up to 3"),
        ("Tile", {"r": [2]}, {}, "repeats must have one entry per axis"),
        ("Pad", {"p": [0, 3, 0, 0]}, {"mode": "reflect"}, "reflect padding of 3 needs axis 1"),
        ("Pad", {"p": [0, 0]}, {}, "2 pads given for a rank-2 input; need 4"),
        ("Pad", {"p": [0, 0, 0, 0]}, {"mode": "mirror"}, "pad mode 'mirror' is not supported"),
        ("Expand", {"s": [4, 3]}, {}, r"cannot broadcast shapes \(2, 3\) and \(4, 3\)"),
        ("Unsqueeze", {"a": [0, 0]}, {}, "repeat an axis"),
        ("Transpose", {}, {"perm": [0, 0]}, "not a permutation"),
        ("Gather", {"i": [5]}, {"axis": 1}, "index 5 is out of range for an axis of size 3"),
    ],
)
def test_bad_nodes_are_reported(op: str, consts: dict, attrs: dict, message: str) -> None:
    x = rand((2, 3))
    arrays = {k: np.array(v, I64) for k, v in consts.items()}
    with pytest.raises(FrontendError, match=message):
        ember_run(one(op, x, arrays, opset=18, **attrs), {"x": x})


def test_shape_subgraph_folds_to_a_static_reshape(compare_ort: Compare) -> None:
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape, as exporters emit it."""
    x = rand((2, 3, 4))
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"]),
        helper.make_node("Slice", ["s", "one", "big"], ["tail"]),
        helper.make_node("ReduceProd", ["tail"], ["count"], keepdims=0),
        helper.make_node("Cast", ["count"], ["fcount"], to=1),
        helper.make_node("Div", ["y", "fcount"], ["z"]),
    ]
    inits = {
        "zero": np.array(0, I64),
        "ax": np.array([0], I64),
        "minus1": np.array([-1], I64),
        "one": np.array([1], I64),
        "big": np.array([2**63 - 1], I64),
    }
    model = make_model(nodes, {"x": ("float32", x.shape)}, ["z"], inits, opset=17)
    compare_ort(model, {"x": x})
    from ember.frontend import from_onnx
    from ember.ir import Call, post_order

    mod, _ = from_onnx(model)
    ops = sorted({n.op.name for n in post_order(mod.main.body) if isinstance(n, Call)})
    assert ops == ["divide", "reshape"]


@pytest.mark.parametrize(("target", "axes"), [([2, 6], None), ([5], [0]), ([1, 3], [-1, 0])])
def test_center_crop_pad(compare_ort: Compare, target: list, axes: list | None) -> None:
    x = rand((4, 5))
    attrs = {} if axes is None else {"axes": axes}
    compare_ort(one("CenterCropPad", x, {"s": np.array(target, I64)}, opset=18, **attrs), {"x": x})


@pytest.mark.parametrize(("batch_axis", "time_axis"), [(0, 1), (1, 0)])
def test_reverse_sequence(compare_ort: Compare, batch_axis: int, time_axis: int) -> None:
    x = rand((4, 4, 2))
    lens = np.array([1, 4, 2, 3], I64)
    node = helper.make_node(
        "ReverseSequence", ["x", "l"], ["y"], batch_axis=batch_axis, time_axis=time_axis
    )
    inputs = {"x": ("float32", x.shape), "l": ("int64", lens.shape)}
    compare_ort(make_model([node], inputs, ["y"], opset=10), {"x": x, "l": lens})
