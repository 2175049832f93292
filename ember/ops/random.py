"""Computes of the seeded random ops (ember/ir/ops/random.py): one ``call_extern`` each into
the C kernels of ember/codegen/c/random.py (numpy's legacy RandomState, bit for bit).

Each kernel seeds its generator state in a scratch buffer of its own (heap in a library
build; the planned static scratch in AOT and standalone builds, which allocate nothing),
so every run gives the same numbers. The C target compiles the kernels' source into each
library; code of the llvm and llvmjit targets calls the same kernels exported by the
runtime library.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ember.ir.op import Attrs
from ember.ir.types import Type
from ember.ops.common import out_tensor_type, static_shape
from ember.ops.registry import register_compute
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

#: bytes of one generator state (``ember_mt`` of ember/codegen/c/random.py: 624 words, the
#: position, the cached normal; 2504 bytes), rounded up.
STATE_BYTES = 2560

#: the ops of this family (each one C kernel).
RANDOM_OPS = ("random.uniform", "random.normal", "random.bernoulli", "random.multinomial")


def _count(shape: tuple[int, ...] | list[int]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _i64(v: int) -> PrimExpr:
    return const(int(v), "int64")


def _f64(v: float) -> PrimExpr:
    return const(float(v), "float64")


def _kernel(name: str, args: Sequence[PrimExpr], nbytes: int) -> Stmt:
    """``name(args..., state)`` with ``nbytes`` of scratch; a non-zero status fails the run."""
    scratch = decl_buffer((nbytes,), "uint8", f"{name}_state")
    status = call_extern("int32", name, *args, scratch.data)
    check = AssertStmt(
        eq(status, 0), f"{name}: probabilities must lie in [0, 1] (numpy raises too)", seq()
    )
    return Allocate(scratch, check, StorageKind.HEAP)


def _extern(
    inputs: list[te.Tensor],
    out_type: Type,
    tag: str,
    body: Callable[[list[Buffer], list[Buffer]], Stmt],
) -> te.Tensor:
    ty = out_tensor_type(out_type)
    out = te.extern(ty.shape, inputs, body, tag, dtype=ty.dtype)
    assert isinstance(out, te.Tensor)
    return out


@register_compute("random.uniform")
def random_uniform(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """``ember_rng_uniform``: low + (high - low) * u, float64."""
    n = _count(out_tensor_type(out_type).shape)
    scalars = [_f64(attrs["low"]), _f64(attrs["high"]), _i64(attrs["seed"])]

    def body(ins: list[Buffer], outs: list[Buffer]) -> Stmt:
        return _kernel("ember_rng_uniform", [outs[0].data, _i64(n), *scalars], STATE_BYTES)

    return _extern(inputs, out_type, "rng_uniform", body)


@register_compute("random.normal")
def random_normal(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """``ember_rng_normal``: mean + scale * (polar Box-Muller), float64."""
    n = _count(out_tensor_type(out_type).shape)
    scalars = [_f64(attrs["mean"]), _f64(attrs["scale"]), _i64(attrs["seed"])]

    def body(ins: list[Buffer], outs: list[Buffer]) -> Stmt:
        return _kernel("ember_rng_normal", [outs[0].data, _i64(n), *scalars], STATE_BYTES)

    return _extern(inputs, out_type, "rng_normal", body)


@register_compute("random.bernoulli")
def random_bernoulli(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """``ember_rng_bernoulli``: numpy's binomial(1, p) as float64 zeros and ones."""
    n = _count(static_shape(inputs[0]))
    seed = _i64(attrs["seed"])

    def body(ins: list[Buffer], outs: list[Buffer]) -> Stmt:
        return _kernel(
            "ember_rng_bernoulli",
            [ins[0].data, outs[0].data, _i64(n), seed],
            STATE_BYTES,
        )

    return _extern(inputs, out_type, "rng_bernoulli", body)


@register_compute("random.multinomial")
def random_multinomial(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """``ember_rng_multinomial``: per row the softmax cdf searched per sample, int64."""
    rows, classes = (int(d) for d in static_shape(inputs[0]))
    samples = int(attrs["sample_size"])
    ints = [_i64(rows), _i64(classes), _i64(samples), _i64(attrs["seed"])]

    def body(ins: list[Buffer], outs: list[Buffer]) -> Stmt:
        return _kernel(
            "ember_rng_multinomial",
            [ins[0].data, outs[0].data, *ints],
            STATE_BYTES + 8 * classes,
        )

    return _extern(inputs, out_type, "rng_multinomial", body)
