"""fuse_qdq: IRModule -> IRModule, the QDQ pattern of quantized models as integer kernels.

A quantized model in QDQ form computes each layer in float between a ``dequantize`` of its
int8/uint8 inputs and a ``quantize`` of its output. Like onnxruntime's QDQ transformer
(which makes QLinearConv, QLinearMatMul and QGemm of such chains), this pass rewrites::

    quantize([relu](add(linear(dequantize(x, sx, zx), dequantize(W, sw, zw)), B)), sy, zy)

where ``linear`` is ``nn.conv``, ``nn.dense`` or ``nn.matmul``, W is a constant, B an
optional ``dequantize`` of a constant int32 bias with zero point 0, and every scale and
zero point a constant (per tensor, or per output channel for W), into::

    acc = linear(int32(x) - zx, W - zw) + B                      (int32)
    quantize([relu](float32(acc) * (sx * sw / sy)), 1, zy)

the int32 accumulation and float32 requantization of onnxruntime's kernels (the multiplier
is computed in float32 in the same order). The relu is kept as a clamp of the scaled
accumulator, which equals clamping the quantized value at ``zy``. ``fuse_ops`` then makes
the whole chain one kernel with the requantization as its epilogue. Chains that do not
match (an Add of two dequantized tensors, a pool) stay in float, as onnxruntime computes
its QLinearAdd/QLinearAveragePool in float too. Runs before constant folding, which would
otherwise fold the weights' ``dequantize`` into float constants.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ember.ir.expr import Call, Constant, Expr, call
from ember.ir.module import IRModule
from ember.ir.op import OpDef
from ember.ir.ops.common import quant_range
from ember.ir.ops.nn_conv_weights import pack_conv_weight
from ember.ir.ops.quant import QUANT_DTYPES, quant_pack_block, row_broadcast
from ember.transform._util import map_bodies, rewrite_graph, use_counts
from ember.transform.qdq_dynamic import conv_integer_int8, matmul_integer_int8
from ember.transform.qdq_int8 import int8_layer, int8_pool
from ember.transform.qdq_lut import lut_chain

_LINEAR = ("nn.conv", "nn.dense", "nn.matmul")


def _op(node: Expr) -> str:
    return node.op.name if isinstance(node, Call) and isinstance(node.op, OpDef) else ""


def _value(expr: Expr) -> np.ndarray | None:
    """The value of a Constant, possibly reshaped (how the importer shapes parameters)."""
    if _op(expr) == "reshape":
        inner = _value(expr.args[0])  # type: ignore[attr-defined]
        return None if inner is None else inner.reshape(expr.tensor_type.shape)
    return np.asarray(expr.data) if isinstance(expr, Constant) else None


def _consts(*exprs: Expr) -> list[np.ndarray] | None:
    values = [_value(e) for e in exprs]
    if any(v is None for v in values):
        return None
    return [v for v in values if v is not None]


@dataclass
class _Match:
    """The parts of one matched chain."""

    linear: Call
    bias: np.ndarray | None
    relu: bool


def _match(q: Call, uses: Mapping[int, int]) -> _Match | None:
    """The chain ending at ``quantize`` node ``q``, or None."""
    node, relu, bias = q.args[0], False, None
    if isinstance(node, Call) and _op(node) == "relu" and uses.get(id(node)) == 1:
        node, relu = node.args[0], True
    if isinstance(node, Call) and _op(node) == "add" and uses.get(id(node)) == 1:
        lhs, rhs = node.args
        if _op(lhs) not in _LINEAR:
            lhs, rhs = rhs, lhs
        bias = _int32_bias(rhs)
        if bias is None:
            return None
        node = lhs
    if _op(node) not in _LINEAR or uses.get(id(node)) != 1:
        return None
    assert isinstance(node, Call)
    x, w = node.args
    if _op(x) != "dequantize" or _op(w) != "dequantize":
        return None
    if _consts(*x.args[1:]) is None or _consts(*w.args) is None:  # type: ignore[attr-defined]
        return None
    if any(np.asarray(p).size != 1 for p in _consts(*x.args[1:]) or []):  # type: ignore[attr-defined]
        return None
    return _Match(node, bias, relu)


def _int32_bias(expr: Expr) -> np.ndarray | None:
    """The int32 values of a (reshaped) dequantize of a constant int32 with zero point 0."""
    shape = None
    if _op(expr) == "reshape":
        shape = expr.tensor_type.shape
        expr = expr.args[0]  # type: ignore[attr-defined]
    if _op(expr) != "dequantize":
        return None
    values = _consts(*expr.args)  # type: ignore[attr-defined]
    if values is None or values[0].dtype != np.int32 or np.any(values[2] != 0):
        return None
    return values[0] if shape is None else values[0].reshape(shape)


def _channel_shape(linear: Call, values: np.ndarray) -> tuple[int, ...]:
    """Where per-output-channel values go in the linear op's output."""
    if values.size == 1:
        return ()
    if _op(linear) == "nn.conv":
        return (values.size,) + (1,) * (linear.tensor_type.ndim - 2)
    return (values.size,)


def _packed_conv(conv: Call, xq: Expr, zx: int, w: np.ndarray) -> Expr | None:
    """``quantized_conv_packed`` of 8-bit data and the int32 weight packed at build time,
    for an ungrouped ``nn.conv`` whose channels divide into blocks; else None."""
    block = quant_pack_block(w.shape[0])
    x_dtype = xq.tensor_type.dtype
    if _op(conv) != "nn.conv" or int(conv.attrs["groups"]) != 1 or not block:
        return None
    if x_dtype not in ("int8", "uint8"):
        return None
    attrs = {k: conv.attrs[k] for k in ("strides", "padding", "dilation")}
    wp = Constant(pack_conv_weight(w, block))
    return call(
        "quantized_conv_packed",
        xq,
        wp,
        name=conv.name,
        channels=w.shape[0],
        x_zero_point=zx,
        **attrs,
    )


def _rewrite(q: Call, m: _Match, new: Mapping[int, Expr], int8_kernels: bool) -> Expr | None:
    x_dq, w_dq = m.linear.args
    xq = new[id(x_dq.args[0])]  # type: ignore[attr-defined]
    sx, zx = _consts(*x_dq.args[1:])  # type: ignore[attr-defined, misc]
    wq, sw, zw = _consts(*w_dq.args)  # type: ignore[attr-defined, misc]
    out_params = _consts(*q.args[1:])
    if out_params is None or out_params[0].size != 1:
        return None
    sy, zy = out_params
    out_axis = {"nn.conv": 0, "nn.dense": 0, "nn.matmul": -1}[_op(m.linear)]
    if sw.size > 1 and (sw.ndim < 1 or sw.shape[out_axis] != sw.size):
        return None  # a weight quantized along its reduction axis
    wi = (wq.astype(np.int32) - zw.astype(np.int32)).astype(np.int32)
    sw32 = np.asarray(sw, np.float32).reshape(-1)
    mult = (np.float32(sx.reshape(())) * sw32 / np.float32(sy.reshape(()))).astype(np.float32)
    dtype = q.tensor_type.dtype
    zx_int, zy_int = int(zx.reshape(())), int(zy.reshape(()))
    if int8_kernels:
        layer = int8_layer(m.linear, xq, zx_int, wi, m.bias, mult, m.relu, zy_int, dtype)
        if layer is not None:
            return layer
    acc = _packed_conv(m.linear, xq, zx_int, wi)
    if acc is None:
        xi: Expr = call("cast", xq, dtype="int32")
        if np.any(zx != 0):
            xi = call("subtract", xi, Constant(np.asarray(zx, np.int32).reshape(())))
        acc = call(_op(m.linear), xi, Constant(wi), name=m.linear.name, **dict(m.linear.attrs))
    if m.bias is not None:
        acc = call("add", acc, Constant(m.bias))
    mult = mult.reshape(_channel_shape(m.linear, mult))
    scaled: Expr = call("multiply", call("cast", acc, dtype="float32"), Constant(mult))
    if m.relu:
        scaled = call("relu", scaled)
    one = Constant(np.ones((), np.float32))
    return call("quantize", scaled, one, Constant(zy.reshape(())), dtype=dtype, name=q.name)


def _scalar_dq(expr: Expr, new: Mapping[int, Expr]) -> tuple[Expr, float, int] | None:
    """(rewritten input, scale, zero point) of a per-tensor dequantize, else None."""
    if _op(expr) != "dequantize":
        return None
    params = _consts(*expr.args[1:])  # type: ignore[attr-defined]
    if params is None or any(p.size != 1 for p in params):
        return None
    x = new[id(expr.args[0])]  # type: ignore[attr-defined]
    if x.tensor_type.dtype not in QUANT_DTYPES:
        return None
    return x, float(params[0].reshape(())), int(params[1].reshape(()))


def _rewrite_add(
    q: Call, new: Mapping[int, Expr], uses: Mapping[int, int], int8_kernels: bool
) -> Expr | None:
    """quantize([relu](add(dequantize(a), dequantize(b)))) -> ``quantized_add``,
    onnxruntime's QLinearAdd arithmetic:
    ``rint(fma(a, sa/sc, fma(b, sb/sc, zc - ((sa/sc) * za + (sb/sc) * zb))))``, the
    ratios and the fixed part in float32, saturated to the output type. A relu is taken
    only when the output zero point is the type's minimum (then the saturation is the relu;
    onnxruntime drops such a Relu before its QDQ fusion too)."""
    add = q.args[0]
    out = _consts(*q.args[1:])
    if out is None or out[0].size != 1:
        return None
    if _op(add) == "relu" and uses.get(id(add.args[0])) == 1:  # type: ignore[attr-defined]
        if int(out[1].reshape(())) != quant_range(q.tensor_type.dtype)[0]:
            return None
        add = add.args[0]  # type: ignore[attr-defined]
    if _op(add) != "add":
        return None
    lhs, rhs = (_scalar_dq(a, new) for a in add.args)  # type: ignore[attr-defined]
    if lhs is None or rhs is None:
        return None
    f32 = np.float32
    sc, zc = f32(out[0].reshape(())), f32(out[1].reshape(()))
    r_a, r_b = f32(lhs[1]) / sc, f32(rhs[1]) / sc
    fixed = zc - (r_a * f32(lhs[2]) + r_b * f32(rhs[2]))

    dtype = q.tensor_type.dtype
    same = lhs[0].tensor_type.shape == rhs[0].tensor_type.shape == q.tensor_type.shape
    eight = {lhs[0].tensor_type.dtype, rhs[0].tensor_type.dtype, dtype} <= {"int8", "uint8"}
    return call(
        "quantized_add_int8" if int8_kernels and same and eight else "quantized_add",
        lhs[0],
        rhs[0],
        ratio_a=float(r_a),
        ratio_b=float(r_b),
        fixed=float(fixed),
        dtype=dtype,
        name=q.name,
    )


def _rewrite_concat(q: Call) -> Expr | None:
    """quantize(concatenate(dequantize(x_i)...)) of 8-bit tensors -> the concatenation of
    each input's bytes requantized to the output's parameters: a table of 256 values, or the
    bytes themselves where an input has the output's scale and zero point (onnxruntime's
    QLinearConcat). Before, every element went through float (YOLO's concatenations: 3.2 ms
    against onnxruntime's 0.6)."""
    cat, eight = q.args[0], ("int8", "uint8")
    if _op(cat) != "concatenate" or q.tensor_type.dtype not in eight:
        return None
    out = _consts(*q.args[1:])
    if out is None or out[0].size != 1:
        return None
    parts = []
    for arg in cat.args:  # type: ignore[attr-defined]
        if _op(arg) != "dequantize" or arg.args[0].tensor_type.dtype not in eight:  # type: ignore[attr-defined]
            return None
        part = lut_chain(call("quantize", arg, *q.args[1:], dtype=q.tensor_type.dtype))
        if part is None:
            return None
        parts.append(part)
    return call("concatenate", *parts, name=q.name, **dict(cat.attrs))  # type: ignore[attr-defined]


def _rewrite_max_pool(q: Call, new: Mapping[int, Expr], int8_kernels: bool) -> Expr | None:
    """quantize(max_pool(dequantize(x))) with the same scale, zero point and type on both
    sides -> ``max_pool(x)`` on the integers (exact: the window maximum commutes with the
    increasing dequantize, and quantize(dequantize(v)) is v)."""
    pool = q.args[0]
    if _op(pool) != "nn.max_pool":
        return None
    src = _scalar_dq(pool.args[0], new)  # type: ignore[attr-defined]
    out = _consts(*q.args[1:])
    if src is None or out is None or out[0].size != 1:
        return None
    x, scale, zp = src
    same = np.float32(scale) == np.float32(out[0].reshape(())) and zp == int(out[1].reshape(()))
    if not same or x.tensor_type.dtype != q.tensor_type.dtype or scale <= 0:
        return None
    op = "quantized_max_pool_int8" if int8_kernels and int8_pool(pool, x) else "nn.max_pool"
    return call(op, x, name=pool.name, **dict(pool.attrs))  # type: ignore[attr-defined]


def _rewrite_global_avg_pool(q: Call, new: Mapping[int, Expr]) -> Expr | None:
    """quantize(global_avg_pool(dequantize(x))) of 8-bit NCHW data, per-tensor parameters ->
    ``quantized_global_avg_pool_int8``: onnxruntime's QLinearGlobalAveragePool (the QDQ
    transformer makes it of this chain), integer sums and one float32 multiplier
    ``sx / (sy * H * W)`` (taken where onnxruntime takes it: in [2^-32, 256))."""
    pool = q.args[0]
    if _op(pool) != "nn.global_avg_pool" or pool.attrs["data_layout"] != "NCHW":  # type: ignore[attr-defined]
        return None
    src = _scalar_dq(pool.args[0], new)  # type: ignore[attr-defined]
    out = _consts(*q.args[1:])
    if src is None or out is None or out[0].size != 1:
        return None
    x, sx, zx = src
    eight = {x.tensor_type.dtype, q.tensor_type.dtype} <= {"int8", "uint8"}
    if not eight or x.tensor_type.ndim != 4:
        return None
    hw = int(x.tensor_type.shape[2]) * int(x.tensor_type.shape[3])
    f32 = np.float32
    scale = f32(sx) / (f32(out[0].reshape(())) * f32(hw))
    if not 2.0**-32 <= scale < 256.0:
        return None
    return call(
        "quantized_global_avg_pool_int8",
        x,
        scale=float(scale),
        x_zero_point=zx,
        y_zero_point=int(out[1].reshape(())),
        dtype=q.tensor_type.dtype,
        name=pool.name,  # type: ignore[attr-defined]
    )


def _exact_first(q: Call) -> bool:
    """Chains whose integer arithmetic (onnxruntime's) comes before any table: an add of a
    constant (``_adds_a_constant``) and every multiply of two dequantized values."""
    node = q.args[0]
    if _op(node) == "multiply":
        return all(_op(arg) == "dequantize" for arg in node.args)  # type: ignore[attr-defined]
    return _adds_a_constant(q)


def _rewrite_mul(q: Call, new: Mapping[int, Expr]) -> Expr | None:
    """quantize(multiply(dequantize(a), dequantize(b))), per-tensor parameters ->
    ``quantized_mul``: onnxruntime's QLinearMul on x86, the exact integer product
    ``(a - za) * (b - zb)`` times ``sa * sb / sc`` (float32, in that order), rounded half
    to even. The float chain rounds ``(a - za) sa (b - zb) sb / sc`` instead, which at a
    tie may land one step off (Whisper's attention scaling: 1 element in 13.5 M, spread
    by the later layers to 11% of the outputs)."""
    mul = q.args[0]
    out = _consts(*q.args[1:])
    if _op(mul) != "multiply" or out is None or out[0].size != 1:
        return None
    lhs, rhs = (_scalar_dq(a, new) for a in mul.args)  # type: ignore[attr-defined]
    if lhs is None or rhs is None:
        return None
    dtype = q.tensor_type.dtype
    if {lhs[0].tensor_type.dtype, rhs[0].tensor_type.dtype, dtype} - {"int8", "uint8"}:
        return None
    f32 = np.float32
    ratio = f32(f32(lhs[1]) * f32(rhs[1])) / f32(out[0].reshape(()))
    return call(
        "quantized_mul", lhs[0], rhs[0], ratio=float(ratio), a_zero_point=lhs[2],
        b_zero_point=rhs[2], zero_point=int(out[1].reshape(())), dtype=dtype, name=q.name,
    )  # fmt: skip


def _mul_kernel(mul: Call) -> Call:
    """``quantized_mul`` as the C kernel ``quantized_mul_int8`` where one operand is whole
    and the other whole or one value per row (a squeeze-excitation block's scale): its
    steps on 16 lanes, not float64 loops (EfficientNet-B0's 16 SE products: ... ms)."""
    a, b = mul.args
    if row_broadcast(a.tensor_type.shape, b.tensor_type.shape, mul.tensor_type.shape) is None:
        return mul
    return call("quantized_mul_int8", a, b, name=mul.name, **dict(mul.attrs))


def _adds_a_constant(q: Call) -> bool:
    """``quantize([relu](add(dequantize(x), dequantize(constant))))``: the add kernel
    computes it with onnxruntime's QLinearAdd arithmetic, which a table (the float chain)
    does not match at rounding ties (GELU's ``erf + 1`` lands on half steps: 29% of its
    outputs differed by one)."""
    node = q.args[0]
    if _op(node) == "relu":
        node = node.args[0]  # type: ignore[attr-defined]
    if _op(node) != "add":
        return False
    return any(
        _op(arg) == "dequantize" and isinstance(arg.args[0], Constant)  # type: ignore[attr-defined]
        for arg in node.args  # type: ignore[attr-defined]
    )


def fuse_qdq(mod: IRModule, int8_kernels: bool = True) -> IRModule:
    """dequantize -> conv/dense/matmul [-> add bias] [-> relu] -> quantize chains as integer
    kernels with a requantizing epilogue (``int8_kernels``: whole-layer 8-bit kernels where
    the weights allow, see ember/transform/qdq_int8.py; else int32 kernels)."""

    def body_fn(root: Expr) -> Expr:
        uses = use_counts(root)

        def rule(old: Expr, rebuilt: Expr, new: Mapping[int, Expr]) -> Expr | None:
            if int8_kernels and _op(old) == "nn.matmul":  # MatMulInteger (dynamic)
                return matmul_integer_int8(rebuilt)  # type: ignore[arg-type]
            if int8_kernels and _op(old) == "nn.conv":  # ConvInteger (dynamic)
                return conv_integer_int8(rebuilt)  # type: ignore[arg-type]
            if _op(old) != "quantize":
                return None
            assert isinstance(old, Call)
            m = _match(old, uses)
            if m is not None:
                return _rewrite(old, m, new, int8_kernels)
            table = None
            if int8_kernels and not _exact_first(old):  # onnxruntime's arithmetic first
                table = lut_chain(rebuilt)  # type: ignore[arg-type]
            if table is not None:  # a function of one 8-bit tensor: before an add kernel
                return table
            if uses.get(id(old.args[0])) == 1:
                out = _rewrite_concat(rebuilt) if int8_kernels else None  # type: ignore[arg-type]
                out = out or _rewrite_add(old, new, uses, int8_kernels)
                mul = None if out is not None or not int8_kernels else _rewrite_mul(old, new)
                if mul is not None:  # a table of it where it is a function of one byte
                    return lut_chain(mul) or _mul_kernel(mul)  # type: ignore[arg-type]
                out = out or _rewrite_max_pool(old, new, int8_kernels)
                if int8_kernels:  # a C kernel (the llvm kinds refuse int8 kernels)
                    out = out or _rewrite_global_avg_pool(old, new)
                if out is not None:
                    return out
            return lut_chain(rebuilt) if int8_kernels else None  # type: ignore[arg-type]

        return rewrite_graph(root, rule)

    return map_bodies(mod, body_fn)
