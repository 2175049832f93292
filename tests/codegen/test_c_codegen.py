"""The C text of single kernels: pragmas, math, helpers, names, and what is refused."""

from __future__ import annotations

import pytest

from ember import tir
from ember.codegen.c import generate_source, parallel, symbol_name
from ember.errors import CompileError
from ember.tir import te


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small kernels pass the cost model, whatever WORK_PER_CHUNK is tuned to."""
    monkeypatch.setattr(parallel, "WORK_PER_CHUNK", 4096)


def _ew(kind: tir.ForKind, dtype: str = "float32", n: int = 64) -> tir.PrimFunc:
    a = tir.decl_buffer((n,), dtype, "A")
    b = tir.decl_buffer((n,), dtype, "B")
    i = tir.Var("i")
    return tir.PrimFunc("ew", (a, b), tir.for_range(i, n, tir.store(b, a[i] + a[i], i), kind))


def test_loop_kinds_become_pragmas(small_chunks: None) -> None:
    # a parallel loop worth threads becomes a range lambda run by ember's pool, never OpenMP
    big = generate_source([_ew(tir.ForKind.PARALLEL, n=1 << 16)])
    assert "EmberBackendParallelFor(ember_ew_par0, &ember_par0, (int64_t)65536, " in big
    assert ", 0) != 0) {" in big and "omp parallel" not in big
    small = generate_source([_ew(tir.ForKind.PARALLEL)])  # too little work: grain > extent
    assert "EmberBackendParallelFor(ember_ew_par0, &ember_par0, (int64_t)64, 1366, 0)" in small
    assert "#pragma omp simd\n" in generate_source([_ew(tir.ForKind.VECTORIZED)])
    assert "#pragma GCC unroll 64\n" in generate_source([_ew(tir.ForKind.UNROLLED)])
    no_omp = generate_source([_ew(tir.ForKind.VECTORIZED)], {"openmp": False})
    assert "#pragma GCC ivdep" in no_omp and "pragma omp" not in no_omp
    serial = generate_source([_ew(tir.ForKind.PARALLEL, n=1 << 16)], {"openmp": False})
    assert "pragma" not in serial and "EmberBackendParallelFor" not in serial
    threads = generate_source([_ew(tir.ForKind.PARALLEL, n=1 << 16)], {"num-threads": 4})
    assert ", 4) != 0) {" in threads


def test_nested_parallel_loops_get_one_lambda(small_chunks: None) -> None:
    a = tir.decl_buffer((256, 256), "float32", "A")
    i, j = tir.Var("i"), tir.Var("j")
    par = tir.ForKind.PARALLEL
    body = tir.for_range(i, 256, tir.for_range(j, 256, tir.store(a, 0.0, i, j), par), par)
    src = generate_source([tir.PrimFunc("p", (a,), body)])
    assert src.count("EmberBackendParallelFor(") == 1 and "omp parallel" not in src


def test_restrict_pointers_and_types() -> None:
    src = generate_source([_ew(tir.ForKind.SERIAL, "int64")])
    assert "static int32_t ember_ew_unpacked(int64_t* restrict A, int64_t* restrict B)" in src
    assert '#include "ember/runtime_api.h"' in src
    assert "EMBER_DLL int32_t ember_ew(EmberValue* args" in src


def test_math_uses_float_functions() -> None:
    a = te.placeholder((8,), "float32", "A")
    ops = [tir.exp, tir.log, tir.sqrt, tir.tanh, tir.erf, tir.floor, tir.round]
    b = te.compute((8,), lambda i: sum((f(a[i]) for f in ops), tir.const(0.0)), "B")
    src = generate_source([te.lower(b, name="m")])
    for name in ("logf(", "sqrtf(", "tanhf(", "floorf(", "rintf("):
        assert name in src
    assert "ember_exp_f32(A[i])" in src and "expf(" not in src  # inline (exp_inline_helper)
    assert "ember_erf_f32(A[i])" in src and "erff(" not in src  # inline (vecmath.erf_helper)
    d = te.placeholder((8,), "float64", "D")
    e = te.compute((8,), lambda i: tir.pow(d[i], 2.5) + tir.sigmoid(d[i]) + tir.erf(d[i]), "E")
    src64 = generate_source([te.lower(e, name="m64")])
    assert "pow(D[i], 2.5)" in src64 and "ember_sigmoid_f64(D[i])" in src64
    assert "erf(D[i])" in src64  # float64: libm's
    assert "const double t = exp(-fabs(x));" in src64


def test_floor_division_plain_when_non_negative() -> None:
    a = tir.decl_buffer((16,), "int32", "A")
    i = tir.Var("i")
    f = tir.PrimFunc("d", (a,), tir.for_range(i, 16, tir.store(a, i // 4 + a[i] // 4, i)))
    src = generate_source([f])
    assert "i / 4 + ember_floordiv_i32(A[i], 4)" in src
    assert "static inline int32_t ember_floordiv_i32(int32_t a, int32_t b)" in src


def test_constants() -> None:
    a = tir.decl_buffer((4,), "float32", "A")
    i = tir.Var("i")
    val = tir.if_then_else(a[i] > 1e30, tir.const(float("inf")), tir.const(0.1))
    src = generate_source([tir.PrimFunc("c", (a,), tir.for_range(i, 4, tir.store(a, val, i)))])
    assert "A[i] > 1e+30f ? INFINITY : 0.1f" in src


def test_extern_prototype_from_argument_types() -> None:
    a = tir.decl_buffer((4,), "float32", "A")
    n = tir.Var("n")
    call = tir.call_extern("int32", "ext_fn", a.data, n, 1.5, "tag")
    src = generate_source([tir.PrimFunc("x", (a, n), tir.Evaluate(call))])
    assert "extern int32_t ext_fn(float*, int32_t, float, const char*);" in src
    assert '(void)ext_fn(A, n, 1.5f, "tag");' in src
    clash = tir.call_extern("int32", "ext_fn", n)
    with pytest.raises(CompileError, match="two signatures"):
        generate_source(
            [tir.PrimFunc("y", (a, n), tir.seq(tir.Evaluate(call), tir.Evaluate(clash)))]
        )


def test_unsupported_dtypes_are_clear_errors() -> None:
    generate_source([_ew(tir.ForKind.SERIAL, "float16")])  # half types: test_c_half.py
    hv = tir.decl_buffer((8,), "float16", "H")
    hr = tir.Ramp(tir.const(0), tir.const(1), 4)
    with pytest.raises(CompileError, match="vector dtype float16x4 is not supported"):
        generate_source([tir.PrimFunc("h", (hv,), tir.BufferStore(hv, hv[hr], (hr,)))])
    a = tir.decl_buffer((8,), "float32", "A")
    r = tir.Ramp(tir.const(0), tir.const(1), 4)
    ext = tir.call_extern("float32x4", "vec_fn", tir.BufferLoad(a, (r,)))
    vec = tir.PrimFunc("v", (a,), tir.BufferStore(a, ext, (r,)))
    with pytest.raises(CompileError, match="Call on vector dtype float32x4"):
        generate_source([vec])
    odd = tir.Ramp(tir.const(0), tir.const(1), 3)
    bad = tir.PrimFunc("w", (a,), tir.BufferStore(a, tir.BufferLoad(a, (odd,)), (odd,)))
    with pytest.raises(CompileError, match="power of two"):
        generate_source([bad])


def test_explicit_vector_code() -> None:
    a = tir.decl_buffer((4, 8), "float32", "A")
    t = tir.decl_buffer((8, 4), "float32", "T")
    i = tir.Var("i")
    row = tir.Ramp(tir.const(0), tir.const(1), 8)
    value = tir.max(tir.BufferLoad(a, (i, row)) * tir.Broadcast(tir.const(2.0), 8), 0.0)
    body = tir.for_range(i, 4, tir.BufferStore(t, value, (row, i)))
    src = generate_source([tir.PrimFunc("vt", (a, t), body)])
    assert "typedef float ember_f32x8 __attribute__((vector_size(32)));" in src
    assert "ember_f32x8_max(ember_f32x8_load(A + i * 8) * ember_f32x8_bcast(2.0f)" in src
    assert "T[i + 28] = lanes_[7];" in src


def test_error_exits_inside_parallel_loops_return_from_the_lambda(small_chunks: None) -> None:
    a = tir.decl_buffer((64,), "float32", "A")
    t = tir.decl_buffer((1024,), "float32", "T", scope="local")
    i, k = tir.Var("i"), tir.Var("k")
    fill = tir.for_range(k, 1024, tir.store(t, a[i], k))
    checked = tir.AssertStmt(t[0] > -1.0, "negative", tir.store(a, t[0], i))
    body = tir.Allocate(t, tir.seq(fill, checked), tir.StorageKind.HEAP)
    f = tir.PrimFunc("h", (a,), tir.for_range(i, 64, body, tir.ForKind.PARALLEL))
    src = generate_source([f])
    lam = src[src.index("static int32_t ember_h_par0(") : src.index("ember_h_unpacked(")]
    assert 'EmberAPISetLastError("h: negative (in a parallel loop)");' in lam
    assert "EmberBackendFreeWorkspace(1, 0, T);\n      return -1;" in lam
    unpacked = src[src.index("ember_h_unpacked(") : src.index("EMBER_DLL")]
    assert unpacked.count("return -1;") == 1 and "perr" not in src


def test_invalid_ir_is_rejected_by_the_verifier() -> None:
    from ember.errors import IRError

    a = tir.decl_buffer((4,), "float32", "A")
    j = tir.Var("j")
    with pytest.raises(IRError, match="outside the scope"):
        generate_source([tir.PrimFunc("bad", (a,), tir.store(a, 1.0, j))])


def test_symbol_names() -> None:
    assert symbol_name("fused_add") == "ember_fused_add"
    assert symbol_name("ember_x") == "ember_x"
    with pytest.raises(CompileError, match="valid C identifier"):
        symbol_name("a-b")


def test_same_named_variables_and_buffers_are_renamed() -> None:
    a = tir.decl_buffer((4,), "float32", "A")
    t1 = tir.decl_buffer((4,), "float32", "A", scope="local")
    i1, i2 = tir.Var("i"), tir.Var("i")
    body = tir.Allocate(
        t1,
        tir.seq(
            tir.for_range(i1, 4, tir.store(t1, a[i1], i1)),
            tir.for_range(i2, 4, tir.store(a, t1[i2] * 2.0, i2)),
        ),
    )
    src = generate_source([tir.PrimFunc("r", (a,), body)])
    assert "float A_1[4]" in src and "A[i_1] = A_1[i_1] * 2.0f;" in src


def test_let_rebinding_gets_its_own_block() -> None:
    a = tir.decl_buffer((2,), "int32", "A")
    x = tir.Var("x")
    body = tir.seq(
        tir.LetStmt(x, tir.const(1), tir.store(a, x, 0)),
        tir.LetStmt(x, tir.const(2), tir.store(a, x, 1)),
    )
    src = generate_source([tir.PrimFunc("l", (a,), body)])
    assert "const int32_t x = 1;" in src and "{\n    const int32_t x = 2;" in src


def test_export_unpacked_and_static_pool_parameter() -> None:
    a = tir.decl_buffer((4,), "float32", "A")
    t = tir.decl_buffer((4,), "float32", "T", scope="local")
    pool = tir.Var("sram", "handle")
    i = tir.Var("i")
    body = tir.Allocate(
        t,
        tir.seq(tir.for_range(i, 4, tir.store(t, a[i], i)), tir.store(a, t[3], 0)),
        tir.StorageKind.STATIC,
        pool="sram",
        offset=256,
    )
    f = tir.PrimFunc("aot", (a, pool), body)
    src = generate_source([f], {"export_unpacked": True})
    assert "EMBER_DLL int32_t ember_aot_unpacked(float* restrict A, void* sram)" in src
    assert "float* restrict T = (float*)((uint8_t*)sram + 256);" in src
    assert "ember_pool_" not in src
    static_src = generate_source([tir.PrimFunc("aot2", (a,), body)])
    assert "static uint8_t ember_pool_sram[272] __attribute__((aligned(64)));" in static_src
    assert "static int32_t ember_aot2_unpacked(" in static_src


def test_static_allocation_inside_parallel_loop_is_refused() -> None:
    a = tir.decl_buffer((4,), "float32", "A")
    t = tir.decl_buffer((4,), "float32", "T", scope="local")
    i = tir.Var("i")
    body = tir.Allocate(t, tir.store(a, t[i], i), tir.StorageKind.STATIC, pool="ws", offset=0)
    f = tir.PrimFunc("s", (a,), tir.for_range(i, 4, body, tir.ForKind.PARALLEL))
    with pytest.raises(CompileError, match="shared by all threads"):
        generate_source([f])


def test_parallel_and_simd_regions_do_not_nest() -> None:
    a = tir.decl_buffer((4, 4, 4), "float32", "A")
    i, j, k = tir.Var("i"), tir.Var("j"), tir.Var("k")
    inner = tir.for_range(k, 4, tir.store(a, 0.0, i, j, k), tir.ForKind.VECTORIZED)
    mid = tir.for_range(j, 4, inner, tir.ForKind.PARALLEL)
    src = generate_source(
        [tir.PrimFunc("n", (a,), tir.for_range(i, 4, mid, tir.ForKind.VECTORIZED))]
    )
    assert src.count("#pragma omp simd") == 1 and "EmberBackendParallelFor" not in src
    t = tir.decl_buffer((1024,), "float32", "T", scope="local")
    heap = tir.Allocate(t, tir.store(a, t[0], i, 0, 0), tir.StorageKind.HEAP)
    simd = generate_source(
        [tir.PrimFunc("v", (a,), tir.for_range(i, 4, heap, tir.ForKind.VECTORIZED))]
    )
    assert "int32_t ember_perr0 = 0;\n  #pragma omp simd" in simd
    assert "(in a vectorized loop)" in simd


def test_libm_libc_and_extern_names_are_never_shadowed() -> None:
    a = tir.decl_buffer((8,), "float32", "tan")
    b = tir.decl_buffer((8,), "float32", "expf")
    c = tir.decl_buffer((8,), "float64", "my_fn")
    i = tir.Var("memcpy")
    call = tir.call_extern("float64", "my_fn", tir.cast("float64", a[i]))
    body = tir.for_range(i, 8, tir.seq(tir.store(b, tir.log(a[i]), i), tir.store(c, call, i)))
    text = generate_source([tir.PrimFunc("names", (a, b, c), body)])
    assert "float* restrict tan_1, float* restrict expf_1, double* restrict my_fn_1" in text
    assert "for (int32_t memcpy_1 = 0;" in text
    assert "expf_1[memcpy_1] = logf(tan_1[memcpy_1]);" in text
    assert "my_fn_1[memcpy_1] = my_fn((double)tan_1[memcpy_1]);" in text
