"""Vector math (libmvec): the probe, its cache, the prototypes it adds and the linked result."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

import ember.runtime as rt
from ember import tir
from ember.codegen.c import build_c, file_context, generate_source, vecmath
from ember.codegen.c.build import c_options
from ember.config import config
from ember.runtime.artifact_set import ArtifactSet
from ember.tir import te

FLAGS = c_options(None).cflags()
AVAILABLE = vecmath.vector_math_functions(FLAGS)


def _math_kernel(fn_names: tuple[str, ...] = ("sin", "tanh", "erf", "sigmoid")) -> tir.PrimFunc:
    a = te.placeholder((1000,), "float32", "A")

    def body(i: tir.PrimExpr) -> tir.PrimExpr:
        out = tir.const(0.0, "float32")
        for name in fn_names:
            out = out + getattr(tir, name)(a[i])
        return out

    c = te.compute((1000,), body, "C")
    s = te.create_schedule(c)
    outer, inner = s[c].split(c.op.axis[0], factor=200)
    s[c].parallel(outer)
    s[c].vectorize(inner)
    return te.lower(s, [a, c], name="mathy")


@pytest.fixture
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Probe into a fresh cache directory with an empty in-process memo."""
    cfg = dataclasses.replace(config(), cache_dir=tmp_path)
    monkeypatch.setattr(vecmath, "config", lambda: cfg)
    monkeypatch.setattr(vecmath, "_MEMO", {})
    return tmp_path


def test_prototype_has_no_simdlen_and_the_libm_signature() -> None:
    text = vecmath.simd_prototype("powf", "float")
    assert text == "#pragma omp declare simd notinbranch\nextern float powf(float, float);"
    assert "simdlen" not in vecmath.simd_prototype("exp", "double")


def test_probe_output_is_checked_against_python_math() -> None:
    values = " ".join(f"{math.exp(x):.9g} {math.exp(x):.17g}" for x in (0.25, 0.5, 0.75))
    assert vecmath._check_output(["exp"], f"exp {values}\n")
    assert not vecmath._check_output(["exp"], "exp 1 1 1 1 1 1\n")
    assert not vecmath._check_output(["exp", "log"], f"exp {values}\n")  # log missing


def test_probe_includes_the_pattern_that_crashed_gcc12() -> None:
    # powf(x, 0.5f) in an omp simd loop with SIMD-declared powf and errno-setting math was an
    # internal compiler error in gcc 12.2: a compiler that fails it gets no vector math
    assert "yf[i] = powf(xf[i], 0.5f);" in vecmath.probe_source(["pow"])
    pow_row = " ".join(f"{x**x:.9g} {x**x:.17g}" for x in (0.25, 0.5, 0.75))
    half_row = " ".join(f"{math.sqrt(x):.9g}" for x in (0.25, 0.5, 0.75))
    assert vecmath._check_output(["pow"], f"pow {pow_row}\npow_half {half_row}\n")
    assert not vecmath._check_output(["pow"], f"pow {pow_row}\n")


def test_no_openmp_means_no_vector_math() -> None:
    assert vecmath.vector_math_functions("-O3 -march=native") == ()
    assert c_options({"openmp": False}).simd_math() == ()
    assert c_options({"vector_math": False}).simd_math() == ()


@pytest.mark.cc
def test_probe_is_cached_on_disk_and_in_memory(private_cache: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    calls: list[str] = []
    real = vecmath.probe

    def counting(cflags: str, cc: str) -> tuple[str, ...]:
        calls.append(cflags)
        return real(cflags, cc)

    monkeypatch.setattr(vecmath, "probe", counting)
    first = vecmath.vector_math_functions(FLAGS)
    assert vecmath.vector_math_functions(FLAGS) == first
    assert len(calls) == 1
    files = list((private_cache / "probes").glob("vecmath-*.json"))
    assert len(files) == 1
    monkeypatch.setattr(vecmath, "_MEMO", {})  # a new process reads the file, no probe
    assert vecmath.vector_math_functions(FLAGS) == first
    assert len(calls) == 1
    assert first == AVAILABLE  # same machine and flags, same answer


def test_a_compiler_that_fails_falls_back_silently(private_cache: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    cfg = dataclasses.replace(config(), cache_dir=private_cache, cc="/nonexistent/ember-cc")
    monkeypatch.setattr(vecmath, "config", lambda: cfg)
    assert vecmath.vector_math_functions(FLAGS) == ()
    arts = build_c([_math_kernel()])
    assert arts[0].metadata["cflags"] == FLAGS
    assert b"declare simd" not in arts[0].content
    assert b"sinf(" in arts[0].content


def test_a_corrupt_cache_file_is_probed_again(private_cache: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(vecmath, "probe", lambda cflags, cc: ("exp",))
    path = vecmath._cache_path(FLAGS, config().cc)
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    assert vecmath.vector_math_functions(FLAGS) == ("exp",)
    assert '"exp"' in path.read_text()


def test_generated_c_declares_only_used_functions(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(vecmath, "_MEMO", {(config().cc, FLAGS): ("erf", "sin", "log")})
    text = generate_source([_math_kernel()])
    assert "#pragma omp declare simd notinbranch\nextern float sinf(float);" in text
    assert "erff(float)" not in text  # float32 erf is inline (vecmath.erf_helper)
    assert "tanhf(float)" not in text  # not in the available set
    assert "logf(float)" not in text  # available but unused
    arts = build_c([_math_kernel()])
    assert arts[0].metadata["cflags"] == FLAGS + " -lmvec"
    off = build_c([_math_kernel()], {"vector_math": False})
    assert off[0].metadata["cflags"] == FLAGS
    assert b"declare simd" not in off[0].content


def test_every_split_file_gets_lmvec(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(vecmath, "_MEMO", {(config().cc, FLAGS): ("sin",)})
    a = te.placeholder((8,), "float32", "A")
    plain = te.lower(te.create_schedule(te.compute((8,), lambda i: a[i] + 1.0, "P")), name="p")
    arts = build_c([plain, _math_kernel(("sin",))], {"max_file_bytes": 100})
    assert len(arts) == 2
    assert b"declare simd" not in arts[0].content
    assert all(art.metadata["cflags"] == FLAGS + " -lmvec" for art in arts)


@pytest.mark.cc
def test_kernels_call_the_vector_variants_and_stay_accurate(tmp_path: Path) -> None:
    f = _math_kernel()
    arts = ArtifactSet(build_c([f]))
    x = np.linspace(-6, 6, 1000, dtype=np.float32)
    want = np.sin(x) + np.tanh(x) + np.array([math.erf(v) for v in x]) + 1 / (1 + np.exp(-x))
    for mod in (arts.load_module(), rt.load_module(str(arts.export_library(tmp_path / "m.so")))):
        out = rt.array(np.zeros(1000, np.float32))
        mod["ember_mathy"](rt.array(x), out)
        np.testing.assert_allclose(out.numpy(), want, rtol=2e-6, atol=1e-6)
    lib = (tmp_path / "m.so").read_bytes()
    if {"sin", "tanh"} <= set(AVAILABLE):
        assert b"_ZGV" in lib and b"libmvec" in lib  # vector variants, linked to libmvec
    else:  # this machine cannot use libmvec: plain scalar calls, no dependency
        assert b"libmvec" not in lib


NUMPY = {
    "exp": np.exp,
    "log": np.log,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "asin": np.arcsin,
    "acos": np.arccos,
    "atan": np.arctan,
    "sinh": np.sinh,
    "cosh": np.cosh,
    "tanh": np.tanh,
    "asinh": np.arcsinh,
    "acosh": np.arccosh,
    "atanh": np.arctanh,
    "expm1": np.expm1,
    "log1p": np.log1p,
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
}


def _inputs(dtype: str) -> np.ndarray:
    rng = np.random.default_rng(5)
    special = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 1e-8, 100.0, -100.0, 0.999]
    body = np.concatenate(
        [rng.uniform(-1, 1, 1500), rng.standard_normal(1500) * 6, rng.uniform(1, 50, 1085)]
    )
    return np.concatenate([special, body]).astype(dtype)


@pytest.mark.cc
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_every_intrinsic_in_vectorized_loops_matches_numpy(build, dtype: str) -> None:  # type: ignore[no-untyped-def]
    n = 4096
    a = te.placeholder((n,), dtype, "A")

    def stage(name: str) -> te.Tensor:
        fn = getattr(tir, name)
        return te.compute((n,), lambda i: fn(a[i]), name)

    outs = [stage(name) for name in NUMPY]
    s = te.create_schedule(outs)
    for out in outs:
        s[out].vectorize(out.op.axis[0])
    mod = build([te.lower(s, [a, *outs], name="every")])
    x = _inputs(dtype)
    results = [rt.array(np.zeros(n, dtype)) for _ in outs]
    mod["ember_every"](rt.array(x), *results)
    wide = x.astype(np.float64)
    rtol = 3e-6 if dtype == "float32" else 1e-13
    for name, got in zip(NUMPY, results, strict=True):
        with np.errstate(all="ignore"):
            want = NUMPY[name](wide).astype(dtype)
        np.testing.assert_allclose(
            got.numpy(), want, rtol=rtol, atol=rtol * 1e-3, equal_nan=True, err_msg=name
        )


def test_float32_exp_is_inline_with_or_without_libmvec(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    for available in (("exp",), ()):
        monkeypatch.setattr(vecmath, "_MEMO", {(config().cc, FLAGS): available})
        text = generate_source([_math_kernel(("exp", "sigmoid"))])
        assert f"static inline float {vecmath.EXP_INLINE_HELPER}(float x0) {{" in text
        assert "ember_exp_f32(A[" in text and "ember_sigmoid_f32(A[" in text
        # sigmoid: its own inline exp of -|x|
        assert f"const float t = {vecmath.EXP_NONPOS_HELPER}(-fabsf(x));" in text
        assert "expf(" not in text
    d = te.placeholder((8,), "float64", "D")
    e = te.compute((8,), lambda i: tir.exp(d[i]), "E")
    assert "exp(D[i])" in generate_source([te.lower(e, name="e64")])  # float64: plain exp


def test_without_inline_exp_libmvec_takes_the_masking_safe_helper(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(file_context, "INLINE_EXP", False)
    monkeypatch.setattr(vecmath, "_MEMO", {(config().cc, FLAGS): ("exp",)})
    text = generate_source([_math_kernel(("exp",))])
    assert f"static inline float {vecmath.EXP_HELPER}(float x) {{" in text
    assert "ember_vexp_f32(A[" in text
    monkeypatch.setattr(vecmath, "_MEMO", {(config().cc, FLAGS): ()})
    text = generate_source([_math_kernel(("exp",))])
    assert vecmath.EXP_HELPER not in text and "expf(A[" in text


@pytest.mark.cc
def test_exp_flushes_results_below_1_9e_38_overflows_to_inf_and_keeps_nan(build) -> None:  # type: ignore[no-untyped-def]
    n = 64
    a = te.placeholder((n,), "float32", "A")
    b = te.compute((n,), lambda i: tir.exp(a[i]), "B")
    c = te.compute((n,), lambda i: tir.sigmoid(a[i]), "S")
    s = te.create_schedule([b, c])
    s[b].vectorize(b.op.axis[0])
    s[c].vectorize(c.op.axis[0])
    mod = build([te.lower(s, [a, b, c], name="masked")])
    low = np.float32(-87.33654022216797)
    neg_nan = np.frombuffer(np.uint32(0xFFC00000).tobytes(), np.float32)[0]
    special = [-1e4, -np.inf, -95.0, -103.9, low, np.nextafter(low, np.float32(0)), -87.0]
    special += [np.nan, neg_nan, 0.0, -0.0, 1.0, 88.0, 88.8, np.inf, -1e30, 1e4, -86.7, -86.6]
    special += [88.03, 88.3, 88.72, 88.7228, 88.72284, 89.0, 89.5, 0.5, -0.5, 20.0, -20.0]
    x = np.resize(np.array(special, np.float32), n)
    out_e, out_s = rt.array(np.zeros(n, np.float32)), rt.array(np.zeros(n, np.float32))
    mod["ember_masked"](rt.array(x), out_e, out_s)
    with np.errstate(all="ignore"):
        want = np.exp(x.astype(np.float64)).astype(np.float32)
        want_s = (1 / (1 + np.exp(-x.astype(np.float64)))).astype(np.float32)
    got = out_e.numpy()
    flushed = want < 1.9e-38  # ember_exp_f32: results under 1.9e-38 (x < -86.64) are 0
    assert np.all(got[flushed] == 0.0)
    np.testing.assert_allclose(got[~flushed], want[~flushed], rtol=2e-7, equal_nan=True)
    assert np.isnan(got[np.isnan(x)]).all()
    np.testing.assert_allclose(out_s.numpy(), want_s, rtol=2e-6, atol=1e-37, equal_nan=True)


def _run_unary(build, fn, x: np.ndarray) -> tuple[str, np.ndarray]:  # type: ignore[no-untyped-def]
    """``fn`` over the float32 ``x`` in one vectorized loop: the C text and the results (as
    float64)."""
    a = te.placeholder((x.size,), "float32", "A")
    c = te.compute((x.size,), lambda i: fn(a[i]), "C")
    s = te.create_schedule([c])
    s[c].vectorize(c.op.axis[0])
    prim = te.lower(s, [a, c], name="unary")
    mod = build([prim])
    out = rt.array(np.zeros(x.size, np.float32))
    mod["ember_unary"](rt.array(x), out)
    return generate_source([prim]), out.numpy().astype(np.float64)


@pytest.mark.cc
@pytest.mark.parametrize("libmvec", [True, False])
def test_float32_sigmoid_is_within_6e_7_of_the_exact_one(build, monkeypatch, libmvec) -> None:  # type: ignore[no-untyped-def]
    """The inline exp of ``ember_sigmoid_f32`` over [-100, 100] and the special values,
    with and without libmvec (it never calls expf)."""
    monkeypatch.setattr(vecmath, "_MEMO", {(config().cc, FLAGS): ("exp",) if libmvec else ()})
    x = np.concatenate([np.linspace(-100, 100, 200_001), np.linspace(-1, 1, 20_001)])
    x = np.concatenate([x, [0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e30]]).astype(np.float32)
    text, got = _run_unary(build, tir.sigmoid, x)
    assert "expf(" not in text
    with np.errstate(all="ignore"):
        want = 1 / (1 + np.exp(-x.astype(np.float64)))
    np.testing.assert_allclose(got, want, rtol=6e-7, atol=2e-38, equal_nan=True)
    assert np.isnan(got[-3]) and got[-7] == 0.5 and got[-5] == 1.0 and got[-4] < 2e-38


@pytest.mark.cc
def test_float32_erf_is_inline_and_within_3e_7(build, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """ember_erf_f32 over [-6, 6] and the special values, without libmvec (no call)."""
    monkeypatch.setattr(vecmath, "_MEMO", {(config().cc, FLAGS): ()})
    x = np.concatenate([np.linspace(-6, 6, 120_001), np.geomspace(1e-30, 1e-3, 200)])
    x = np.concatenate([x, -x[-200:], [0.0, -0.0, np.inf, -np.inf, np.nan]]).astype(np.float32)
    text, got = _run_unary(build, tir.erf, x)
    assert f"{vecmath.ERF_HELPER}(A[" in text and "erff(" not in text
    want = np.array([math.erf(float(v)) if not np.isnan(v) else np.nan for v in x])
    np.testing.assert_allclose(got, want, rtol=3e-7, atol=3e-7, equal_nan=True)
    assert got[-3] == 1.0 and got[-2] == -1.0 and np.isnan(got[-1]) and got[-5] == 0.0


def test_files_without_math_never_probe(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    calls: list[str] = []
    monkeypatch.setattr(vecmath, "_MEMO", {})
    monkeypatch.setattr(vecmath, "_read_cache", lambda path: None)
    monkeypatch.setattr(vecmath, "_write_cache", lambda path, funcs: None)
    monkeypatch.setattr(vecmath, "probe", lambda cflags, cc: calls.append(cflags) or ("sin",))
    a = te.placeholder((8,), "float32", "A")
    plain = te.lower(te.create_schedule(te.compute((8,), lambda i: a[i] + 1.0, "P")), name="p")
    assert build_c([plain])[0].metadata["cflags"] == FLAGS
    assert calls == []
    assert build_c([_math_kernel(("sin",))])[0].metadata["cflags"] == FLAGS + " -lmvec"
    assert calls == [FLAGS]
