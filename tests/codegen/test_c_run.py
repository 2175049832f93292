"""Generated C compiled with the system compiler and called through the packed ABI.

Scheduled te kernels (matmul, conv2d, fused elementwise, softmax, integer semantics, tiled
and vectorized loops, explicit vector IR) against numpy and the interpreter, the packed
ABI's argument checks (counts, shapes, dtypes, strides), artifact loading and thread
counts. Workspaces, asserts and extern calls are in test_c_run_workspace.py; seeded random
expressions and schedules in test_c_run_fuzz.py.
"""

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
