"""Parallel loops as range lambdas on ember's thread pool: captures, splits, errors, counts."""

from __future__ import annotations

import numpy as np
import pytest

import ember.runtime as rt
from ember import tir
from ember.codegen.c import generate_source, parallel
from ember.codegen.c.parallel import grain_of, stmt_cost
from ember.errors import FFIError

pytestmark = pytest.mark.cc

PAR = tir.ForKind.PARALLEL


@pytest.fixture(autouse=True)
def _small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small kernels pass the cost model here, whatever WORK_PER_CHUNK is tuned to."""
    monkeypatch.setattr(parallel, "WORK_PER_CHUNK", 4096)


def _rows(n: tir.PrimExpr | int, m: int = 256) -> tuple[tir.PrimFunc, tir.Var]:
    """out[i, j] = a[i, j] * scale + i + offset, parallel over rows, with a let and a param."""
    a = tir.decl_buffer((n, m), "float32", "A")
    out = tir.decl_buffer((n, m), "float32", "out")
    scale = tir.Var("scale", "float32")
    i, j, off = tir.Var("i"), tir.Var("j"), tir.Var("off", "float32")
    value = a[i, j] * scale + tir.cast("float32", i) + off
    inner = tir.for_range(j, m, tir.store(out, value, i, j), tir.ForKind.VECTORIZED)
    body = tir.LetStmt(off, scale * 2.0, tir.for_range(i, n, inner, PAR))
    return tir.PrimFunc("rows", (a, out, scale), body), i


def test_cost_model_grain() -> None:
    f, _ = _rows(512)
    loop = f.body.body
    assert isinstance(loop, tir.For)
    per_row = stmt_cost(loop.body)
    assert per_row >= 256  # 256 elements of a few operations each
    assert grain_of(loop.body) == -(-4096 // per_row)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_outlined_loop_is_correct_at_any_thread_count(build, threads) -> None:  # type: ignore[no-untyped-def]
    f, _ = _rows(512)
    src = generate_source([f])
    assert "ember_rows_par0_t ember_par0 = {.A = A, .out = out, .scale = scale, .off = off};" in src
    mod = build([f])
    x = np.random.default_rng(3).random((512, 256), dtype="float32")
    want = x * 1.5 + np.arange(512, dtype="float32")[:, None] + 3.0
    with rt.num_threads(threads):
        for _ in range(20):  # many launches on the same pool
            out = rt.array(np.zeros_like(x))
            mod["ember_rows"](rt.array(x), out, 1.5)
            np.testing.assert_allclose(out.numpy(), want, rtol=1e-6)


@pytest.mark.parametrize("n", [0, 1, 7, 300])
def test_symbolic_extent_splits_or_runs_inline(build, n) -> None:  # type: ignore[no-untyped-def]
    size = tir.Var("n")
    f, _ = _rows(size, 64)
    assert "EmberBackendParallelFor(ember_rows_par0, &ember_par0, (int64_t)n, " in generate_source(
        [f]
    )
    x = np.ones((n, 64), "float32")
    out = rt.array(np.zeros_like(x))
    with rt.num_threads(2):
        build([f])["ember_rows"](rt.array(x), out, 2.0)
    want = 2.0 + np.arange(n, dtype="float32")[:, None] + 4.0
    np.testing.assert_allclose(out.numpy(), np.broadcast_to(want, (n, 64)))


def test_loop_with_a_start_and_a_captured_stack_array(build) -> None:  # type: ignore[no-untyped-def]
    a = tir.decl_buffer((16096,), "float32", "A")
    t = tir.decl_buffer((8,), "float32", "T", scope="local")
    i, k = tir.Var("i"), tir.Var("k")
    fill = tir.for_range(k, 8, tir.store(t, tir.cast("float32", k), k))
    work = tir.for_range(i, 16000, tir.store(a, a[i] + t[7], i), PAR, start=96)
    f = tir.PrimFunc("st", (a,), tir.Allocate(t, tir.seq(fill, work), tir.StorageKind.STACK))
    src = generate_source([f])
    assert "for (int32_t i = (int32_t)ember_begin + 96; i < (int32_t)ember_end + 96; ++i)" in src
    assert "float* T;" in src  # the stack array is shared through the closure
    out = rt.array(np.zeros(16096, "float32"))
    with rt.num_threads(2):
        build([f])["ember_st"](out)
    np.testing.assert_array_equal(out.numpy()[:96], 0.0)
    np.testing.assert_array_equal(out.numpy()[96:], 7.0)


def test_error_in_one_chunk_reaches_the_caller_at_every_thread_count(build) -> None:  # type: ignore[no-untyped-def]
    a = tir.decl_buffer((4096,), "float32", "A")
    i = tir.Var("i")
    body = tir.AssertStmt(a[i] >= 0.0, "negative input", tir.store(a, a[i] * 2.0, i))
    f = tir.PrimFunc("chk", (a,), tir.for_range(i, 4096, body, PAR))
    assert "EmberBackendParallelFor" in generate_source([f])
    mod = build([f])
    bad = np.ones(4096, "float32")
    bad[4000] = -1.0
    for threads in (1, 2, 4):
        with rt.num_threads(threads):
            with pytest.raises(FFIError, match=r"chk: negative input \(in a parallel loop\)"):
                mod["ember_chk"](rt.array(bad))
            ok = rt.array(np.ones(4096, "float32"))
            mod["ember_chk"](ok)  # the pool still works after a failure
            np.testing.assert_array_equal(ok.numpy(), 2.0)


def test_target_thread_count_is_passed_to_the_pool(build) -> None:  # type: ignore[no-untyped-def]
    f, _ = _rows(512)
    src = generate_source([f], {"num-threads": 3})
    assert ", 3) != 0) {" in src and "omp parallel" not in src
    x = np.ones((512, 256), "float32")
    out = rt.array(np.zeros_like(x))
    build([f], {"num-threads": 3})["ember_rows"](rt.array(x), out, 1.0)
    np.testing.assert_allclose(out.numpy()[:, 0], np.arange(512) + 3.0)


def test_index_check_inside_a_parallel_loop(build) -> None:  # type: ignore[no-untyped-def]
    a = tir.decl_buffer((4,), "float32", "A")
    idx = tir.decl_buffer((4096,), "int64", "I")
    out = tir.decl_buffer((4096,), "float32", "B")
    i = tir.Var("i")
    load = a[tir.index_check(idx[i], 4, "the test's indices")]
    f = tir.PrimFunc("gather", (a, idx, out), tir.for_range(i, 4096, tir.store(out, load, i), PAR))
    src = generate_source([f])
    lam = src[src.index("static int32_t ember_gather_par0(") : src.index("ember_gather_unpacked(")]
    assert "int32_t ember_kerr = 0;" in lam  # the lambda's own flag, reported per chunk
    mod = build([f])
    data = np.arange(4, dtype="float32")
    good = np.tile(np.array([3, -1, 0, 1], "int64"), 1024)
    res = rt.array(np.zeros(4096, "float32"))
    with rt.num_threads(2):
        mod["ember_gather"](rt.array(data), rt.array(good), res)
        np.testing.assert_array_equal(res.numpy()[:4], [3, 3, 0, 1])
        bad = good.copy()
        bad[3000] = 7
        with pytest.raises(FFIError, match=r"gather: index 7 out of range \[-4, 4\)"):
            mod["ember_gather"](rt.array(data), rt.array(bad), res)
