"""ONNX handlers of the preview training optimizers (domain ``ai.onnx.preview.training``):
Adagrad, Momentum and Adam, as the deterministic update formulas they are, composed of
elementwise IR ops (no op of their own).

Every optimizer takes ``R`` (learning rate, a float scalar) and ``T`` (the update count,
an int64 scalar), then groups of tensors: the parameters ``X1..Xn``, their gradients
``G1..Gn`` and the optimizer's state (``H``, ``V`` or both), and returns the updated
parameters followed by the updated state, group by group. With ``R`` and ``T`` constant
(an initializer, as a deployed update step has them) the scalar factors fold at import.
"""

from __future__ import annotations

from collections.abc import Callable

from ember.frontend.onnx.common import arg, scalar_const, ttype
from ember.frontend.onnx.context import ConvertContext, NodeView
from ember.frontend.onnx.registry import FLOAT_TYPES, onnx_op
from ember.ir.expr import Expr, call

#: the domain of the training preview ops.
TRAINING_DOMAIN = "ai.onnx.preview.training"


def _groups(ctx: ConvertContext, node: NodeView, per: int) -> list[list[Expr]]:
    """The node's tensor inputs after R and T as ``per`` lists of equal length."""
    rest = [arg(ctx, node, i) for i in range(2, len(node.inputs))]
    if not rest or len(rest) % per:
        ctx.fail(
            node,
            f"expects R, T and then {per} groups of tensors of equal size, got "
            f"{len(node.inputs)} inputs",
        )
    n = len(rest) // per
    return [rest[k * n : (k + 1) * n] for k in range(per)]


def _scalars(ctx: ConvertContext, node: NodeView, dtype: str) -> tuple[Expr, Expr]:
    """(R, T) as rank-0 tensors of ``dtype`` (T converted from int64)."""
    r, t = arg(ctx, node, 0, "R"), arg(ctx, node, 1, "T")
    for what, e in (("R", r), ("T", t)):
        if ttype(e).size != 1:
            ctx.fail(node, f"{what} must be a scalar, got shape {ttype(e).shape}")
    r = call("reshape", r, newshape=())
    if ttype(r).dtype != dtype:
        r = call("cast", r, dtype=dtype)
    t = call("cast", call("reshape", t, newshape=()), dtype=dtype)
    return r, t


def _mul(a: Expr, b: Expr) -> Expr:
    return call("multiply", a, b)


def _add(a: Expr, b: Expr) -> Expr:
    return call("add", a, b)


def _sub(a: Expr, b: Expr) -> Expr:
    return call("subtract", a, b)


def _regularized(node: NodeView, x: Expr, g: Expr, dtype: str) -> Expr:
    """``norm_coefficient * x + g``: the gradient with its L2 regularisation term."""
    norm = float(node.attr("norm_coefficient", 0.0))
    return _add(_mul(scalar_const(norm, dtype), x), g)


def _if_started(t: Expr, started: Expr, first: Expr, dtype: str) -> Expr:
    """``started`` when ``T > 0`` else ``first`` (both scalars)."""
    return call("where", call("greater", t, scalar_const(0, dtype)), started, first)


def _optimizer(
    name: str,
    states: int,
    update: Callable[[ConvertContext, NodeView, Expr, Expr, list[Expr]], list[Expr]],
) -> Callable[[ConvertContext, NodeView], list[Expr]]:
    """A handler applying ``update(ctx, node, R, T, [x, g, *state]) -> [x_new, *state_new]`` to
    every group of the node's inputs."""

    def handler(ctx: ConvertContext, node: NodeView) -> list[Expr]:
        groups = _groups(ctx, node, 2 + states)
        dtype = ttype(groups[0][0]).dtype
        r, t = _scalars(ctx, node, dtype)
        outs: list[list[Expr]] = [[] for _ in range(1 + states)]
        for members in zip(*groups, strict=True):
            shapes = {ttype(m).shape for m in members}
            if len(shapes) != 1:
                ctx.fail(node, f"a parameter and its gradient and state differ in shape: {shapes}")
            for k, out in enumerate(update(ctx, node, r, t, list(members))):
                outs[k].append(out)
        return [e for out in outs for e in out]

    handler.__doc__ = f"{name}: the update step of every parameter group."
    return handler


def _adagrad(ctx: ConvertContext, node: NodeView, r: Expr, t: Expr, args: list[Expr]) -> list[Expr]:
    x, g, h = args
    dtype = ttype(x).dtype
    decay = float(node.attr("decay_factor", 0.0))
    eps = float(node.attr("epsilon", 1e-6))
    one = scalar_const(1.0, dtype)
    rate = call("divide", r, _add(one, _mul(t, scalar_const(decay, dtype))))
    gr = _regularized(node, x, g, dtype)
    h_new = _add(h, _mul(gr, gr))
    h_sqrt = _add(call("sqrt", h_new), scalar_const(eps, dtype))
    x_new = _sub(x, call("divide", _mul(rate, gr), h_sqrt))
    return [x_new, h_new]


def _momentum(
    ctx: ConvertContext, node: NodeView, r: Expr, t: Expr, args: list[Expr]
) -> list[Expr]:
    x, g, v = args
    dtype = ttype(x).dtype
    alpha = scalar_const(float(node.attr("alpha")), dtype)
    beta = scalar_const(float(node.attr("beta")), dtype)
    mode = str(node.attr("mode"))
    if mode not in ("standard", "nesterov"):
        ctx.fail(node, f"mode '{mode}' is not 'standard' or 'nesterov'")
    gr = _regularized(node, x, g, dtype)
    beta_t = _if_started(t, beta, scalar_const(1.0, dtype), dtype)
    v_new = _add(_mul(alpha, v), _mul(beta_t, gr))
    step = v_new if mode == "standard" else _add(gr, _mul(alpha, v_new))
    return [_sub(x, _mul(r, step)), v_new]


def _adam(ctx: ConvertContext, node: NodeView, r: Expr, t: Expr, args: list[Expr]) -> list[Expr]:
    x, g, v, h = args
    dtype = ttype(x).dtype
    a, b = float(node.attr("alpha", 0.9)), float(node.attr("beta", 0.999))
    alpha, beta = scalar_const(a, dtype), scalar_const(b, dtype)
    one = scalar_const(1.0, dtype)
    eps = scalar_const(float(node.attr("epsilon", 1e-6)), dtype)
    post = float(node.attr("norm_coefficient_post", 0.0))
    gr = _regularized(node, x, g, dtype)
    v_new = _add(_mul(alpha, v), _mul(scalar_const(1.0 - a, dtype), gr))
    h_new = _add(_mul(beta, h), _mul(scalar_const(1.0 - b, dtype), _mul(gr, gr)))
    h_sqrt = _add(call("sqrt", h_new), eps)
    bias = call(
        "divide",
        call("sqrt", _sub(one, call("power", beta, t))),
        _sub(one, call("power", alpha, t)),
    )
    rate = _if_started(t, _mul(r, bias), r, dtype)
    x_new = _sub(x, _mul(rate, call("divide", v_new, h_sqrt)))
    return [_mul(scalar_const(1.0 - post, dtype), x_new), v_new, h_new]


onnx_op("Adagrad", since=1, domain=TRAINING_DOMAIN, dtypes=FLOAT_TYPES)(
    _optimizer("Adagrad", 1, _adagrad)
)
onnx_op("Momentum", since=1, domain=TRAINING_DOMAIN, dtypes=FLOAT_TYPES)(
    _optimizer("Momentum", 1, _momentum)
)
onnx_op("Adam", since=1, domain=TRAINING_DOMAIN, dtypes=FLOAT_TYPES)(_optimizer("Adam", 2, _adam))
