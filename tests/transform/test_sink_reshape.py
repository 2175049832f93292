"""sink_reshape: a product's reshape back to N-d moved after its elementwise epilogue, so
that the epilogue fuses with the product; the values unchanged (reference evaluator)."""

from __future__ import annotations

import numpy as np

from ember.ir import Call, Function, IRModule, TensorType, Var, call, const, evaluate, post_order
from ember.transform.sink_reshape import sink_reshape

F32 = "float32"


def _c(*shape: int, seed: int = 0):  # type: ignore[no-untyped-def]
    return const(np.random.default_rng(seed).standard_normal(shape).astype(F32))


def _ops(mod: IRModule) -> list[str]:
    return [n.op_name for n in post_order(mod.main.body) if isinstance(n, Call)]


def _same(mod: IRModule, out: IRModule) -> None:
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal(p.type.shape).astype(F32) for p in mod.main.params]
    for got, want in zip(evaluate(out, xs), evaluate(mod, xs), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_bias_gelu_and_residual_run_on_the_2d_product() -> None:
    """matmul(2-D) -> reshape (1, 6, 8) -> bias, GELU-like diamond, residual -> the next
    layer's reshape to 2-D: every elementwise op reads the product itself, and the two
    reshapes between the layers cancel."""
    x = Var("x", TensorType((6, 4), F32))
    r = Var("r", TensorType((1, 6, 8), F32))
    m = call("reshape", call("nn.matmul", x, _c(4, 8)), newshape=(1, 6, 8))
    y = call("add", m, _c(1, 1, 8, seed=1))
    y = call("multiply", y, call("erf", call("multiply", y, const(np.float32(0.7)))))
    y = call("add", y, r)
    body = call("nn.matmul", call("reshape", y, newshape=(6, 8)), _c(8, 3, seed=2))
    mod = IRModule({"main": Function((x, r), body)})
    out = sink_reshape(mod)
    _same(mod, out)
    ops = _ops(out)
    assert ops.count("reshape") == 1, ops  # the residual's (1, 6, 8) -> (6, 8), fused later
    consts = [n for n in post_order(out.main.body) if n.__class__.__name__ == "Constant"]
    assert (8,) in [c.data.shape for c in consts]  # the bias without its unit axes


def test_reshapes_of_other_axes_and_constants_along_them_stay() -> None:
    x = Var("x", TensorType((6, 4), F32))
    merged = call("reshape", x, newshape=(1, 24))  # the last axis changes
    mod = IRModule({"main": Function((x,), call("add", merged, _c(1, 24)))})
    assert _ops(sink_reshape(mod)) == ["reshape", "add"]
    split = call("reshape", x, newshape=(2, 3, 4))
    mod = IRModule({"main": Function((x,), call("add", split, _c(2, 1, 4, seed=1)))})
    out = sink_reshape(mod)
    assert _ops(out) == ["reshape", "add"]  # the constant varies along a leading axis
    _same(mod, out)


def test_a_reshape_to_a_scalar_is_left_alone() -> None:
    """Regression: a reshape to () (a reduction's result read as a scalar) has no last axis."""
    x = Var("x", TensorType((1,), F32))
    mod = IRModule({"main": Function((x,), call("exp", call("reshape", x, newshape=())))})
    assert sink_reshape(mod) is mod


def test_a_last_axis_layer_norm_takes_the_reshape_through() -> None:
    """Pre-norm residual stream: product, residual add, LayerNorm over the last axis, the
    next product: no reshape is left (the stream stays 2-D); a LayerNorm over two axes
    keeps its reshape."""
    x = Var("x", TensorType((1, 6, 8), F32))
    m = call(
        "reshape",
        call("nn.matmul", call("reshape", x, newshape=(6, 8)), _c(8, 8)),
        newshape=(1, 6, 8),
    )
    y = call("add", x, m)
    n = call("nn.layer_norm", y, _c(8, seed=1), _c(8, seed=2), axis=-1)
    body = call("nn.matmul", call("reshape", n, newshape=(6, 8)), _c(8, 3, seed=3))
    mod = IRModule({"main": Function((x,), body)})
    out = sink_reshape(mod)
    _same(mod, out)
    reshapes = [
        n for n in post_order(out.main.body) if isinstance(n, Call) and n.op_name == "reshape"
    ]
    assert reshapes and all(r.args[0] is x for r in reshapes)  # only x's, into 2-D
    wide = call("nn.layer_norm", m, _c(6, 8, seed=1), axis=1)
    mod = IRModule({"main": Function((x,), wide)})
    assert "nn.layer_norm" in _ops(sink_reshape(mod))
    _same(mod, sink_reshape(mod))
