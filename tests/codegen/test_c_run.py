"""Generated C compiled with the system compiler and called through the packed ABI."""

from __future__ import annotations

import numpy as np
import pytest
from codegen_build import compile_funcs

import ember.runtime as rt
from ember import tir
from ember.errors import FFIError
from ember.tir import te

pytestmark = pytest.mark.cc

RNG = np.random.default_rng(11)


def _nd(x: np.ndarray) -> rt.NDArray:
    return rt.array(x)


def _matmul(n: int, m: int, k: int) -> tir.PrimFunc:
    a = te.placeholder((n, k), "float32", "A")
    b = te.placeholder((k, m), "float32", "B")
    r = te.reduce_axis(k, "k")
    c = te.compute((n, m), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), "C")
    s = te.create_schedule(c)
    io, ii = s[c].split(c.op.axis[0], factor=4)
    jo, ji = s[c].split(c.op.axis[1], factor=8)
    s[c].reorder(io, jo, r, ii, ji)
    s[c].parallel(io)
    s[c].vectorize(ji)
    return te.lower(s, [a, b, c], name="matmul")


def _conv2d(pad: int = 1) -> tir.PrimFunc:
    n, c, h, w, k, r = 2, 3, 9, 7, 5, 3
    x = te.placeholder((n, c, h, w), "float32", "X")
    wt = te.placeholder((k, c, r, r), "float32", "W")
    inside = lambda y, xx: tir.logical_and(y >= pad, y < h + pad, xx >= pad, xx < w + pad)  # noqa: E731
    p = te.compute(
        (n, c, h + 2 * pad, w + 2 * pad),
        lambda b, ch, y, xx: te.if_then_else(inside(y, xx), x[b, ch, y - pad, xx - pad], 0.0),
        "pad",
    )
    rc, ry, rx = te.reduce_axis(c, "rc"), te.reduce_axis(r, "ry"), te.reduce_axis(r, "rx")
    conv = te.compute(
        (n, k, h, w),
        lambda b, f, y, xx: te.sum(
            p[b, rc, y + ry, xx + rx] * wt[f, rc, ry, rx], axis=[rc, ry, rx]
        ),
        "conv",
    )
    out = te.compute((n, k, h, w), lambda b, f, y, xx: tir.max(conv[b, f, y, xx], 0.0), "relu")
    s = te.create_schedule(out)
    s[p].compute_inline()
    s[conv].compute_at(s[out], out.op.axis[2])
    s[out].parallel(s[out].fuse(out.op.axis[0], out.op.axis[1]))
    return te.lower(s, [x, wt, out], name="conv2d_relu")


def _conv_ref(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((x.shape[0], w.shape[0], x.shape[2], x.shape[3]), "float32")
    for y in range(x.shape[2]):
        for xx in range(x.shape[3]):
            out[:, :, y, xx] = np.einsum("ncij,kcij->nk", xp[:, :, y : y + 3, xx : xx + 3], w)
    return np.maximum(out, 0)


def _elementwise() -> tir.PrimFunc:
    a = te.placeholder((37, 19), "float32", "A")
    t = te.compute((37, 19), lambda i, j: tir.exp(a[i, j]) - tir.tanh(a[i, j]), "T")
    u = te.compute((37, 19), lambda i, j: tir.sigmoid(t[i, j]) * tir.sqrt(tir.fabs(a[i, j])), "U")
    s = te.create_schedule(u)
    s[t].compute_inline()
    fused = s[u].fuse(*u.op.axis)
    outer, inner = s[u].split(fused, factor=16)
    s[u].parallel(outer)
    s[u].vectorize(inner)
    return te.lower(s, [a, u], name="ew_chain")


def _reductions() -> tir.PrimFunc:
    a = te.placeholder((6, 33), "float32", "A")
    k = te.reduce_axis(33, "k")
    mx = te.compute((6,), lambda i: te.max(a[i, k], axis=k), "rowmax")
    k2 = te.reduce_axis(33, "k2")
    ex = te.compute((6, 33), lambda i, j: tir.exp(a[i, j] - mx[i]), "ex")
    sm = te.compute((6,), lambda i: te.sum(ex[i, k2], axis=k2, init=0.0), "rowsum")
    out = te.compute((6, 33), lambda i, j: ex[i, j] / sm[i], "softmax")
    return te.lower([out], name="softmax")


def _int_ops() -> tir.PrimFunc:
    a = te.placeholder((20,), "int32", "A")
    q = te.compute((20,), lambda i: (a[i] // 3) * 100 + a[i] % 3, "Q")
    flag = te.compute((20,), lambda i: a[i] > 0, "Pos")
    small = te.compute((20,), lambda i: tir.cast("uint8", a[i] + 300), "Small")
    return te.lower([q, flag, small], name="int_ops")


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory) -> rt.Module:
    funcs = [_matmul(18, 21, 13), _conv2d(), _elementwise(), _reductions(), _int_ops()]
    return compile_funcs(funcs, tmp_path_factory.mktemp("cgen"))


def test_matmul(lib: rt.Module) -> None:
    a = RNG.random((18, 13), dtype="float32")
    b = RNG.random((13, 21), dtype="float32")
    c = _nd(np.zeros((18, 21), "float32"))
    lib["ember_matmul"](_nd(a), _nd(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-5)


def test_conv2d_nchw(lib: rt.Module) -> None:
    x = RNG.standard_normal((2, 3, 9, 7)).astype("float32")
    w = RNG.standard_normal((5, 3, 3, 3)).astype("float32")
    out = _nd(np.zeros((2, 5, 9, 7), "float32"))
    lib["ember_conv2d_relu"](_nd(x), _nd(w), out)
    np.testing.assert_allclose(out.numpy(), _conv_ref(x, w), rtol=1e-4, atol=1e-5)


def test_parallel_vectorized_elementwise(lib: rt.Module) -> None:
    a = RNG.standard_normal((37, 19)).astype("float32")
    u = _nd(np.zeros((37, 19), "float32"))
    lib["ember_ew_chain"](_nd(a), u)
    t = np.exp(a) - np.tanh(a)
    np.testing.assert_allclose(u.numpy(), np.sqrt(np.abs(a)) / (1 + np.exp(-t)), rtol=1e-5)


def test_reduction_softmax(lib: rt.Module) -> None:
    a = RNG.standard_normal((6, 33)).astype("float32") * 4
    out = _nd(np.zeros((6, 33), "float32"))
    lib["ember_softmax"](_nd(a), out)
    e = np.exp(a - a.max(1, keepdims=True))
    np.testing.assert_allclose(out.numpy(), e / e.sum(1, keepdims=True), rtol=1e-5)


def test_integer_and_bool_semantics_match_interpreter(lib: rt.Module) -> None:
    a = np.arange(-10, 10, dtype="int32")
    outs_c = [np.zeros(20, "int32"), np.zeros(20, "bool"), np.zeros(20, "uint8")]
    nds = [_nd(o) for o in outs_c]
    lib["ember_int_ops"](_nd(a), *nds)
    assert (nds[0].numpy() == (a // 3) * 100 + a % 3).all()
    assert (nds[1].numpy() == (a > 0)).all()
    assert (nds[2].numpy() == ((a + 300) % 256).astype("uint8")).all()
    outs_py = [np.zeros(20, "int32"), np.zeros(20, "bool"), np.zeros(20, "uint8")]
    tir.interpret(_int_ops(), [a.copy(), *outs_py])
    for got, want in zip(nds, outs_py, strict=True):
        assert (got.numpy() == want).all()


def test_bad_arguments_return_errors_not_crashes(lib: rt.Module) -> None:
    f = lib["ember_matmul"]
    a = _nd(np.zeros((18, 13), "float32"))
    b = _nd(np.zeros((13, 21), "float32"))
    c = _nd(np.zeros((18, 21), "float32"))
    with pytest.raises(FFIError, match="expected 3 arguments, got 2"):
        f(a, b)
    with pytest.raises(FFIError, match=r"argument 1 \(B\) dimension 0 must be 13, got 18"):
        f(a, a, c)
    with pytest.raises(FFIError, match=r"argument 2 \(C\) must have dtype float32"):
        f(a, b, _nd(np.zeros((18, 21), "float64")))
    with pytest.raises(FFIError, match=r"argument 0 \(A\) must have 2 dimensions, got 1"):
        f(_nd(np.zeros(18 * 13, "float32")), b, c)
    with pytest.raises(FFIError, match=r"argument 2 \(C\) must be a tensor, got type code 0"):
        f(a, b, 3)
    with pytest.raises(FFIError, match="must be a tensor"):
        f(a, b, None)
    f(a, b, c)  # still works after the failures


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


def test_symbolic_te_kernel_compiles_without_floor_helpers(build) -> None:  # type: ignore[no-untyped-def]
    n = tir.Var("n")
    a = te.placeholder((n, 4), "float32", "A")
    k = te.reduce_axis(4, "k")
    b = te.compute((n,), lambda i: te.sum(a[i, k] * a[i, k], axis=k), "B")
    s = te.create_schedule(b)
    outer, _ = s[b].split(b.op.axis[0], factor=8)
    s[b].parallel(outer)
    f = te.lower(s, [a, b], name="rowsq")
    from ember.codegen.c import generate_source

    assert "floordiv" not in generate_source([f])
    mod = build([f])
    for rows in (1, 8, 21):
        x = RNG.random((rows, 4), dtype="float32")
        out = _nd(np.zeros(rows, "float32"))
        mod["ember_rowsq"](_nd(x), out)
        np.testing.assert_allclose(out.numpy(), (x * x).sum(1), rtol=1e-5)


def test_explicit_vector_micro_kernel(build) -> None:  # type: ignore[no-untyped-def]
    a = tir.decl_buffer((4, 8), "float32", "A")
    b = tir.decl_buffer((8, 16), "float32", "B")
    c = tir.decl_buffer((4, 16), "float32", "C")
    t = tir.decl_buffer((16, 4), "float32", "T")
    i, jo, k = tir.Var("i"), tir.Var("jo"), tir.Var("k")
    cols = tir.Ramp(jo * 8, tir.const(1), 8)
    acc = tir.BufferLoad(c, (i, cols))
    prod = tir.Broadcast(a[i, k], 8) * tir.BufferLoad(b, (k, cols))
    init = tir.BufferStore(c, tir.Broadcast(tir.const(0.0), 8), (i, cols))
    update = tir.BufferStore(c, acc + prod, (i, cols))
    relu_t = tir.BufferStore(t, tir.max(acc, tir.Broadcast(tir.const(0.0), 8)), (cols, i))
    inner = tir.seq(init, tir.for_range(k, 8, update, tir.ForKind.UNROLLED), relu_t)
    f = tir.PrimFunc("micro", (a, b, c, t), tir.for_range(i, 4, tir.for_range(jo, 2, inner)))
    x = RNG.random((4, 8), dtype="float32")
    y = RNG.random((8, 16), dtype="float32")
    ref = [np.zeros((4, 16), "float32"), np.zeros((16, 4), "float32")]
    tir.interpret(f, [x, y, *ref])
    mod = build([f])
    outs = [_nd(np.zeros((4, 16), "float32")), _nd(np.zeros((16, 4), "float32"))]
    mod["ember_micro"](_nd(x), _nd(y), *outs)
    np.testing.assert_allclose(outs[0].numpy(), x @ y, rtol=1e-5)
    np.testing.assert_allclose(outs[1].numpy(), np.maximum(x @ y, 0).T, rtol=1e-5)
    np.testing.assert_allclose(outs[0].numpy(), ref[0], rtol=1e-5)


def test_artifacts_load_through_the_runtime_loading_process(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from ember.codegen.c import build_c
    from ember.runtime.artifact_set import ArtifactSet

    funcs = [_elementwise(), _reductions()]
    arts = ArtifactSet(build_c(funcs, {"max_file_bytes": 500}))
    assert len(arts) == 2
    mod = arts.load_module()
    a = RNG.standard_normal((6, 33)).astype("float32")
    out = _nd(np.zeros((6, 33), "float32"))
    mod["ember_softmax"](_nd(a), out)
    e = np.exp(a - a.max(1, keepdims=True))
    np.testing.assert_allclose(out.numpy(), e / e.sum(1, keepdims=True), rtol=1e-5)
    lib = arts.export_library(tmp_path / "exported.so")
    again = rt.load_module(str(lib))
    out2 = _nd(np.zeros((6, 33), "float32"))
    again["ember_softmax"](_nd(a), out2)
    np.testing.assert_allclose(out2.numpy(), out.numpy())


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


def test_register_tiled_matmul_via_compute_at(build) -> None:  # type: ignore[no-untyped-def]
    n = 64
    a = te.placeholder((n, n), "float32", "A")
    b = te.placeholder((n, n), "float32", "B")
    k = te.reduce_axis(n, "k")
    acc = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), "acc")
    c = te.compute((n, n), lambda i, j: acc[i, j], "C")
    s = te.create_schedule(c)
    io, jo, _, ji = s[c].tile(c.op.axis[0], c.op.axis[1], 4, 16)
    s[c].parallel(io)
    s[c].vectorize(ji)
    s[acc].compute_at(s[c], jo)
    ci, cj = acc.op.axis
    s[acc].reorder(k, ci, cj)
    s[acc].unroll(ci)
    s[acc].vectorize(cj)
    f = te.lower(s, [a, b, c], name="mm_tile")
    from ember.codegen.c import generate_source

    assert "float acc[64] __attribute__((aligned(64)));" in generate_source([f])
    x = RNG.random((n, n), dtype="float32")
    y = RNG.random((n, n), dtype="float32")
    out = _nd(np.zeros((n, n), "float32"))
    build([f])["ember_mm_tile"](_nd(x), _nd(y), out)
    np.testing.assert_allclose(out.numpy(), x @ y, rtol=1e-4)


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


def test_float_floor_division_and_modulo(build) -> None:  # type: ignore[no-untyped-def]
    a = te.placeholder((6,), "float32", "A")
    b = te.placeholder((6,), "float32", "B")
    q = te.compute((6,), lambda i: a[i] // b[i], "Q")
    r = te.compute((6,), lambda i: a[i] % b[i], "R")
    f = te.lower([q, r], name="fdivmod")
    x = np.array([7.5, -7.5, 7.5, -7.5, 0.25, 3.0], "float32")
    y = np.array([2.0, 2.0, -2.0, -2.0, 0.5, 1.5], "float32")
    ref = [np.zeros(6, "float32"), np.zeros(6, "float32")]
    tir.interpret(f, [x, y, *ref])
    np.testing.assert_allclose(ref[0], np.floor_divide(x, y))
    np.testing.assert_allclose(ref[1], np.mod(x, y), atol=1e-6)
    outs = [_nd(np.zeros(6, "float32")), _nd(np.zeros(6, "float32"))]
    build([f])["ember_fdivmod"](_nd(x), _nd(y), *outs)
    np.testing.assert_allclose(outs[0].numpy(), np.floor_divide(x, y))
    np.testing.assert_allclose(outs[1].numpy(), np.mod(x, y), atol=1e-6)


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


def test_parallel_loops_follow_the_runtime_thread_count(build) -> None:  # type: ignore[no-untyped-def]
    from ember.runtime import c_api

    out = tir.decl_buffer((8,), "int32", "threads")
    i = tir.Var("i")
    call = tir.call_extern("int32", "omp_get_num_threads")
    f = tir.PrimFunc(
        "count_threads", (out,), tir.for_range(i, 8, tir.store(out, call, i), tir.ForKind.PARALLEL)
    )
    mod = build([f])
    raw = c_api.lib()
    try:
        for n in (1, 2):
            assert raw.EmberBackendSetNumThreads(n) == 0
            got = _nd(np.zeros(8, "int32"))
            mod["ember_count_threads"](got)
            assert got.numpy().tolist() == [n] * 8
    finally:
        raw.EmberBackendSetNumThreads(0)


def test_explicit_vector_select_compare_and_math(build) -> None:  # type: ignore[no-untyped-def]
    a = tir.decl_buffer((32,), "float32", "A")
    b = tir.decl_buffer((32,), "float32", "B")
    io = tir.Var("io")
    lanes = tir.Ramp(io * 8, tir.const(1), 8)
    x = tir.BufferLoad(a, (lanes,))
    keep = tir.logical_and(x > 0.5, tir.logical_not(x > 0.9))
    val = tir.if_then_else(keep, tir.exp(x), tir.sigmoid(x) * 2.0)
    f = tir.PrimFunc("vsel", (a, b), tir.for_range(io, 4, tir.BufferStore(b, val, (lanes,))))
    xv = np.linspace(0, 1.2, 32, dtype="float32")
    ref = np.zeros(32, "float32")
    tir.interpret(f, [xv, ref])
    out = _nd(np.zeros(32, "float32"))
    build([f])["ember_vsel"](_nd(xv), out)
    want = np.where((xv > 0.5) & ~(xv > 0.9), np.exp(xv), 2 / (1 + np.exp(-xv)))
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5)
    np.testing.assert_allclose(ref, want, rtol=1e-5)


def test_vectorize_loops_output_compiles(build) -> None:  # type: ignore[no-untyped-def]
    from ember.tir.transform import vectorize_loops

    a = te.placeholder((64,), "float32", "A")
    b = te.compute((64,), lambda i: tir.max(tir.sqrt(a[i]) - 0.5, 0.0), "B")
    s = te.create_schedule(b)
    _, inner = s[b].split(b.op.axis[0], factor=16)
    s[b].vectorize(inner)
    g = vectorize_loops(te.lower(s, [a, b], name="vsqrt"))
    assert "ramp(" in str(g)
    x = RNG.random(64, dtype="float32")
    out = _nd(np.zeros(64, "float32"))
    build([g])["ember_vsqrt"](_nd(x), out)
    np.testing.assert_allclose(out.numpy(), np.maximum(np.sqrt(x) - 0.5, 0), rtol=1e-6)


def test_strided_buffer_parameter_checks_strides(build) -> None:  # type: ignore[no-untyped-def]
    # A is a (3, 4) window of a (3, 8) array; the runtime only makes compact tensors, so a
    # compact argument must be refused rather than read with the wrong row stride.
    a = tir.decl_buffer((3, 4), "float32", "A", strides=(8, 1))
    b = tir.decl_buffer((3, 4), "float32", "B")
    i, j = tir.Var("i"), tir.Var("j")
    body = tir.for_range(i, 3, tir.for_range(j, 4, tir.store(b, a[i, j] * 2.0, i, j)))
    mod = build([tir.PrimFunc("strided", (a, b), body)])
    out = _nd(np.zeros((3, 4), "float32"))
    with pytest.raises(
        FFIError, match=r"argument 0 \(A\) dimension 0 must have stride 8 elements, got 4"
    ):
        mod["ember_strided"](_nd(np.zeros((3, 4), "float32")), out)
