"""float16 and bfloat16 in the C back end: storage as 16 bits, arithmetic in float32,
conversions bit-exact against numpy (float16) and ml_dtypes (bfloat16).

Each kernel is compiled twice: for this machine (x86 with F16C uses the conversion
instructions) and for plain ``x86-64`` (no F16C: the portable bit manipulation path), so
both paths are held to the same bits. Conversions from float32 are checked on every
float32 whose rounding matters (all 2^16 narrow values, each midpoint between two of them
and its two float32 neighbours), plus NaN payloads, infinities, overflow and subnormals.
"""

from __future__ import annotations

import platform

import ml_dtypes
import numpy as np
import pytest
from codegen_build import compile_funcs

import ember.runtime as rt
from ember import tir
from ember.codegen.c import generate_source
from ember.errors import CompileError

pytestmark = pytest.mark.cc

N = 1 << 18
NARROW = {
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    **{t: np.dtype(getattr(ml_dtypes, t)) for t in ("float8_e4m3fn", "float8_e4m3fnuz")},
    **{t: np.dtype(getattr(ml_dtypes, t)) for t in ("float8_e5m2", "float8_e5m2fnuz")},
}
#: this machine (F16C where the host has it) and the portable path.
TARGETS = ["native", "x86-64"] if platform.machine() in ("x86_64", "amd64") else ["native"]


def _unary(
    name: str,
    src: str,
    dst: str,
    fn: object = None,
    n: int = N,
    kind: tir.ForKind = tir.ForKind.SERIAL,
) -> tir.PrimFunc:
    a = tir.decl_buffer((n,), src, "A")
    b = tir.decl_buffer((n,), dst, "B")
    i = tir.Var("i")
    value = tir.cast(dst, a[i]) if fn is None else fn(a[i])  # type: ignore[operator]
    return tir.PrimFunc(name, (a, b), tir.for_range(i, n, tir.store(b, value, i), kind))


def _round_trip(x: tir.PrimExpr) -> tir.PrimExpr:
    return tir.cast("float32", tir.cast("float16", x))


def _binary(
    name: str, dtype: str, fn: object, n: int = N, kind: tir.ForKind = tir.ForKind.VECTORIZED
) -> tir.PrimFunc:
    a = tir.decl_buffer((n,), dtype, "A")
    b = tir.decl_buffer((n,), dtype, "B")
    c = tir.decl_buffer((n,), dtype, "C")
    i = tir.Var("i")
    body = tir.for_range(i, n, tir.store(c, fn(a[i], b[i]), i), kind)  # type: ignore[operator]
    return tir.PrimFunc(name, (a, b, c), body)


def _kernels() -> list[tir.PrimFunc]:
    funcs = []
    for t in NARROW:
        funcs += [
            _unary(f"f32_to_{t}", "float32", t),
            _unary(f"{t}_to_f32", t, "float32"),
            _unary(f"f64_to_{t}", "float64", t),
            _unary(f"i32_to_{t}", "int32", t),
            _unary(f"sqrt_{t}", t, t, lambda x: tir.call_intrin(x.dtype, "sqrt", x)),
            _binary(f"add_{t}", t, lambda x, y: x + y),
            _binary(f"mul_{t}", t, lambda x, y: x * y),
            _binary(f"div_{t}", t, lambda x, y: x / y),
            _binary(f"max_{t}", t, tir.max),
        ]
    funcs.append(_unary("f16_to_bf16", "float16", "bfloat16"))
    vec = tir.ForKind.VECTORIZED  # omp simd loops: float16's branch-free helpers
    funcs += [
        _unary("simd_f32_to_float16", "float32", "float16", kind=vec),
        _unary("simd_float16_to_f32", "float16", "float32", kind=vec),
        _unary("simd_f64_to_float16", "float64", "float16", kind=vec),
        _unary("simd_round_float16", "float32", "float32", _round_trip, kind=vec),
    ]
    return funcs


@pytest.fixture(scope="module", params=TARGETS)
def lib(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> rt.Module:
    target = {"mcpu": request.param, "max_file_bytes": 1 << 20}
    return compile_funcs(_kernels(), tmp_path_factory.mktemp("half"), target)


def _call(lib: rt.Module, name: str, *args: np.ndarray, out: np.dtype) -> np.ndarray:
    res = rt.empty(args[0].shape, out)
    lib[f"ember_{name}"](*[rt.array(np.ascontiguousarray(a)) for a in args], res)
    return res.numpy()


def _bits(x: np.ndarray) -> np.ndarray:
    return x.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize])


def _codes(t: str) -> np.ndarray:
    """Every bit pattern of ``t``, NaNs included."""
    size = NARROW[t].itemsize
    return np.arange(1 << (8 * size), dtype=f"u{size}").view(NARROW[t])


def _every_narrow(t: str) -> np.ndarray:
    """All bit patterns of ``t``, repeated to N values."""
    return np.resize(_codes(t), N)


def _rounding_cases(t: str) -> np.ndarray:
    """float32 values at and around every midpoint between two neighbouring narrow values,
    plus special values: where round-to-nearest-even decides."""
    w = _codes(t).astype(np.float32)
    w = w[np.isfinite(w)]
    w = np.unique(w)
    mid = ((w[:-1].astype(np.float64) + w[1:]) / 2).astype(np.float32)
    up = np.nextafter(mid, np.float32(np.inf))
    down = np.nextafter(mid, np.float32(-np.inf))
    nan_payloads = np.array([0x7F800001, 0xFFC00001, 0x7FA00000, 0x7FC02345], np.uint32)
    special = np.array([np.inf, -np.inf, 65504, 65519.99, 65520, -65520, 1e38, 1e-45, -0.0])
    x = np.concatenate([w, mid, up, down, nan_payloads.view(np.float32), special.astype("f4")])
    return np.resize(x, N)


@pytest.mark.parametrize("t", list(NARROW))
def test_float32_to_narrow_rounds_like_numpy(lib: rt.Module, t: str) -> None:
    x = _rounding_cases(t)
    with np.errstate(all="ignore"):
        want = x.astype(NARROW[t])
    got = _call(lib, f"f32_to_{t}", x, out=NARROW[t])
    assert np.array_equal(_bits(got), _bits(want))


@pytest.mark.parametrize("t", list(NARROW))
def test_narrow_to_float32_is_exact(lib: rt.Module, t: str) -> None:
    x = _every_narrow(t)
    got = _call(lib, f"{t}_to_f32", x, out=np.dtype(np.float32))
    assert np.array_equal(_bits(got), _bits(x.astype(np.float32)))


@pytest.mark.parametrize("t", list(NARROW))
def test_float64_and_int32_to_narrow(lib: rt.Module, t: str) -> None:
    rng = np.random.default_rng(3)
    # doubles next to float16 midpoints: rounding through float32 would round twice
    with np.errstate(all="ignore"):
        w = _codes(t).astype(np.float64)
    w = np.unique(w[np.isfinite(w)])
    mid = (w[:-1] + w[1:]) / 2
    x = np.resize(np.concatenate([mid + mid * 2.0**-40, mid - mid * 2.0**-40, w]), N)
    x[:4] = [np.nan, np.inf, 1e300, -1e-300]
    with np.errstate(all="ignore"):
        want = x.astype(NARROW[t])
    got = _call(lib, f"f64_to_{t}", x, out=NARROW[t])
    assert np.array_equal(_bits(got), _bits(want))
    ints = rng.integers(-(1 << 31), 1 << 31, N, dtype=np.int64).astype(np.int32)
    ints[: 1 << 16] = np.arange(-(1 << 15), 1 << 15)
    with np.errstate(all="ignore"):
        want_i = ints.astype(np.float64).astype(NARROW[t])
    got_i = _call(lib, f"i32_to_{t}", ints, out=NARROW[t])
    assert np.array_equal(_bits(got_i), _bits(want_i))


@pytest.mark.parametrize("t", list(NARROW))
@pytest.mark.parametrize("op", ["add", "mul", "div", "max"])
def test_arithmetic_rounds_once_per_operation(lib: rt.Module, t: str, op: str) -> None:
    rng = np.random.default_rng(5)
    a = _every_narrow(t)
    b = rng.permutation(a)
    fn = {"add": np.add, "mul": np.multiply, "div": np.divide, "max": np.maximum}[op]
    with np.errstate(all="ignore"):
        want = fn(a.astype(np.float32), b.astype(np.float32)).astype(NARROW[t])
    got = _call(lib, f"{op}_{t}", a, b, out=NARROW[t])
    nan = np.isnan(want.astype(np.float32))
    if op == "max":  # tir max is C's ``a > b ? a : b``: which NaN wins is not numpy's
        nan |= np.isnan(a.astype(np.float32)) | np.isnan(b.astype(np.float32))
    else:
        assert np.array_equal(np.isnan(got.astype(np.float32)), nan)
    assert np.array_equal(_bits(got)[~nan], _bits(want)[~nan])


@pytest.mark.parametrize("t", list(NARROW))
def test_sqrt_and_cross_conversion(lib: rt.Module, t: str) -> None:
    a = _every_narrow(t)
    with np.errstate(all="ignore"):
        want = np.sqrt(a.astype(np.float32)).astype(NARROW[t])
    got = _call(lib, f"sqrt_{t}", a, out=NARROW[t])
    nan = np.isnan(want.astype(np.float32))
    assert np.array_equal(_bits(got)[~nan], _bits(want)[~nan])
    h = _every_narrow("float16")
    with np.errstate(all="ignore"):
        want_bf = h.astype(np.float32).astype(ml_dtypes.bfloat16)
    got_bf = _call(lib, "f16_to_bf16", h, out=np.dtype(ml_dtypes.bfloat16))
    assert np.array_equal(_bits(got_bf), _bits(want_bf))


def test_vectorized_float16_conversions_match_numpy(lib: rt.Module) -> None:
    """The branch-free ``_simd`` helpers of ``omp simd`` loops give numpy's bits: every
    rounding case (ties, overflow to infinity, subnormals, NaN payloads), every float16."""
    x = _rounding_cases("float16")
    extra = np.array([0x7F800001, 0xFF802000, 0x7FBFE000, 0x00000001, 0x80400000], np.uint32)
    x[: extra.size] = extra.view(np.float32)
    with np.errstate(all="ignore"):
        want = x.astype(np.float16)
    got = _call(lib, "simd_f32_to_float16", x, out=np.dtype(np.float16))
    assert np.array_equal(_bits(got), _bits(want))
    trip = _call(lib, "simd_round_float16", x, out=np.dtype(np.float32))
    assert np.array_equal(_bits(trip), _bits(want.astype(np.float32)))
    h = _every_narrow("float16")
    wide = _call(lib, "simd_float16_to_f32", h, out=np.dtype(np.float32))
    assert np.array_equal(_bits(wide), _bits(h.astype(np.float32)))
    with np.errstate(all="ignore"):
        d = np.resize(np.concatenate([x.astype(np.float64), [np.nan, 1e300, 2.0**-25 * 3]]), N)
        want_d = d.astype(np.float16)
    got_d = _call(lib, "simd_f64_to_float16", d, out=np.dtype(np.float16))
    assert np.array_equal(_bits(got_d), _bits(want_d))


def test_vectorized_loops_use_branch_free_float16_helpers() -> None:
    """Scalar F16C intrinsics keep gcc from vectorizing, so ``omp simd`` loops call the
    ``_simd`` helpers; a serial loop keeps the F16C ones; bfloat16 has one set."""
    vec = tir.ForKind.VECTORIZED
    src = generate_source([_unary("r", "float32", "float32", _round_trip, n=8, kind=vec)])
    assert "#pragma omp simd" in src
    assert "B[i] = (float)ember_round_f16_simd(A[i]);" in src
    src = generate_source([_binary("add_h", "float16", lambda x, y: x + y, n=8)])
    assert "C[i] = ember_f32_to_f16_simd(" in src and "ember_f16_to_f32_simd(A[i])" in src
    serial = generate_source([_unary("r", "float32", "float32", _round_trip, n=8)])
    assert "B[i] = (float)ember_round_f16(A[i]);" in serial
    bf = generate_source([_binary("add_b", "bfloat16", lambda x, y: x + y, n=8)])
    assert "C[i] = ember_f32_to_bf16(ember_bf16_to_f32(A[i]) + ember_bf16_to_f32(B[i]));" in bf


def test_half_source_reads_bits_and_float32_source_is_unchanged() -> None:
    src = generate_source([_binary("add_h", "float16", lambda x, y: x + y, 8, tir.ForKind.SERIAL)])
    assert "uint16_t* restrict A" in src
    # loads widen, the float32 sum is converted once by the store
    assert "C[i] = ember_f32_to_f16(ember_f16_to_f32(A[i]) + ember_f16_to_f32(B[i]));" in src
    assert "#if defined(__F16C__)" in src
    plain = generate_source([_binary("add_f", "float32", lambda x, y: x + y, n=8)])
    assert "ember_f16" not in plain and "immintrin" not in plain
    assert "C[i] = A[i] + B[i];" in plain


def test_half_vector_dtypes_are_clear_errors() -> None:
    a = tir.decl_buffer((8,), "float16", "A")
    r = tir.Ramp(tir.const(0), tir.const(1), 4)
    vec = tir.PrimFunc("v", (a,), tir.BufferStore(a, tir.BufferLoad(a, (r,)), (r,)))
    with pytest.raises(CompileError, match="vector dtype float16x4 is not supported"):
        generate_source([vec])
