"""Models at opsets 1-6 import as they are: converted to opset 7 with their old meaning."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ember.cli.main import main
from ember.errors import FrontendError
from ember.frontend.onnx import from_onnx
from ember.frontend.onnx.upgrade import default_opset, upgrade_model
from ember.ir import evaluate

RNG = np.random.default_rng(7)


def _f(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _b(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape) > 0


def _old_model(
    op: str,
    feeds: dict[str, np.ndarray],
    opset: int,
    attrs: dict[str, object],
    out_type: int = TensorProto.FLOAT,
    inits: dict[str, np.ndarray] | None = None,
) -> onnx.ModelProto:
    """One node at an old opset, IR version 3 (initializers listed as inputs, as then)."""
    names = list(feeds) + list(inits or {})
    node = helper.make_node(op, names, ["y"], name="n0", **attrs)
    every = {**feeds, **(inits or {})}
    inputs = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
        for n, v in every.items()
    ]
    graph = helper.make_graph(
        [node],
        "old",
        inputs,
        [helper.make_tensor_value_info("y", out_type, None)],
        initializer=[numpy_helper.from_array(v, n) for n, v in (inits or {}).items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 3
    return model


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    """Import ``model`` and run its one output with the reference evaluator."""
    mod, params = from_onnx(model)
    got = evaluate(mod, feeds, params)
    return got[0] if isinstance(got, list) else got


Reference = Callable[..., np.ndarray]
CASES: list[tuple[str, dict[str, np.ndarray], int, dict[str, object], Reference]] = [
    ("Add", {"a": _f(2, 3, 4, 5), "b": _f(3)}, 1, {"broadcast": 1, "axis": 1},
     lambda a, b: a + b[:, None, None]),
    ("Mul", {"a": _f(2, 3, 4), "b": _f(3, 4)}, 6, {"broadcast": 1},
     lambda a, b: a * b),
    ("Sub", {"a": _f(2, 3), "b": _f(2, 3)}, 1, {"consumed_inputs": [0, 0]},
     lambda a, b: a - b),
    ("Relu", {"x": _f(2, 3)}, 1, {"consumed_inputs": [0]}, lambda x: np.maximum(x, 0)),
    ("Concat", {"a": _f(2, 3), "b": _f(2, 3)}, 1, {}, lambda a, b: np.concatenate([a, b], 1)),
    ("Reshape", {"x": _f(2, 3, 4)}, 1, {"shape": [6, 4]}, lambda x: x.reshape(6, 4)),
    ("Pad", {"x": _f(1, 2, 3, 4)}, 1,
     {"paddings": [0, 0, 1, 1, 0, 0, 1, 1], "mode": "constant", "value": 1.5},
     lambda x: np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=1.5)),
    ("Slice", {"x": _f(4, 5, 6)}, 1, {"axes": [0, 2], "starts": [1, 0], "ends": [3, -1]},
     lambda x: x[1:3, :, 0:-1]),
    ("Split", {"x": _f(6, 4)}, 1, {"axis": 0, "split": [2, 4]}, lambda x: x[:2]),
    ("Clip", {"x": _f(2, 3)}, 1, {"min": -0.5, "max": 0.5}, lambda x: np.clip(x, -0.5, 0.5)),
    ("Squeeze", {"x": _f(2, 1, 4)}, 1, {"axes": [1]}, lambda x: x[:, 0]),
    ("PRelu", {"x": _f(2, 3, 4, 5), "s": _f(3)}, 6, {},
     lambda x, s: np.where(x > 0, x, x * s[:, None, None])),
    ("GlobalLpPool", {"x": _f(1, 3, 4, 5)}, 1, {"p": 2.0},
     lambda x: np.sqrt((x**2).sum((2, 3), keepdims=True))),
    ("BatchNormalization",
     {"x": _f(2, 3, 4), "s": _f(3), "b": _f(3), "m": _f(3), "v": np.abs(_f(3)) + 0.5}, 1,
     {"consumed_inputs": [0, 0, 0, 1, 1], "is_test": 1, "epsilon": 1e-3},
     lambda x, s, b, m, v: (x - m[:, None]) / np.sqrt(v[:, None] + 1e-3) * s[:, None]
     + b[:, None]),
    ("Dropout", {"x": _f(2, 3)}, 6, {"is_test": 1, "ratio": 0.3}, lambda x: x),
]  # fmt: skip


@pytest.mark.parametrize(
    ("op", "feeds", "opset", "attrs", "ref"), CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES]
)
def test_old_opset_node_imports_with_its_meaning(op, feeds, opset, attrs, ref):
    got = _run(_old_model(op, feeds, opset, attrs), feeds)
    np.testing.assert_allclose(got, ref(*feeds.values()), rtol=1e-5, atol=1e-5)


BOOL_CASES: list[tuple[str, dict[str, np.ndarray], Reference]] = [
    ("Greater", {"a": _f(2, 3, 4), "b": _f(3)}, lambda a, b: a > b[:, None]),
    ("And", {"a": _b(2, 3, 4), "b": _b(3)}, lambda a, b: a & b[:, None]),
    ("Equal", {"a": _f(2, 3, 4), "b": _f(3)}, lambda a, b: a == b[:, None]),
]


@pytest.mark.parametrize(("op", "feeds", "ref"), BOOL_CASES, ids=[c[0] for c in BOOL_CASES])
def test_legacy_broadcast_of_logic_ops(op, feeds, ref):
    model = _old_model(op, feeds, 1, {"broadcast": 1, "axis": 1}, TensorProto.BOOL)
    np.testing.assert_array_equal(_run(model, feeds), ref(*feeds.values()))


def test_old_cast_string_type_and_tile_inputs():
    x = _f(2, 3)
    model = _old_model("Cast", {"x": x}, 1, {"to": "INT32"}, TensorProto.INT32)
    np.testing.assert_array_equal(_run(model, {"x": x}), x.astype(np.int32))
    consts = {"tiles": np.array([3], np.int64), "axis": np.array([1], np.int64)}
    model = _old_model("Tile", {"x": x}, 1, {}, inits=consts)
    np.testing.assert_array_equal(_run(model, {"x": x}), np.tile(x, (1, 3)))


def test_prelu_initializer_slope_and_recurrent_nodes_upgrade():
    x, slope = _f(1, 3, 2, 2), _f(3)
    model = _old_model("PRelu", {"x": x}, 6, {}, inits={"s": slope})
    want = np.where(x > 0, x, x * slope[:, None, None])
    np.testing.assert_allclose(_run(model, {"x": x}), want, rtol=1e-6)
    inits = {"w": _f(1, 16, 3), "r": _f(1, 16, 4)}
    old = _old_model("LSTM", {"x": _f(2, 1, 3)}, 1, {"hidden_size": 4}, inits=inits)
    upgraded = upgrade_model(old)
    assert default_opset(upgraded) == 7
    assert [n.op_type for n in upgraded.graph.node] == ["LSTM"]
    assert not any(a.name == "output_sequence" for a in upgraded.graph.node[0].attribute)
    from_onnx(upgraded)


def test_training_mode_nodes_are_refused_by_name():
    model = _old_model("Dropout", {"x": _f(2, 3)}, 6, {"is_test": 0})
    with pytest.raises(FrontendError, match="Dropout 'n0' run in training mode"):
        from_onnx(model)


def test_non_constant_split_sizes_name_the_node():
    feeds = {"x": _f(6, 4), "s": np.array([2, 4], np.int64)}
    with pytest.raises(FrontendError, match="Split 'n0' .* not an initializer"):
        from_onnx(_old_model("Split", feeds, 1, {"axis": 0}))


def test_current_models_are_untouched():
    model = _old_model("Relu", {"x": _f(2)}, 13, {})
    assert upgrade_model(model) is model


@pytest.mark.cc
def test_cli_compiles_and_runs_an_opset_6_model(tmp_path):
    x, slope = _f(1, 3, 2, 2), _f(3)
    src = tmp_path / "old.onnx"
    onnx.save(_old_model("PRelu", {"x": x}, 6, {}, inits={"s": slope}), src)
    out = tmp_path / "old.tar"
    assert main(["compile", str(src), "-o", str(out), "--quiet"]) == 0
    np.savez(tmp_path / "in.npz", x=x)
    args = ["run", str(out), "--inputs", str(tmp_path / "in.npz")]
    assert main([*args, "--outputs", str(tmp_path / "out.npz")]) == 0
    want = np.where(x > 0, x, x * slope[:, None, None])
    name = onnx.load(src).graph.output[0].name  # outputs are saved by their ONNX names
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")[name], want, rtol=1e-5)
