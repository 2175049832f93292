"""Generated C for hand-written loop IR: workspaces, asserts, extern C calls, AOT chaining.

Heap, stack and static-pool allocations, symbolic shapes and scalar parameters, assertion
failures (also inside parallel loops) surfacing as FFIError, calls into C libraries from
loop IR and from te.extern stages, and an AOT-style main calling unpacked kernels through a
caller-provided workspace pool; each compiled with the system compiler and called through
the packed ABI.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import ember.runtime as rt
from ember import tir
from ember.errors import FFIError
from ember.tir import te

pytestmark = pytest.mark.cc

RNG = np.random.default_rng(11)


def _nd(x: np.ndarray) -> rt.NDArray:
    return rt.array(x)


def test_call_extern(build) -> None:  # type: ignore[no-untyped-def]
    x = tir.decl_buffer((16,), "float32", "X")
    y = tir.decl_buffer((16,), "float32", "Y")
    alpha = tir.Var("alpha", "float32")
    call = tir.call_extern("int32", "my_axpy", y.data, x.data, alpha, 16)
    f = tir.PrimFunc("axpy_extern", (x, y, alpha), tir.Evaluate(call))
    impl = (
        "#include <stdint.h>\n"
        "int32_t my_axpy(float* y, float* x, float a, int32_t n) {\n"
        "  for (int32_t i = 0; i < n; ++i) y[i] += a * x[i];\n"
        "  return 0;\n"
        "}\n"
    )
    mod = build([f], extra_sources=[impl])
    xv = RNG.random(16, dtype="float32")
    yv = RNG.random(16, dtype="float32")
    out = _nd(yv.copy())
    mod["ember_axpy_extern"](_nd(xv), out, 0.5)
    np.testing.assert_allclose(out.numpy(), yv + 0.5 * xv, rtol=1e-6)


def test_te_extern_stage_calls_c_library(build) -> None:  # type: ignore[no-untyped-def]
    a = te.placeholder((5, 7), "float32", "A")
    scaled = te.compute((5, 7), lambda i, j: a[i, j] * 3.0, "scaled")
    sums = te.extern(
        (5,),
        [scaled],
        lambda ins, outs: tir.call_extern("int32", "row_sums", outs[0].data, ins[0].data, 5, 7),
        name="sums",
    )
    out = te.compute((5,), lambda i: sums[i] + 1.0, "out")
    f = te.lower(out, name="extern_rows")
    impl = (
        "#include <stdint.h>\n"
        "int32_t row_sums(float* out, float* x, int32_t rows, int32_t cols) {\n"
        "  for (int32_t r = 0; r < rows; ++r) {\n"
        "    out[r] = 0.0f;\n"
        "    for (int32_t c = 0; c < cols; ++c) out[r] += x[r * cols + c];\n"
        "  }\n"
        "  return 0;\n"
        "}\n"
    )
    mod = build([f], extra_sources=[impl])
    x = RNG.random((5, 7), dtype="float32")
    y = _nd(np.zeros(5, "float32"))
    mod["ember_extern_rows"](_nd(x), y)
    np.testing.assert_allclose(y.numpy(), (3 * x).sum(1) + 1, rtol=1e-5)


def test_symbolic_shape_scalar_param_and_heap_workspace(build) -> None:  # type: ignore[no-untyped-def]
    n = tir.Var("n")
    a = tir.decl_buffer((n,), "float32", "A")
    b = tir.decl_buffer((n,), "float32", "B")
    t = tir.decl_buffer((n,), "float32", "T", scope="local")
    scale = tir.Var("scale", "float32")
    i, j = tir.Var("i"), tir.Var("j")
    body = tir.Allocate(
        t,
        tir.seq(
            tir.for_range(i, n, tir.store(t, a[i] * scale, i), tir.ForKind.PARALLEL),
            tir.for_range(j, n, tir.store(b, t[n - 1 - j] + 1.0, j)),
        ),
        tir.StorageKind.HEAP,
    )
    f = tir.PrimFunc("rev_scale", (a, b, scale), body)
    mod = build([f])
    for size in (1, 5, 1000):
        x = RNG.random(size, dtype="float32")
        out = _nd(np.zeros(size, "float32"))
        mod["ember_rev_scale"](_nd(x), out, 2.0)
        np.testing.assert_allclose(out.numpy(), (x * 2)[::-1] + 1, rtol=1e-6)
    with pytest.raises(FFIError, match=r"dimension 0 of argument 1 \(B\) must equal 'n'"):
        mod["ember_rev_scale"](_nd(np.zeros(3, "float32")), _nd(np.zeros(4, "float32")), 1.0)
    with pytest.raises(FFIError, match=r"argument 2 \(scale\) must be a float"):
        mod["ember_rev_scale"](_nd(np.zeros(3, "float32")), _nd(np.zeros(3, "float32")), None)


def test_static_workspace_pool_and_stack(build) -> None:  # type: ignore[no-untyped-def]
    a = tir.decl_buffer((8,), "int64", "A")
    t1 = tir.decl_buffer((8,), "int64", "T1", scope="local")
    t2 = tir.decl_buffer((8,), "int64", "T2", scope="local")
    i, j, k = tir.Var("i"), tir.Var("j"), tir.Var("k")
    body = tir.Allocate(
        t1,
        tir.Allocate(
            t2,
            tir.seq(
                tir.for_range(i, 8, tir.store(t1, a[i] * 3, i)),
                tir.for_range(
                    j, 8, tir.store(t2, t1[j] + tir.const(1, "int64"), j), tir.ForKind.UNROLLED
                ),
                tir.for_range(k, 8, tir.store(a, t2[7 - k], k)),
            ),
            tir.StorageKind.STACK,
        ),
        tir.StorageKind.STATIC,
        pool="scratch",
        offset=128,
    )
    f = tir.PrimFunc("pooled", (a,), body)
    mod = build([f])
    x = np.arange(8, dtype="int64")
    out = _nd(x.copy())
    mod["ember_pooled"](out)
    assert out.numpy().tolist() == (x * 3 + 1)[::-1].tolist()


def test_assert_reports_error(build) -> None:  # type: ignore[no-untyped-def]
    n = tir.Var("n")
    a = tir.decl_buffer((n,), "float32", "A")
    i = tir.Var("i")
    body = tir.AssertStmt(
        n > 2, "needs more than two elements", tir.for_range(i, n, tir.store(a, 1.0, i))
    )
    mod = build([tir.PrimFunc("checked", (a,), body)])
    with pytest.raises(FFIError, match="checked: needs more than two elements"):
        mod["ember_checked"](_nd(np.zeros(2, "float32")))
    ok = _nd(np.zeros(3, "float32"))
    mod["ember_checked"](ok)
    assert ok.numpy().tolist() == [1.0, 1.0, 1.0]


def test_failure_inside_parallel_loop_is_reported(build) -> None:  # type: ignore[no-untyped-def]
    a = tir.decl_buffer((64,), "float32", "A")
    t = tir.decl_buffer((4096,), "float32", "T", scope="local")
    i, k = tir.Var("i"), tir.Var("k")
    fill = tir.for_range(k, 4096, tir.store(t, a[i] + tir.cast("float32", k), k))
    check = tir.AssertStmt(a[i] >= 0.0, "negative input", tir.store(a, t[4095] - 4095.0, i))
    body = tir.Allocate(t, tir.seq(fill, check), tir.StorageKind.HEAP)
    f = tir.PrimFunc("par_checked", (a,), tir.for_range(i, 64, body, tir.ForKind.PARALLEL))
    mod = build([f])
    x = RNG.random(64, dtype="float32")
    ok = _nd(x.copy())
    mod["ember_par_checked"](ok)
    np.testing.assert_allclose(ok.numpy(), x, rtol=1e-5, atol=1e-3)
    bad = x.copy()
    bad[17] = -1.0
    with pytest.raises(FFIError, match="par_checked: negative input \\(in a parallel loop\\)"):
        mod["ember_par_checked"](_nd(bad))


def test_aot_style_main_calls_unpacked_kernels_with_a_static_pool(build) -> None:  # type: ignore[no-untyped-def]
    # Two kernels with the unpacked convention, and a "run_model" that chains them through
    # an intermediate at a fixed offset of a workspace pool passed in by the caller.
    x = te.placeholder((16,), "float32", "x")
    y = te.compute((16,), lambda i: x[i] * 2.0, "y")
    double = te.lower(y, name="double")
    a = te.placeholder((16,), "float32", "a")
    b = te.compute((16,), lambda i: a[i] + 1.0, "b")
    inc = te.lower(b, name="inc")
    guard = tir.decl_buffer((16,), "float32", "guard")
    failing = tir.PrimFunc(
        "failing",
        (guard,),
        tir.AssertStmt(tir.const(0) > 1, "always fails", tir.Evaluate(tir.const(0))),
    )
    inp = tir.decl_buffer((16,), "float32", "input")
    out = tir.decl_buffer((16,), "float32", "output")
    pool = tir.Var("workspace", "handle")
    mid = tir.decl_buffer((16,), "float32", "mid", scope="local")
    flag = tir.Var("flag")

    def checked(call: tir.PrimExpr, rest: tir.Stmt) -> tir.Stmt:
        return tir.AssertStmt(tir.eq(call, 0), "", rest)

    chain = checked(
        tir.call_extern("int32", "ember_double_unpacked", inp.data, mid.data),
        checked(
            tir.call_extern("int32", "ember_inc_unpacked", mid.data, out.data),
            tir.IfThenElse(
                flag > 0,
                checked(tir.call_extern("int32", "ember_failing_unpacked", out.data), tir.seq()),
            ),
        ),
    )
    body = tir.Allocate(mid, chain, tir.StorageKind.STATIC, pool="workspace", offset=64)
    run = tir.PrimFunc("run_model", (inp, out, pool, flag), body)
    mod = build([double, inc, failing, run], {"export_unpacked": True, "max_file_bytes": 1 << 20})
    xs = RNG.random(16, dtype="float32")
    ws = _nd(np.zeros(64 + 64, "uint8"))
    result = _nd(np.zeros(16, "float32"))
    mod["ember_run_model"](_nd(xs), result, ws, 0)
    np.testing.assert_allclose(result.numpy(), xs * 2 + 1, rtol=1e-6)
    with pytest.raises(FFIError, match="failing: always fails"):
        mod["ember_run_model"](_nd(xs), result, ws, 1)


def test_a_pool_parameter_is_checked_against_its_plan(build) -> None:  # type: ignore[no-untyped-def]
    # Regression: a graph executor sizes a kernel's scratch from graph.json's scratch_bytes,
    # an AOT executor its run's workspace from metadata.json; both are data. A smaller
    # value made the kernel write past the buffer (heap corruption). The packed entry now
    # refuses a pool tensor shorter than what its static allocations span (32 + 8 * 4).
    a = tir.decl_buffer((8,), "float32", "A")
    tmp = tir.decl_buffer((8,), "float32", "tmp", scope="local")
    i, j = tir.Var("i"), tir.Var("j")
    body = tir.Allocate(
        tmp,
        tir.seq(
            tir.for_range(i, 8, tir.store(tmp, a[i] * 2.0, i)),
            tir.for_range(j, 8, tir.store(a, tmp[j] + 1.0, j)),
        ),
        tir.StorageKind.STATIC,
        pool="scratch",
        offset=32,
    )
    f = tir.PrimFunc("pool_param", (a, tir.Var("scratch", "handle")), body)
    mod = build([f])
    kernel = mod["ember_pool_param"]
    x = RNG.random(8, dtype="float32")
    out = _nd(x.copy())
    kernel(out, _nd(np.zeros(64, "uint8")))
    np.testing.assert_allclose(out.numpy(), x * 2 + 1, rtol=1e-6)
    memory = np.zeros(64, "uint8")  # a raw pointer from native code is trusted to be sized
    kernel(out, ctypes.c_void_p(memory.ctypes.data))
    np.testing.assert_allclose(out.numpy(), (x * 2 + 1) * 2 + 1, rtol=1e-6)
    short = r"argument 1 \(scratch\) holds fewer than the 64 bytes the kernel needs"
    with pytest.raises(FFIError, match=short):
        kernel(out, _nd(np.zeros(63, "uint8")))
    with pytest.raises(FFIError, match="must have dtype uint8"):
        kernel(out, _nd(np.zeros(16, "float32")))
    with pytest.raises(FFIError, match="must have 1 dimensions"):
        kernel(out, _nd(np.zeros((8, 8), "uint8")))
    with pytest.raises(FFIError, match="must be a tensor"):
        kernel(out, None)
    with pytest.raises(FFIError, match=r"argument 1 \(scratch\) is NULL; it needs 64 bytes"):
        kernel(out, ctypes.c_void_p(0))
