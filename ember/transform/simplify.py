"""simplify: IRModule -> IRModule, algebraic clean-ups that keep results equal.

* Inference batch norm with constant statistics is folded away. Per channel,
  ``scale = gamma / sqrt(var + eps)`` and ``shift = beta - mean * scale``:

  - ``batch_norm(conv(x, W))`` -> ``add(conv(x, W * scale), shift)``, also through a
    constant bias ``add(conv(x, W), b)`` (bias becomes ``b * scale + shift``); the same for
    ``nn.dense`` (weights ``(N, K)``) and ``nn.matmul`` with a 2-D constant right operand,
    when the norm runs over the last axis. The producer must have no other user.
  - any other ``batch_norm(x)`` -> ``add(multiply(x, scale), shift)``.
* ``multiply`` of such a linear op (or of its constant bias add) by a per-channel constant
  folds into the weights too (a Caffe-style scale layer; float dtypes only), and chains of
  constant ``add`` or ``multiply`` merge: ``add(add(y, c1), c2)`` -> ``add(y, c1 + c2)``,
  and ``multiply(add(y, c1), c2)`` -> ``add(multiply(y, c2), c1 * c2)`` so that a chain of
  per-channel scales and shifts ends as one multiply and one add.
* ``reshape`` to the same shape and ``transpose`` by the identity permutation vanish;
  ``reshape(reshape(x))`` and ``transpose(transpose(x))`` merge into one op.
* ``cast`` to the dtype the value already has vanishes.
* ``reshape(instance_norm(reshape(x, (N, G, -1))), x.shape)`` with constant scale and bias
  (PyTorch's GroupNorm export before opset 18) becomes one ``nn.group_norm(x)`` over G
  groups, whose channels-last form convert_layout knows (the reshapes forced transposes).

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
from ember.support.dtypes import is_float
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


def _const_operand(old: Call, node: Call) -> tuple[Expr, Expr, Constant] | None:
    """For a binary call with one constant operand: (old other operand, new other operand,
    the constant); None otherwise."""
    if len(node.args) != 2:
        return None
    a, b = node.args
    a_old, b_old = old.args
    if isinstance(b, Constant) and not isinstance(a, Constant):
        return a_old, a, b
    if isinstance(a, Constant) and not isinstance(b, Constant):
        return b_old, b, a
    return None


def _linear_axis(x: Expr) -> int | None:
    """The channel axis of a linear op (conv: 1, dense/matmul: last), looking through one
    add; None when ``x`` is not one, or not floating point."""
    if not isinstance(x, Call) or not is_float(x.tensor_type.dtype):
        return None
    linear: Expr = x
    if _op_name(x) == "add":
        linear = next((a for a in x.args if _op_name(a) in _LINEAR_OPS), x)
    name = _op_name(linear)
    if name == "nn.conv":
        return 1
    if name in ("nn.dense", "nn.matmul"):
        return x.tensor_type.ndim - 1
    return None


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
        if name in ("multiply", "add"):
            assert isinstance(old, Call) and isinstance(node, Call)
            if name == "multiply":
                scaled = self.scale(old, node)
                if scaled is not None:
                    return scaled
            return self.merge_constants(old, node)
        if name == "reshape":
            assert isinstance(old, Call) and isinstance(node, Call)
            return self.group_norm(old, node) or self.reshape(node)
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
            bias = shift if bias is None else bias
            bias_const = Constant(bias.reshape(cshape).astype(ty.dtype))
            return call("add", linear, bias_const, name=bn.name)
        mul = call("multiply", x, Constant(scale.reshape(cshape).astype(ty.dtype)), name=bn.name)
        return call("add", mul, Constant(shift.reshape(cshape).astype(ty.dtype)), name=bn.name)

    def fold_into_linear(
        self, x_old: Expr, x: Expr, scale: np.ndarray, shift: np.ndarray, axis: int
    ) -> tuple[Expr, np.ndarray | None] | None:
        """(new linear op, new per-channel bias) when ``x`` is a foldable linear op, possibly
        followed by the add of a constant bias; the bias is ``bias * scale + shift``, or
        None when there was no bias add (the caller then adds ``shift`` if it needs to)."""
        # Use counts are those of the input graph, so they hold for rebuilt versions of the
        # same op only (batch_norm defers when its producer was rewritten in this round).
        if not self.single_use(x_old):
            return None
        bias: np.ndarray | None = None
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
        return new_linear, (None if bias is None else bias * scale + shift)

    def scale(self, old: Call, node: Call) -> Expr | None:
        """``multiply(linear, c)`` (or through a constant bias add) with a per-channel
        constant ``c`` -> the linear op with ``c`` folded into its weights."""
        split = _const_operand(old, node)
        if split is None:
            return None
        x_old, x, c = split
        axis = _linear_axis(x)
        if axis is None or x.type != node.type or _op_name(x) != _op_name(x_old):
            return None
        vec = _bias_vector(c.data, x.tensor_type, axis)
        if vec is None:
            return None
        folded = self.fold_into_linear(x_old, x, vec, np.zeros_like(vec), axis)
        if folded is None:
            return None
        linear, bias = folded
        if bias is None:
            return linear
        ty = node.tensor_type
        bias_const = Constant(bias.reshape(_channel_shape(ty, axis)).astype(ty.dtype))
        return call("add", linear, bias_const, name=node.name)

    def merge_constants(self, old: Call, node: Call) -> Expr | None:
        """``op(op(y, c1), c2)`` -> ``op(y, c1 op c2)`` for op in add, multiply, and
        ``(y + c1) * c2`` -> ``y * c2 + c1 * c2``."""
        split = _const_operand(old, node)
        if split is None:
            return None
        inner_old, inner, c2 = split
        name, inner_name = _op_name(node), _op_name(inner)
        distribute = name == "multiply" and inner_name == "add"
        if inner_name != _op_name(inner_old) or (inner_name != name and not distribute):
            return None
        if not self.single_use(inner_old):
            return None
        assert isinstance(inner, Call) and isinstance(inner_old, Call)
        inner_split = _const_operand(inner_old, inner)
        if inner_split is None:
            return None
        _, y, c1 = inner_split
        dtype = node.tensor_type.dtype
        if distribute:  # (y + c1) * c2 -> y * c2 + c1 * c2, so scales and shifts gather
            scaled = call("multiply", y, c2, name=node.name)
            shift = Constant(np.multiply(c1.data, c2.data).astype(dtype))
            merged = call("add", scaled, shift, name=node.name)
        else:
            fn = np.add if name == "add" else np.multiply
            merged = call(name, y, Constant(fn(c1.data, c2.data).astype(dtype)), name=node.name)
        return merged if merged.type == node.type else None

    def group_norm(self, old: Call, node: Call) -> Expr | None:
        """``reshape(instance_norm(reshape(x, (N, G, -1))))`` back to x's shape -> group_norm."""
        norm, old_norm = node.args[0], old.args[0]
        if _op_name(norm) != "nn.instance_norm" or not self.single_use(old_norm):
            return None
        assert isinstance(norm, Call) and isinstance(old_norm, Call)
        grouped = norm.args[0]
        if _op_name(grouped) != "reshape" or not self.single_use(old_norm.args[0]):
            return None
        assert isinstance(grouped, Call)
        x = grouped.args[0]
        ty, gty = x.type, grouped.type
        if not isinstance(ty, TensorType) or not isinstance(gty, TensorType) or ty != node.type:
            return None
        scale, bias = _const(norm.args[1]), _const(norm.args[2])
        if scale is None or bias is None or ty.ndim < 3 or gty.ndim != 3:
            return None
        groups = gty.shape[1]
        if gty.shape[0] != ty.shape[0] or groups < 1 or ty.shape[1] % groups:
            return None
        size = ty.shape[1] // groups
        args = [Constant(np.repeat(np.asarray(v), size).astype(ty.dtype)) for v in (scale, bias)]
        eps = float(norm.attrs["epsilon"])
        return call("nn.group_norm", x, *args, num_groups=groups, epsilon=eps, name=node.name)

    def reshape(self, node: Expr) -> Expr | None:
        assert isinstance(node, Call)
        return fold_reshape(node)

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


def fold_reshape(node: Call) -> Expr | None:
    """A reshape to its input's own shape as the input, ``reshape(reshape(x))`` as one
    reshape of x (or x when the shapes agree); None when neither applies."""
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
