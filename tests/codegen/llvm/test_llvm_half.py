"""Narrow floats in the LLVM back ends (ember.codegen.llvm.narrow): the C back end's
float16/bfloat16/float8 tests (tests/codegen/test_c_half.py: every 16-bit and 8-bit
pattern, every rounding midpoint, NaN payloads) on ``llvm`` (test_llvm_half_jit.py:
``llvmjit``), and compiled kernels bit for bit equal to the C back end's."""

from __future__ import annotations

import re
from collections.abc import Callable

import ml_dtypes
import numpy as np
import pytest
from codegen_build import compile_funcs as compile_c
from llvm_build import c_copy, with_kind

import ember.runtime as rt
from ember import tir
from ember.codegen.llvm import build_llvm
from ember.codegen.llvm.inspect import asm_text, ir_text
from ember.target import Target

globals().update(c_copy("test_c_half", "llvm"))

pytestmark = pytest.mark.cc

TYPES = (
    "float16",
    "bfloat16",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
    "float4_e2m1fn",
)
N = 1 << 16


def _np(t: str) -> np.dtype:
    return np.dtype(np.float16) if t == "float16" else np.dtype(getattr(ml_dtypes, t))


def _storage(t: str) -> np.dtype:
    return np.dtype(np.uint16 if _np(t).itemsize == 2 else np.uint8)


def _kernel(
    name: str,
    t: str,
    fn: Callable[[tir.PrimExpr, tir.PrimExpr, tir.Var], tir.PrimExpr],
    n: int = N,
) -> tir.PrimFunc:
    a = tir.decl_buffer((n,), t, "A")
    b = tir.decl_buffer((n,), t, "B")
    c = tir.decl_buffer((n,), t, "C")
    i = tir.Var("i")
    return tir.PrimFunc(name, (a, b, c), tir.for_range(i, n, tir.store(c, fn(a[i], b[i], i), i)))


def _mixed(x: tir.PrimExpr, y: tir.PrimExpr, i: tir.Var) -> tir.PrimExpr:
    """A chain of roundings: intrinsics, arithmetic, float64, an int32 and a cast between
    two narrow types (float-to-int casts of NaN differ between compilers: none here)."""
    e = tir.call_intrin(x.dtype, "exp", x) * y - tir.call_intrin(x.dtype, "sqrt", y)
    wide = tir.cast("float64", x) / tir.cast("float64", tir.const(3.0, "float32"))
    other = tir.cast(x.dtype, tir.cast("bfloat16" if x.dtype == "float16" else "float16", y))
    return tir.max(e, tir.cast(x.dtype, wide)) + tir.cast(x.dtype, i - 30000) * other


def _kernels() -> list[tir.PrimFunc]:
    funcs = []
    for t in TYPES:
        funcs.append(_kernel(f"mixed_{t}", t, _mixed))
        funcs.append(_kernel(f"copy_{t}", t, lambda x, y, i: tir.Select(x > y, x, y)))
    return funcs


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, rt.Module]:
    out: dict[str, rt.Module] = {"c": compile_c(_kernels(), tmp_path_factory.mktemp("c"))}
    for kind in ("llvm", "llvmjit"):
        out[kind] = with_kind(kind)(_kernels())
    return out


def _run(lib: rt.Module, name: str, t: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = rt.empty(a.shape, _np(t))
    lib[f"ember_{name}"](rt.array(a.view(_np(t))), rt.array(b.view(_np(t))), out)
    return out.numpy().view(_storage(t))


@pytest.mark.parametrize("t", TYPES)
def test_results_equal_the_c_back_end_bit_for_bit(libs: dict[str, rt.Module], t: str) -> None:
    """Every bit pattern through a chain of roundings (NaN as NaN) and a select of loaded
    values (copied bits, NaN payloads included), on llvm and llvmjit, equals the C result."""
    codes = np.arange(1 << (8 * _storage(t).itemsize), dtype=_storage(t))
    if t == "float4_e2m1fn":
        codes = codes & np.uint8(0x0F)  # its codes (the C copy keeps any high bits too)
    a = np.resize(codes, N)
    b = np.random.default_rng(7).permutation(a)
    for name in (f"mixed_{t}", f"copy_{t}"):
        want = _run(libs["c"], name, t, a, b)
        nan = np.isnan(want.view(_np(t)).astype(np.float32))
        for kind in ("llvm", "llvmjit"):
            got = _run(libs[kind], name, t, a, b)
            if name.startswith("mixed"):  # which NaN an operation returns is the compiler's
                assert np.array_equal(np.isnan(got.view(_np(t)).astype(np.float32)), nan)
                got, want = np.where(nan, 0, got), np.where(nan, 0, want)
            bad = np.flatnonzero(got != want)
            assert bad.size == 0, (kind, name, a[bad[:4]], b[bad[:4]], got[bad[:4]], want[bad[:4]])


def _add(t: str, n: int = 1024) -> tir.PrimFunc:
    return _kernel(f"add_{t}", t, lambda x, y, i: x + y, n)


@pytest.mark.parametrize("t", ["float16", "bfloat16", "float8_e4m3fn"])
def test_elementwise_loops_vectorize_without_libcalls(t: str) -> None:
    """Conversions are integer IR: no half/bfloat type, no soft-float libcall (which the
    JIT could not resolve), and the loop vectorizer widens the loop."""
    (art,) = build_llvm([_add(t)], Target.create("llvm"))
    ir, asm = ir_text(art), asm_text(art)
    assert " half " not in ir and " bfloat " not in ir
    for libcall in ("__extendhfsf2", "__truncsfhf2", "__truncsfbf2", "__gnu_"):
        assert libcall not in asm
    assert re.search(r"<(4|8|16|32|64) x i32>", ir)  # the conversions, widened (64: AVX-512)


@pytest.mark.parametrize("triple", ["thumbv7em-none-eabihf", "aarch64-linux-gnu"])
def test_cross_targets_need_no_soft_float_helpers(triple: str) -> None:
    target = Target.create(f"llvm -mtriple={triple}")
    (art,) = build_llvm([_add("float16", 64), _add("bfloat16", 64)], target)
    asm = asm_text(art)
    for libcall in ("__extendhfsf2", "__truncsfhf2", "__truncsfbf2", "__gnu_h2f", "__gnu_f2h"):
        assert libcall not in asm


@pytest.mark.parametrize("t", ["float16", "bfloat16", "float8_e5m2"])
def test_vector_dtypes_convert_lane_by_lane_as_scalars(t: str) -> None:
    """Ramp accesses of a narrow type (``float16x8``, which the C back end refuses) load,
    round and store each lane as the scalar code does."""
    n, lanes = 64, 8
    a, b = tir.decl_buffer((n,), t, "A"), tir.decl_buffer((n,), t, "B")
    c = tir.decl_buffer((n,), t, "C")
    i = tir.Var("i")
    ramp = tir.Ramp(i * lanes, tir.const(1, "int32"), lanes)
    half = tir.Broadcast(tir.FloatImm(t, 0.5), lanes)
    value = tir.BufferLoad(a, (ramp,)) * tir.BufferLoad(b, (ramp,)) + half
    body = tir.for_range(i, n // lanes, tir.BufferStore(c, value, (ramp,)))
    lib = with_kind("llvm")([tir.PrimFunc("vec", (a, b, c), body)])
    rng = np.random.default_rng(1)
    x, y = (rng.standard_normal(n).astype(_np(t)) for _ in range(2))
    out = rt.empty((n,), _np(t))
    lib["ember_vec"](rt.array(x), rt.array(y), out)
    with np.errstate(all="ignore"):
        prod = (x.astype(np.float32) * y.astype(np.float32)).astype(_np(t))
        want = (prod.astype(np.float32) + np.float32(0.5)).astype(_np(t))
    assert np.array_equal(out.numpy().view(_storage(t)), want.view(_storage(t)))
