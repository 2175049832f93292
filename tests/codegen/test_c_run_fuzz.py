"""Generated C against the loop IR interpreter and numpy on random inputs (seeded fuzzing).

Random integer and float expression trees must give the interpreter's values bit for bit
(integers) or within tolerance (floats), and random te schedules of a matmul + relu must
compile and match numpy; every generator is seeded so failures reproduce.
"""

from __future__ import annotations

import numpy as np
import pytest

import ember.runtime as rt
from ember import tir
from ember.tir import te

pytestmark = pytest.mark.cc

RNG = np.random.default_rng(11)


def _nd(x: np.ndarray) -> rt.NDArray:
    return rt.array(x)


def test_random_integer_expressions_match_interpreter(build) -> None:  # type: ignore[no-untyped-def]
    import random

    rng = random.Random(99)
    inputs = tir.decl_buffer((3,), "int32", "V")
    out = tir.decl_buffer((60,), "int32", "O")
    leaves = [inputs[0], inputs[1], inputs[2]]

    def rand(depth: int) -> tir.PrimExpr:
        if depth == 0 or rng.random() < 0.2:
            return tir.const(rng.randint(-9, 9)) if rng.random() < 0.4 else rng.choice(leaves)
        a, b = rand(depth - 1), rand(depth - 1)
        pick = rng.randrange(9)
        div = tir.const(rng.choice([1, 2, 3, 5]))
        options = [
            lambda: a + b,
            lambda: a - b,
            lambda: a * b,
            lambda: a // div,
            lambda: a % div,
            lambda: tir.min(a, b),
            lambda: tir.max(a, -b),
            lambda: tir.if_then_else(tir.logical_or(a < b, tir.logical_not(b >= 2)), a, b),
            lambda: tir.truncdiv(a, div) - tir.truncmod(b, div),
        ]
        return options[pick]()

    body = tir.seq([tir.store(out, rand(4), n) for n in range(60)])
    f = tir.PrimFunc("rand_int", (inputs, out), body)
    mod = build([f])
    for values in ([3, -7, 2], [-1, 0, 9], [5, 5, -5]):
        v = np.array(values, "int32")
        want = np.zeros(60, "int32")
        tir.interpret(f, [v.copy(), want])
        got = _nd(np.zeros(60, "int32"))
        mod["ember_rand_int"](_nd(v), got)
        assert got.numpy().tolist() == want.tolist()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_random_float_expressions_match_interpreter(build, dtype: str) -> None:  # type: ignore[no-untyped-def]
    import random

    rng = random.Random(7 if dtype == "float32" else 8)
    inputs = tir.decl_buffer((3,), dtype, "V")
    out = tir.decl_buffer((80,), dtype, "O")
    leaves = [inputs[0], inputs[1], inputs[2]]
    unary = [tir.exp, tir.log, tir.sqrt, tir.tanh, tir.sigmoid, tir.erf, tir.fabs, tir.floor]
    unary += [tir.ceil, tir.round, tir.trunc, tir.sin, tir.cos, tir.rsqrt]

    def rand(depth: int) -> tir.PrimExpr:
        if depth == 0 or rng.random() < 0.2:
            if rng.random() < 0.4:
                return tir.const(rng.uniform(-3, 3), dtype)
            return rng.choice(leaves)
        a, b = rand(depth - 1), rand(depth - 1)
        options = [
            lambda: a + b,
            lambda: a - b,
            lambda: a * b,
            lambda: a / (tir.fabs(b) + 1.0),
            lambda: a // (tir.fabs(b) + 0.5),
            lambda: a % (tir.fabs(b) + 0.5),
            lambda: tir.min(a, b),
            lambda: tir.max(a, b),
            lambda: tir.if_then_else(a < b, a, b),
            lambda: rng.choice(unary)(tir.fabs(a) * 0.5),
            lambda: tir.pow(tir.fabs(a) + 0.5, tir.fabs(b) * 0.25),
            lambda: tir.cast(dtype, tir.cast("int32", a * 3.0)),
        ]
        return rng.choice(options)()

    body = tir.seq([tir.store(out, rand(4), n) for n in range(80)])
    f = tir.PrimFunc("rand_float", (inputs, out), body)
    mod = build([f])
    for values in ([0.3, -1.7, 2.2], [-0.9, 0.0, 1.1]):
        v = np.array(values, dtype)
        want = np.zeros(80, dtype)
        tir.interpret(f, [v.copy(), want])
        got = _nd(np.zeros(80, dtype))
        mod["ember_rand_float"](_nd(v), got)
        rtol = 1e-4 if dtype == "float32" else 1e-10
        np.testing.assert_allclose(got.numpy(), want, rtol=rtol, atol=rtol)


def _fuzz_case(fuzz: object, rng: object, seed: int) -> tuple[tir.PrimFunc, int, int, int]:
    import random

    assert isinstance(rng, random.Random)
    n, m, kk = rng.randint(3, 19), rng.randint(3, 19), rng.randint(2, 9)
    a = te.placeholder((n, kk), "float32", "A")
    b = te.placeholder((kk, m), "float32", "B")
    k = te.reduce_axis(kk, "k")
    mm = te.compute((n, m), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), "mm")
    out = te.compute((n, m), lambda i, j: tir.max(mm[i, j], 0.0), "out")
    s = te.create_schedule(out)
    if rng.random() < 0.5:
        s[mm].compute_at(s[out], rng.choice(s[out].leaf_iter_vars))
    fuzz._random_schedule(rng, s, mm)  # type: ignore[attr-defined]
    fuzz._random_schedule(rng, s, out)  # type: ignore[attr-defined]
    return te.lower(s, [a, b, out], name=f"fuzz{seed}"), n, m, kk


def test_random_schedules_compile_and_match_numpy(build) -> None:  # type: ignore[no-untyped-def]
    import importlib.util
    import random
    from pathlib import Path

    path = Path(__file__).parents[1] / "tir" / "te" / "test_te_random_schedules.py"
    spec = importlib.util.spec_from_file_location("ember_random_schedules", path)
    assert spec is not None and spec.loader is not None
    fuzz = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fuzz)
    cases = [_fuzz_case(fuzz, random.Random(1000 + seed), seed) for seed in range(10)]
    mod = build([f for f, *_ in cases])
    for f, n, m, kk in cases:
        x = RNG.standard_normal((n, kk)).astype("float32")
        y = RNG.standard_normal((kk, m)).astype("float32")
        got = _nd(np.zeros((n, m), "float32"))
        mod[f"ember_{f.name}"](_nd(x), _nd(y), got)
        np.testing.assert_allclose(got.numpy(), np.maximum(x @ y, 0), rtol=1e-4, atol=1e-5)
