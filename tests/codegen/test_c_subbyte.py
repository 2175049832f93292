"""The sub-byte types in the C back end, bit-exact against ml_dtypes: int4/uint4/int2/uint2
(ember.codegen.c.subbyte: one byte per element, loads extend the low bits, stores write
them, casts wrap) and float4_e2m1fn/float8_e8m0fnu (ember.codegen.c.half: codes, computed
in float32). Conversions from float32 are checked on every float32 whose rounding matters
(each representable value, the midpoints between neighbours and their float32
neighbours), NaN payloads, infinities, subnormals and overflow.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from codegen_build import compile_funcs

import ember.runtime as rt
from ember import tir
from ember.codegen.c import generate_source
from ember.errors import CompileError

pytestmark = [pytest.mark.cc, pytest.mark.filterwarnings("ignore::RuntimeWarning")]

N = 1 << 14
FLOATS = ("float4_e2m1fn", "float8_e8m0fnu")
INTS = ("int4", "uint4", "int2", "uint2")


def _np(t: str) -> np.dtype:
    return np.dtype(getattr(ml_dtypes, t))


def _unary(name: str, src: str, dst: str) -> tir.PrimFunc:
    a = tir.decl_buffer((N,), src, "A")
    b = tir.decl_buffer((N,), dst, "B")
    i = tir.Var("i")
    return tir.PrimFunc(name, (a, b), tir.for_range(i, N, tir.store(b, tir.cast(dst, a[i]), i)))


def _copy(name: str, t: str) -> tir.PrimFunc:
    a = tir.decl_buffer((N,), t, "A")
    b = tir.decl_buffer((N,), t, "B")
    i = tir.Var("i")
    return tir.PrimFunc(name, (a, b), tir.for_range(i, N, tir.store(b, a[i], i)))


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory) -> rt.Module:
    funcs = []
    for t in FLOATS + INTS:
        funcs += [_unary(f"f32_to_{t}", "float32", t), _unary(f"{t}_to_f32", t, "float32")]
        funcs += [_unary(f"i32_to_{t}", "int32", t), _copy(f"copy_{t}", t)]
    funcs.append(_unary("f16_to_float4_e2m1fn", "float16", "float4_e2m1fn"))
    return compile_funcs(funcs, tmp_path_factory.mktemp("subbyte"), {"max_file_bytes": 1 << 20})


def _call(lib: rt.Module, name: str, x: np.ndarray, out: np.dtype) -> np.ndarray:
    res = rt.empty(x.shape, out)
    lib[f"ember_{name}"](rt.array(np.ascontiguousarray(x)), res)
    return res.numpy()


def _bytes(x: np.ndarray) -> np.ndarray:
    return x.view(np.uint8)


def _codes(t: str) -> np.ndarray:
    return np.resize(np.arange(256 if t == "float8_e8m0fnu" else 16, dtype=np.uint8), N).view(
        _np(t)
    )


def _rounding_cases(t: str) -> np.ndarray:
    """Every value of ``t``, the midpoints between neighbours and their float32 neighbours,
    NaN payloads, infinities, signed zeros, subnormals and random floats."""
    w = np.unique(np.arange(256, dtype=np.uint8).view(_np(t)).astype(np.float32))
    w = w[np.isfinite(w)]
    mid = ((w[:-1].astype(np.float64) + w[1:]) / 2).astype(np.float32)
    geo = np.sqrt(w[:-1].astype(np.float64) * w[1:]).astype(np.float32)  # e8m0: log midpoints
    near = [np.nextafter(v, np.float32(s)) for v in (w, mid, geo) for s in (np.inf, -np.inf)]
    nans = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FA00000], np.uint32).view("f4")
    tiny = np.array([0x00400000, 0x00400001, 0x00600000, 0x007FFFFF, 1], np.uint32).view("f4")
    special = np.array([np.inf, -np.inf, 0.0, -0.0, 1e38, 3.4e38, -1.0, -6.5], np.float32)
    rand = np.random.default_rng(0).integers(0, 1 << 32, N // 2, dtype=np.uint64).astype("u4")
    parts = [w, mid, geo, *near, nans, tiny, special, rand.view(np.float32)]
    return np.resize(np.concatenate(parts).astype(np.float32), N)


@pytest.mark.parametrize("t", FLOATS)
def test_float32_to_narrow_matches_ml_dtypes(lib: rt.Module, t: str) -> None:
    x = _rounding_cases(t)
    got = _call(lib, f"f32_to_{t}", x, _np(t))
    assert np.array_equal(_bytes(got), _bytes(x.astype(_np(t))))


@pytest.mark.parametrize("t", FLOATS)
def test_narrow_to_float32_is_exact_for_every_code(lib: rt.Module, t: str) -> None:
    x = _codes(t)
    got = _call(lib, f"{t}_to_f32", x, np.dtype(np.float32))
    assert np.array_equal(got, x.astype(np.float32), equal_nan=True)


def test_float16_to_float4_matches_ml_dtypes(lib: rt.Module) -> None:
    x = np.resize(np.arange(1 << 16, dtype=np.uint16).view(np.float16), N)
    got = _call(lib, "f16_to_float4_e2m1fn", x, _np("float4_e2m1fn"))
    assert np.array_equal(_bytes(got), _bytes(x.astype(_np("float4_e2m1fn"))))


@pytest.mark.parametrize("t", FLOATS + INTS)
def test_int32_to_narrow_matches_ml_dtypes(lib: rt.Module, t: str) -> None:
    x = np.resize(np.arange(-300, 300, dtype=np.int32), N)
    got = _call(lib, f"i32_to_{t}", x, _np(t))
    want = x.astype(_np(t))
    assert np.array_equal(got.astype(np.float64), want.astype(np.float64), equal_nan=True)


@pytest.mark.parametrize("t", INTS)
def test_float32_to_sub_byte_int_truncates_and_wraps_like_ml_dtypes(lib: rt.Module, t: str) -> None:
    x = np.resize(np.arange(-4000, 4000, dtype=np.float32) / 16, N)
    got = _call(lib, f"f32_to_{t}", x, _np(t))
    assert np.array_equal(_bytes(got), _bytes(x.astype(_np(t))))  # the canonical low bits


@pytest.mark.parametrize("t", INTS)
def test_loads_read_only_the_low_bits_and_stores_write_them(lib: rt.Module, t: str) -> None:
    """Any byte holds the value of its low bits (ml_dtypes reads them so); a copy leaves
    the canonical byte (high bits clear), as ml_dtypes writes it."""
    raw = np.resize(np.arange(256, dtype=np.uint8), N).view(_np(t))
    got = _call(lib, f"{t}_to_f32", raw, np.dtype(np.float32))
    assert np.array_equal(got, raw.astype(np.float32))
    copied = _call(lib, f"copy_{t}", raw, _np(t))
    assert np.array_equal(_bytes(copied), _bytes(raw.astype(np.float32).astype(_np(t))))


def test_vector_code_of_sub_byte_types_is_refused() -> None:
    a = tir.decl_buffer((8,), "int4", "A")
    b = tir.decl_buffer((8,), "int4", "B")
    ramp = tir.Ramp(tir.const(0, "int32"), tir.const(1, "int32"), 4)
    body = tir.BufferStore(b, tir.BufferLoad(a, (ramp,)), (ramp,))
    with pytest.raises(CompileError, match="vector dtype int4x4 is not supported"):
        generate_source([tir.PrimFunc("vec", (a, b), body)])
