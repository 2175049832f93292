"""Computes of ``quantize`` and ``dequantize``: elementwise float32 arithmetic that fuses
into the epilogue of the group that produces its input (a convolution's int32 accumulator
becomes int8 in registers, never stored as int32).

Contract: the numpy references of ember/ir/ops/quant.py, bit for bit: ``rint`` (the C
``rintf``, round half to even in the default rounding mode), clamping in float32 before the
conversion, so no out-of-range float is ever converted to an integer.

The whole-layer int8 ops (``quantized_conv_int8``, ``quantized_dwconv_int8``,
``quantized_dense_int8``, ``quantized_add_int8``) are one ``call_extern`` each into the C
kernels of ember/codegen/c/int8_kernels.py and int8_dwconv_add.py, with heap scratch for
the packed panels; the llvm kinds refuse them (schedule key ``llvm``) with a clear error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ember import tir
from ember.errors import CompileError
from ember.ir.op import Attrs
from ember.ir.ops.common import padding, quant_range, spatial
from ember.ir.ops.quant import row_broadcast
from ember.ir.ops.quant_int8_ref import FIX_SLOT
from ember.ir.types import TensorType, Type
from ember.ops.common import load_broadcast, out_tensor_type, static_shape
from ember.ops.elemwise import clamp
from ember.ops.nn_conv import pad_tensor
from ember.ops.nn_schedule_tiles import schedule_packed_conv
from ember.ops.registry import ScheduleContext, register_compute, register_schedule
from ember.tir import (
    Allocate,
    Buffer,
    PrimExpr,
    Stmt,
    StorageKind,
    call_extern,
    const,
    decl_buffer,
    eq,
    seq,
    te,
)
from ember.tir.stmt import AssertStmt


def _f32(e: PrimExpr) -> PrimExpr:
    return e if e.dtype == "float32" else e.astype("float32")


@register_compute("quantize")
def quantize(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """saturate(rint(x / scale) + zero_point), in float32."""
    x, scale, zp = inputs
    ty = out_tensor_type(out_type)
    lo, hi = quant_range(ty.dtype)

    def body(*i: Any) -> PrimExpr:
        v = _f32(load_broadcast(x, i))
        s = _f32(load_broadcast(scale, i))
        z = _f32(load_broadcast(zp, i))
        q = tir.round(v / s) + z
        q = clamp(q, tir.const(float(lo), "float32"), tir.const(float(hi), "float32"))
        return q.astype(ty.dtype)

    return te.compute(ty.shape, body, "T_quantize")


@register_compute("dequantize")
def dequantize(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """float32(x - zero_point) * scale (the difference in int32), in scale's dtype."""
    x, scale, zp = inputs
    ty = out_tensor_type(out_type)

    def body(*i: Any) -> PrimExpr:
        v = load_broadcast(x, i).astype("int32") - load_broadcast(zp, i).astype("int32")
        y = v.astype("float32") * _f32(load_broadcast(scale, i))
        return y if ty.dtype == "float32" else y.astype(ty.dtype)

    return te.compute(ty.shape, body, "T_dequantize")


@register_compute("quantized_add")
def quantized_add(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """Two fused multiply-adds, each exact in float64 and rounded once to float32."""
    a, b = inputs
    ty = out_tensor_type(out_type)
    lo, hi = quant_range(ty.dtype)
    ratio_a = tir.const(float(np.float32(attrs["ratio_a"])), "float64")
    ratio_b = tir.const(float(np.float32(attrs["ratio_b"])), "float64")
    fixed = tir.const(float(np.float32(attrs["fixed"])), "float64")

    def body(*i: Any) -> PrimExpr:
        inner = (load_broadcast(b, i).astype("float64") * ratio_b + fixed).astype("float32")
        wide = load_broadcast(a, i).astype("float64") * ratio_a + inner.astype("float64")
        q = tir.round(wide.astype("float32"))
        q = clamp(q, tir.const(float(lo), "float32"), tir.const(float(hi), "float32"))
        return q.astype(ty.dtype)

    return te.compute(ty.shape, body, "T_quantized_add")


@register_compute("quantized_mul")
def quantized_mul(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """The int32 product of the shifted operands times ``ratio``, plus the zero point, each
    step rounded to float32 (computed exactly in float64 and rounded: no contraction into
    an FMA can change it), then rounded half to even."""
    a, b = inputs
    ty = out_tensor_type(out_type)
    lo, hi = quant_range(ty.dtype)
    ratio = tir.const(float(np.float32(attrs["ratio"])), "float64")
    za, zb = int(attrs["a_zero_point"]), int(attrs["b_zero_point"])
    zc = tir.const(float(attrs["zero_point"]), "float64")

    def body(*i: Any) -> PrimExpr:
        va = load_broadcast(a, i).astype("int32") - za
        vb = load_broadcast(b, i).astype("int32") - zb
        scaled = ((va * vb).astype("float64") * ratio).astype("float32")
        q = tir.round((scaled.astype("float64") + zc).astype("float32"))
        q = clamp(q, tir.const(float(lo), "float32"), tir.const(float(hi), "float32"))
        return q.astype(ty.dtype)

    return te.compute(ty.shape, body, "T_quantized_mul")


@register_compute("quantized_conv_packed")
def quantized_conv_packed(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """The packed convolution of ember.ops.nn_conv on integers: the input minus its zero
    point as int32 in the padded buffer (so the producer stores 8 bits, and the padding is
    the zero point), int32 products and accumulators (vpmulld: int16 operands measured
    1.4x slower on ResNet-50, the widening loads cost more than the halved bytes save),
    output channels innermost (the vector lanes) in blocks of the packed weight."""
    x, wp = inputs
    ty = out_tensor_type(out_type)
    wshape = static_shape(wp)
    nsp = len(wshape) - 3
    strides, dilation = spatial(attrs, "strides", nsp, 1), spatial(attrs, "dilation", nsp, 1)
    pads = padding(attrs, nsp)
    zp = tir.const(int(attrs["x_zero_point"]), "int32")
    block = wshape[-1]
    shifted = te.compute(static_shape(x), lambda *i: x[i].astype("int32") - zp, "shift")
    begin, end = tuple(b for b, _ in pads), tuple(e for _, e in pads)
    xp = pad_tensor(shifted, begin, end, materialize=True)
    rc = te.reduce_axis(wshape[1], "rc")
    rk = [te.reduce_axis(wshape[2 + k], f"rk{k}") for k in range(nsp)]

    def body(n: Any, *rest: Any) -> PrimExpr:
        *sp, o = rest
        src = [sp[k] * strides[k] + rk[k].var * dilation[k] for k in range(nsp)]
        taps = [r.var for r in rk]
        prod = xp[(n, rc.var, *src)] * wp[(o // block, rc.var, *taps, o % block)]
        return te.sum(prod, axis=[rc, *rk])

    shape = (ty.shape[0], *ty.shape[2:], wshape[0] * block)
    acc = te.compute(shape, body, "conv", attrs={"block": block})
    return te.compute(ty.shape, lambda n, o, *sp: acc[(n, *sp, o)], "conv_out")


register_schedule("quantized_conv_packed")(schedule_packed_conv)


# --- whole int8 layers: one call of a C kernel of ember/codegen/c/int8_kernels.py each ---

#: bytes of patch panels packed per chunk of a convolution (kept in the L2 cache): 96 KB ->
#: 192 KB (fewer passes over the weights per image; in-process interleaved A/B, load ~1):
#: ResNet-50 int8 1 thread (CPU time) 12.31 -> 12.23, 12.43 -> 12.31 ms, 2 threads (wall)
#: 8.68 -> 8.38 ms; MobileNetV2 int8 1 thread 1.528 -> 1.513, 1.460 -> 1.461 ms. Per layer
#: (ResNet-50) 48 KB won on 1x1 layers of K 256-512 to 64-128 channels, but not as a rule
#: over the whole model; 256 KB measured 0.6% under 192 KB (noise level).
CONV_CHUNK_BYTES = 192 * 1024

#: at least this many panels per chunk, whatever K: the AVX-512 tile covers 4 panels (64
#: positions) per weight block, and with 1-2 panel chunks (K of 2304-4608: ResNet-50's 3x3
#: layers at 14x14 and 7x7) it ran 1-2 panel tiles, latency-bound on 4-8 accumulators.
CONV_MIN_CHUNK = 4


def _i32(*values: int) -> list[PrimExpr]:
    return [const(int(v), "int32") for v in values]


def _kernel_call(name: str, ins: list[Buffer], out: Buffer, nbytes: int, *ints: int) -> Stmt:
    """``name(x, w, bias, mult, y, scratch, ints...)`` with ``nbytes`` of heap scratch."""
    scratch = decl_buffer((max(nbytes, 64),), "uint8", f"{name}_scratch")
    args = [b.data for b in ins] + [out.data, scratch.data] + _i32(*ints)
    check = AssertStmt(eq(call_extern("int32", name, *args), 0), "", seq())
    return Allocate(scratch, check, StorageKind.HEAP)


def _layer_extern(
    name: str, tag: str, inputs: list[te.Tensor], ty: TensorType, nbytes: int, ints: list[int]
) -> te.Tensor:
    """One int8 layer as ``te.extern`` calling kernel ``name`` with ``nbytes`` of scratch."""

    def body(ins: list[Buffer], outs: list[Buffer]) -> Stmt:
        return _kernel_call(name, ins, outs[0], nbytes, *ints)

    out = te.extern(ty.shape, inputs, body, tag, dtype=ty.dtype)
    assert isinstance(out, te.Tensor)
    return out


def _conv_geometry(x: te.Tensor, attrs: Attrs, out_type: Type) -> list[int]:
    """N, C, H, W, KH, KW, OH, OW, strides, pads (begin), dilations."""
    n, c, h, w = static_shape(x)
    oh, ow = (int(d) for d in out_tensor_type(out_type).shape[2:])
    kh, kw = spatial(attrs, "kernel", 2, 1)
    (ph, _), (pw, _) = padding(attrs, 2)
    sh, sw = spatial(attrs, "strides", 2, 1)
    dh, dw = spatial(attrs, "dilation", 2, 1)
    return [n, c, h, w, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw]


def _epilogue(attrs: Attrs, out_type: Type) -> list[int]:
    signed = out_tensor_type(out_type).dtype == "int8"
    return [int(attrs["y_zero_point"]), int(bool(attrs["relu"])), int(signed)]


def _conv_plan(x: te.Tensor, attrs: Attrs, out_type: Type, ybytes: int) -> tuple[list[int], int]:
    """(geometry ints N..dw, scratch bytes) of ``ember_q8_conv``'s driver; ``ybytes``: output
    bytes per position of an 8-row block (8 requantized, 32 int32: the AVX-512 tiles' rows)."""
    n, c, h, w, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw = _conv_geometry(x, attrs, out_type)
    k4 = (c * kh * kw + 3) // 4
    npan = (oh * ow + 15) // 16
    chunk = min(npan, max(CONV_MIN_CHUNK, CONV_CHUNK_BYTES // (k4 * 64)))
    ld = 16 * chunk
    # the padded image as sh x sw phase planes of hq x wq (every tap a contiguous run)
    hq, wq = oh + (kh - 1) * dh // sh, ow + (kw - 1) * dw // sw
    flat = (kh, kw, ph, pw) != (1, 1, 0, 0)
    # offsets (two tables of 4 * k4 longs), a zero row, the phase planes or subsampled image;
    subsample = not flat and (sh, sw) != (1, 1)  # 1x1 strided
    image = c * sh * sw * hq * wq + wq + 64 if flat else (c * oh * ow if subsample else 0)
    # a serial run's panels | ybuf | im2col rows | 4 tail columns follow (64-aligned); parallel
    # tasks allocate
    task = chunk * k4 * 64 + ybytes * ld + (0 if flat else c * kh * kw * ld) + 16 * k4 + 64
    nbytes = 2 * 8 * 4 * k4 + ld + image + 64 + task
    m = int(attrs["channels"])
    return [n, c, h, w, m, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw, chunk], nbytes


def _fix_slots(w: te.Tensor, geometry: list[int]) -> int:
    """Fix slots per packed weight row (``pack_conv_rows``): the columns past K's."""
    k4 = (geometry[1] * geometry[5] * geometry[6] + 3) // 4
    return (int(static_shape(w)[1]) - 4 * k4) // FIX_SLOT


@register_compute("quantized_conv_int8")
def quantized_conv_int8(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """``ember_q8_conv``: patches packed per chunk of 16-position panels, 4x16 int8 tiles."""
    ty = out_tensor_type(out_type)
    geometry, nbytes = _conv_plan(inputs[0], attrs, out_type, 8)
    ints, chunk = geometry[:-1], geometry[-1]
    flip = 128 if attrs["flip"] else 0  # the padding byte: the data's own zero point
    ints += [int(attrs["x_zero_point"]) ^ flip, flip]
    ints += [*_epilogue(attrs, out_type), chunk, _fix_slots(inputs[1], geometry)]
    return _layer_extern("ember_q8_conv", "q8_conv", inputs, ty, nbytes, ints)


@register_compute("quantized_conv_integer_int8")
def quantized_conv_integer_int8(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """``ember_q8_conv_integer``: the convolution's driver, int32 out, a run-time zero point."""
    ty = out_tensor_type(out_type)
    geometry, nbytes = _conv_plan(inputs[0], attrs, out_type, 32)
    ints = geometry[:-1] + [int(bool(attrs["flip"])) * 128, geometry[-1]]
    ints.append(_fix_slots(inputs[2], geometry))
    nbytes += (4 * int(attrs["channels"]) + 63) // 64 * 64
    return _layer_extern("ember_q8_conv_integer", "q8_convi", inputs, ty, nbytes, ints)


@register_compute("quantized_dwconv_int8")
def quantized_dwconv_int8(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """``ember_q8_dwconv``: int16 planes split by column phase, taps in pairs."""
    x = inputs[0]
    ty = out_tensor_type(out_type)
    n, c, h, w, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw = _conv_geometry(x, attrs, out_type)
    hp = (oh - 1) * sh + (kh - 1) * dh + 1
    wp = (ow - 1) * sw + (kw - 1) * dw + 1
    phases = 2 * sw * hp * ((wp + sw - 1) // sw + 16)
    hq, wq = oh + (kh - 1) * dh // sh, ow + (kw - 1) * dw // sw
    flat = 2 * (sh * sw * hq * wq + wq + 32) + oh * wq + 32  # AVX2: phase planes, output rows
    nbytes = max(phases, flat, 416)  # AVX-512 VBMI: ember_q8_s2small_tab's 416 bytes
    ints = [n, c, h, w, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw, int(attrs["x_zero_point"])]
    ints += [int(x.dtype == "int8"), *_epilogue(attrs, out_type), nbytes]  # a serial run's plane

    return _layer_extern("ember_q8_dwconv", "q8_dwconv", inputs, ty, nbytes, ints)


@register_compute("quantized_dense_int8")
def quantized_dense_int8(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """``ember_q8_dense``: rows of x broadcast 4 bytes at a time against weight panels."""
    x = inputs[0]
    ty = out_tensor_type(out_type)
    shape = static_shape(x)
    k = int(shape[-1])
    rows = 1
    for d in shape[:-1]:
        rows *= int(d)
    nbytes = (rows + 3) // 4 * 4 * ((k + 3) // 4 * 4)
    ints = [rows, k, int(attrs["units"]), int(bool(attrs["flip"])) * 128]
    ints += _epilogue(attrs, out_type)

    return _layer_extern("ember_q8_dense", "q8_dense", inputs, ty, nbytes, ints)


@register_compute("quantized_matmul_integer_int8")
def quantized_matmul_integer_int8(
    inputs: list[te.Tensor], attrs: Attrs, out_type: Type
) -> te.Tensor:
    """``ember_q8_matmul_integer``: the dense tiles, int32 out, a run-time zero point."""
    x = inputs[0]
    ty = out_tensor_type(out_type)
    shape = static_shape(x)
    k, n = int(shape[-1]), int(attrs["units"])
    rows = 1
    for d in shape[:-1]:
        rows *= int(d)
    nbytes = (rows + 3) // 4 * 4 * ((k + 3) // 4 * 4) + 4 * ((n + 15) // 16 * 16) + 64
    ints = [rows, k, n, int(bool(attrs["flip"])) * 128]
    return _layer_extern("ember_q8_matmul_integer", "q8_mmi", inputs, ty, nbytes, ints)


def _status_extern(
    kernel: str, tag: str, inputs: list[te.Tensor], ty: TensorType, args: Callable[..., list]
) -> te.Tensor:
    """``te.extern`` calling C ``kernel`` with ``args(ins, outs)``, asserting it returns 0."""

    def body(ins: list[Buffer], outs: list[Buffer]) -> Stmt:
        status = call_extern("int32", kernel, *args(ins, outs))
        return AssertStmt(eq(status, 0), "", seq())

    out = te.extern(ty.shape, inputs, body, tag, dtype=ty.dtype)
    assert isinstance(out, te.Tensor)
    return out


@register_compute("quantized_add_int8")
def quantized_add_int8(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """``ember_q8_qlinear_add``: the arithmetic of ``quantized_add`` with FMA instructions."""
    a, b = inputs
    ty = out_tensor_type(out_type)
    ratios = [tir.const(float(np.float32(attrs[k])), "float32") for k in ("ratio_a", "ratio_b")]
    fixed = tir.const(float(np.float32(attrs["fixed"])), "float32")
    signs = _i32(a.dtype == "int8", b.dtype == "int8", ty.dtype == "int8")
    count = const(int(ty.size), "int32")
    return _status_extern(
        "ember_q8_qlinear_add",
        "q8_add",
        inputs,
        ty,
        lambda ins, outs: [ins[0].data, ins[1].data, outs[0].data, count, *ratios, fixed, *signs],
    )


@register_compute("quantized_table_int8")
def quantized_table_int8(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """``ember_q8_table``: 64 bytes at a time through two ``vpermi2b`` with AVX512_VBMI."""
    ty = out_tensor_type(out_type)
    count = const(int(ty.size), "int64")
    return _status_extern(
        "ember_q8_table",
        "q8_table",
        inputs,
        ty,
        lambda ins, outs: [ins[0].data, ins[1].data, outs[0].data, count],
    )


@register_compute("quantized_mul_int8")
def quantized_mul_int8(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """``ember_q8_qlinear_mul``: ``quantized_mul``'s steps on 16 lanes (float32 multiply,
    then add: the same roundings as its float64 form), a per-row operand broadcast."""
    a, b = inputs
    ty = out_tensor_type(out_type)
    form = row_broadcast(static_shape(a), static_shape(b), ty.shape)
    if form is None:
        raise CompileError(
            f"quantized_mul_int8: operands {static_shape(a)} and {static_shape(b)} are not "
            f"whole or one value per row of {tuple(ty.shape)}; use quantized_mul"
        )
    rows, inner, which = form
    ratio = tir.const(float(np.float32(attrs["ratio"])), "float32")
    zc = tir.const(float(attrs["zero_point"]), "float32")
    ints = [int(attrs["a_zero_point"]), int(attrs["b_zero_point"])]
    ints += [int(a.dtype == "int8"), int(b.dtype == "int8"), int(ty.dtype == "int8")]
    shape = [const(rows, "int64"), const(inner, "int64"), const(which, "int32")]
    return _status_extern(
        "ember_q8_qlinear_mul",
        "q8_mul",
        inputs,
        ty,
        lambda ins, outs: [ins[0].data, ins[1].data, outs[0].data, *shape, ratio, zc, *_i32(*ints)],
    )


@register_compute("quantized_max_pool_int8")
def quantized_max_pool_int8(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """``ember_q8_max_pool``: row maxima, then maxima down the rows, 32 bytes at a time."""
    x = inputs[0]
    ty = out_tensor_type(out_type)
    n, c, h, w = static_shape(x)
    oh, ow = (int(d) for d in ty.shape[2:])
    kh, kw = (int(k) for k in attrs["pool_size"])
    (ph, _), (pw, _) = padding(attrs, 2)
    sh, sw = spatial(attrs, "strides", 2, 1)
    dh, dw = spatial(attrs, "dilation", 2, 1)
    nbytes = h * ow + (ow - 1) * sw + (kw - 1) * dw + 1 + 64
    ints = [n * c, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, 128 if x.dtype == "int8" else 0]

    return _layer_extern("ember_q8_max_pool", "q8_max_pool", inputs, ty, nbytes, ints)


@register_compute("quantized_global_avg_pool_int8")
def quantized_global_avg_pool_int8(
    inputs: list[te.Tensor], attrs: Attrs, out_type: Type
) -> te.Tensor:
    """``ember_q8_global_avg_pool``: per plane an integer sum (vpsadbw), one multiply."""
    x = inputs[0]
    ty = out_tensor_type(out_type)
    n, c, h, w = (int(d) for d in static_shape(x))
    scale = tir.const(float(np.float32(attrs["scale"])), "float32")
    ints = [n * c, h * w, int(attrs["x_zero_point"]), int(attrs["y_zero_point"])]
    ints += [int(x.dtype == "int8"), int(ty.dtype == "int8")]
    return _status_extern(
        "ember_q8_global_avg_pool",
        "q8_gap",
        inputs,
        ty,
        lambda ins, outs: [ins[0].data, outs[0].data, scale, *_i32(*ints)],
    )


def _c_only(ctx: ScheduleContext) -> None:
    raise CompileError(
        f"target '{ctx.target}': the int8 kernels (vpmaddubsw tiles) are C source; compile "
        "quantized models with the c target, or disable the int8 kernels for this build: "
        "PassContext(config={'fuse_qdq.int8_kernels': False}) keeps the portable int32 path"
    )


_INT8_OPS = (
    "quantized_conv_int8",
    "quantized_dwconv_int8",
    "quantized_dense_int8",
    "quantized_matmul_integer_int8",
    "quantized_conv_integer_int8",
)
_POOLS = ("quantized_max_pool_int8", "quantized_global_avg_pool_int8")
_ELEMENTWISE = ("quantized_add_int8", "quantized_mul_int8", "quantized_table_int8")
for _name in (*_INT8_OPS, *_ELEMENTWISE, *_POOLS):
    register_schedule(_name, key="llvm")(_c_only)
