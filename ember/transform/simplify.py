"""simplify: IRModule -> IRModule, algebraic clean-ups that keep results equal.

* Inference batch norm with constant statistics is folded away. Per channel,
  ``scale = gamma / sqrt(var + eps)`` and ``shift = beta - mean * scale``:

  - ``batch_norm(conv(x, W))`` -> ``add(conv(x, W * scale), shift)``, also through a
    constant bias ``add(conv(x, W), b)`` (bias becomes ``b * scale + shift``); the same for
    ``nn.dense`` (weights ``(N, K)``) and ``nn.matmul`` with a 2-D constant right operand,
    when the norm runs over the last axis. The producer must have no other user.
  - any other ``batch_norm(x)`` -> ``add(multiply(x, scale), shift)``.
* ``reshape`` to the same shape and ``transpose`` by the identity permutation vanish;
  ``reshape(reshape(x))`` and ``transpose(transpose(x))`` merge into one op.
* ``cast`` to the dtype the value already has vanishes.

Rules apply bottom-up, in rounds until nothing changes (at most :data:`MAX_ROUNDS`).
Run ``fold_constant`` first so that statistics computed in the graph are constants.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ember.ir.expr import Call, Constant, Expr, call
from ember.ir.module import IRModule
from ember.ir.op import OpDef
from ember.ir.types import TensorType
from ember.transform._util import map_bodies, rewrite_graph, use_counts

_LINEAR_OPS = ("nn.conv", "nn.dense", "nn.matmul")


def _op_name(node: Expr) -> str:
    if isinstance(node, Call) and isinstance(node.op, OpDef):
        return node.op.name
    return ""


def _const(node: Expr) -> np.ndarray | None:
    return node.data if isinstance(node, Constant) else None


def _bn_scale_shift(bn: Call) -> tuple[np.ndarray, np.ndarray] | None:
    """Per-channel (scale, shift) of a batch norm with constant statistics, in float64."""
    stats = [_const(a) for a in bn.args[1:]]
    if any(s is None for s in stats):
        return None
    gamma, beta, mean, var = (np.asarray(s, dtype=np.float64) for s in stats)
    scale = gamma / np.sqrt(var + float(bn.attrs["epsilon"]))
    return scale, beta - mean * scale


def _channel_shape(ty: TensorType, axis: int) -> tuple[int, ...]:
    """Shape that broadcasts a per-channel vector along ``axis`` of a ``ty`` tensor."""
    return (ty.shape[axis],) + (1,) * (ty.ndim - axis - 1)


def _bias_vector(b: np.ndarray, out: TensorType, axis: int) -> np.ndarray | None:
    """A constant bias as a per-channel vector, or None if it varies along other axes."""
    if b.ndim > out.ndim:
        return None
    full = (1,) * (out.ndim - b.ndim) + b.shape
    for i, d in enumerate(full):
        if d != 1 and i != axis:
            return None
    vec = np.asarray(b, dtype=np.float64).reshape(-1)
    return np.broadcast_to(vec, (out.shape[axis],))


def _scaled_weight(linear: Call, scale: np.ndarray, axis: int) -> Constant | None:
    """The linear op's constant weight with the norm's scale folded in, or None."""
    w = _const(linear.args[1])
    out = linear.tensor_type
    name = _op_name(linear)
    if w is None:
        return None
    wide = np.asarray(w, dtype=np.float64)
    if name == "nn.conv" and axis == 1:
        scaled = wide * scale.reshape((-1,) + (1,) * (w.ndim - 1))
    elif name == "nn.dense" and axis == out.ndim - 1:
        scaled = wide * scale[:, None]
    elif name == "nn.matmul" and axis == out.ndim - 1 and w.ndim == 2:
        scaled = wide * scale[None, :]
    else:
        return None
    return Constant(scaled.astype(w.dtype))


class _Simplifier:
    """Rewrite rules for one function body; ``uses`` counts users in the original graph."""

    def __init__(self, body: Expr) -> None:
        self.uses = use_counts(body)
        self.new: Mapping[int, Expr] = {}

    def single_use(self, old: Expr) -> bool:
        return self.uses.get(id(old), 0) == 1

    def rule(self, old: Expr, node: Expr, new: Mapping[int, Expr]) -> Expr | None:
        name = _op_name(node)
        if name == "nn.batch_norm":
            assert isinstance(old, Call) and isinstance(node, Call)
            return self.batch_norm(old, node)
        if name == "reshape":
            return self.reshape(node)
        if name == "transpose":
            return self.transpose(node)
        if name == "cast":
            assert isinstance(node, Call)
            x = node.args[0]
            return x if x.type == node.type else None
        return None

    def batch_norm(self, old: Call, bn: Call) -> Expr | None:
        stats = _bn_scale_shift(bn)
        if stats is None:
            return None
        scale, shift = stats
        x_old, x = old.args[0], bn.args[0]
        if _op_name(x) != _op_name(x_old):
            return None  # the producer was rewritten in this round; decide in the next one
        ty = bn.tensor_type
        axis = int(bn.attrs["axis"]) % ty.ndim
        cshape = _channel_shape(ty, axis)
        folded = self.fold_into_linear(x_old, x, scale, shift, axis)
        if folded is not None:
            linear, bias = folded
            bias_const = Constant(bias.reshape(cshape).astype(ty.dtype))
            return call("add", linear, bias_const, name=bn.name)
        mul = call("multiply", x, Constant(scale.reshape(cshape).astype(ty.dtype)), name=bn.name)
        return call("add", mul, Constant(shift.reshape(cshape).astype(ty.dtype)), name=bn.name)

    def fold_into_linear(
        self, x_old: Expr, x: Expr, scale: np.ndarray, shift: np.ndarray, axis: int
    ) -> tuple[Expr, np.ndarray] | None:
        """(new linear op, new per-channel bias) when the norm's input is a foldable linear op,
        possibly followed by the add of a constant bias."""
        # Use counts are those of the input graph, so they hold for rebuilt versions of the
        # same op only (batch_norm defers when its producer was rewritten in this round).
        if not self.single_use(x_old):
            return None
        bias = np.zeros_like(shift)
        linear = x
        if _op_name(x) == "add":
            assert isinstance(x, Call) and isinstance(x_old, Call)
            lhs, rhs = x.args
            lhs_old, rhs_old = x_old.args
            if _op_name(lhs) in _LINEAR_OPS and isinstance(rhs, Constant):
                linear, b, linear_old = lhs, rhs.data, lhs_old
            elif _op_name(rhs) in _LINEAR_OPS and isinstance(lhs, Constant):
                linear, b, linear_old = rhs, lhs.data, rhs_old
            else:
                return None
            if _op_name(linear_old) != _op_name(linear) or not self.single_use(linear_old):
                return None
            if linear.type != x.type:
                return None
            vec = _bias_vector(b, x.tensor_type, axis)
            if vec is None:
                return None
            bias = vec
        if _op_name(linear) not in _LINEAR_OPS:
            return None
        assert isinstance(linear, Call)
        weight = _scaled_weight(linear, scale, axis)
        if weight is None:
            return None
        new_linear = Call(linear.op, (linear.args[0], weight), linear.attrs, name=linear.name)
        return new_linear, bias * scale + shift

    def reshape(self, node: Expr) -> Expr | None:
        assert isinstance(node, Call)
        x = node.args[0]
        if x.type == node.type:
            return x
        if _op_name(x) == "reshape":
            assert isinstance(x, Call)
            inner = x.args[0]
            if inner.type == node.type:
                return inner
            return call("reshape", inner, newshape=node.tensor_type.shape, name=node.name)
        return None

    def transpose(self, node: Expr) -> Expr | None:
        assert isinstance(node, Call)
        x = node.args[0]
        axes = tuple(node.attrs["axes"])
        if axes == tuple(range(len(axes))):
            return x
        if _op_name(x) == "transpose":
            assert isinstance(x, Call)
            inner_axes = tuple(x.attrs["axes"])
            composed = tuple(inner_axes[a] for a in axes)
            if composed == tuple(range(len(composed))):
                return x.args[0]
            return call("transpose", x.args[0], axes=composed, name=node.name)
        return None


#: rounds of rewriting at most; a round that changes nothing ends early.
MAX_ROUNDS = 8


def _simplify_body(body: Expr) -> Expr:
    for _ in range(MAX_ROUNDS):
        out = rewrite_graph(body, _Simplifier(body).rule)
        if out is body:
            break
        body = out
    return body


def simplify(mod: IRModule) -> IRModule:
    """Fold batch norms, drop no-op reshapes/transposes/casts, merge chains (see above)."""
    return map_bodies(mod, _simplify_body)
