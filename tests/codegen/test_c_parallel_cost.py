"""The parallel loops' cost model (ember/codegen/c/parallel.py) on calls of extern kernels."""

from __future__ import annotations

from ember import tir
from ember.codegen.c import parallel
from ember.codegen.c.f32_kernels import F32_KERNEL_NAMES
from ember.codegen.c.parallel import MAC_COST, grain_of, stmt_cost
from ember.tir.expr import const
from ember.tir.op import call_extern
from ember.tir.op import min as tir_min


def _tile_call(
    count: tir.PrimExpr, e0: int, e1: int, e2: int, name: str = "ember_f32_conv_tile"
) -> tir.Stmt:
    """One ember_f32_conv_tile call (the argument order of ember.ops.nn_conv_f32); the
    lanes kernel takes a `zero` flag before the extents."""
    acc = tir.decl_buffer((96,), "float32", "acc")
    x = tir.decl_buffer((4096,), "float32", "x")
    w = tir.decl_buffer((4096,), "float32", "w")
    zero = [1] if name == "ember_f32_lanes_tile" else []
    ints = [6, 1, 0, *zero, e0, 1, 1, e1, 1, 1, e2, 1, 16]
    args = [acc.data, x.data, w.data, const(0, "int64"), const(0, "int64"), count]
    args += [const(v, "int32") for v in ints]
    return tir.Evaluate(call_extern("int32", name, *args))


def test_a_conv_tile_call_costs_its_multiply_adds() -> None:
    """A 3x3 convolution over 256 channels, 6 positions x 16 channels: 6 * 2 vectors *
    2304 steps multiply-adds; the loop around such calls gets a grain of one iteration (it
    was thousands: ResNet-50's 14x14 and 7x7 layers ran on one thread)."""
    call = _tile_call(const(6, "int32"), 3, 3, 256)
    assert stmt_cost(call) >= 6 * 2 * 2304 * MAC_COST
    i = tir.Var("i")
    assert grain_of(tir.for_range(i, 16, call)) == 1


def test_a_guarded_count_takes_its_constant_bound() -> None:
    n = tir.Var("n")
    guarded = _tile_call(tir_min(const(4, "int32"), n), 1, 1, 64)
    assert stmt_cost(guarded) >= 4 * 2 * 64 * MAC_COST


def test_an_unknown_extern_call_costs_its_nodes() -> None:
    call = tir.Evaluate(call_extern("int32", "some_kernel", const(1, "int32")))
    assert "some_kernel" not in parallel.EXTERN_COSTS
    assert stmt_cost(call) < 10


def test_every_tile_kernel_costs_its_multiply_adds() -> None:
    """The pair (2 blocks of 16), narrow (8, 24 lanes) and position-lane kernels are counted
    too: a loop of their calls must not get a grain that keeps it on one thread (resnet8's
    stride-2 32->64 layer: 2 pair tiles of 5 us each, grain 43 without the pair's cost)."""
    i = tir.Var("i")
    for name, lanes in [
        ("ember_f32_conv_tile2", 32),
        ("ember_f32_conv_tile2_pad", 32),
        ("ember_f32_conv_tile8", 8),
        ("ember_f32_conv_tile24", 24),
        ("ember_f32_lanes_tile", 16),
    ]:
        call = _tile_call(const(6, "int32"), 3, 3, 96, name)
        assert stmt_cost(call) >= 6 * (lanes // 8) * 864 * MAC_COST, name
        assert grain_of(tir.for_range(i, 16, call)) == 1, name


def test_a_scalar_copy_costs_copy_cost_per_element() -> None:
    """A layout transpose (a store of a plain load, scalar) counts COPY_COST per element; the
    same copy vectorized, or a scalar store of arithmetic, keeps the operation count."""
    a = tir.decl_buffer((64, 3), "float32", "A")
    out = tir.decl_buffer((3, 64), "float32", "out")
    i, j = tir.Var("i"), tir.Var("j")
    copy = tir.for_range(i, 64, tir.store(out, a[i, j], j, i))
    assert stmt_cost(copy) == 64 * parallel.COPY_COST
    cast = tir.for_range(i, 64, tir.store(out, tir.cast("float32", a[i, j]), j, i))
    assert stmt_cost(cast) == 64 * parallel.COPY_COST
    vector = tir.for_range(i, 64, tir.store(out, a[i, j], j, i), tir.ForKind.VECTORIZED)
    assert stmt_cost(vector) == 64 // parallel.VECTOR_LANES
    scaled = tir.for_range(i, 64, tir.store(out, a[i, j] * 2.0, j, i))
    assert stmt_cost(scaled) < 64 * parallel.COPY_COST
    assert grain_of(tir.for_range(j, 3, copy)) < grain_of(tir.for_range(j, 3, scaled))


def test_a_depthwise_row_call_costs_its_multiply_adds() -> None:
    """ember_f32_dw3x3 (ncols argument 5) and ember_f32_dw3x3_ep (argument 8): ncols x 2
    vectors x 9 taps multiply-adds; a loop of 420 calls of 7 positions (mobilenet_v2's 7x7x960
    depthwise layer) gets a grain under half its extent (it was thousands: one thread)."""
    acc = tir.decl_buffer((112,), "float32", "acc")
    x = tir.decl_buffer((4096,), "float32", "x")
    plain = [acc.data, x.data, x.data, const(0, "int64"), const(0, "int64"), const(7, "int32")]
    plain += [const(v, "int32") for v in (448, 64, 64, 48, 16, 0, 7, -1, 1, 7, 1)]
    ep = [acc.data, x.data, x.data, x.data, *(const(0, "int64") for _ in range(4))]
    ep += [const(v, "int32") for v in (7, 64, 448, 64, 64, 48, 16, 0, 7, -1, 1, 7, 1)]
    ep += [const(0.0, "float32")]
    for name, args in (("ember_f32_dw3x3", plain), ("ember_f32_dw3x3_ep", ep)):
        call = tir.Evaluate(call_extern("int32", name, *args))
        assert stmt_cost(call) >= 7 * 2 * 9 * MAC_COST
        i = tir.Var("i")
        assert grain_of(tir.for_range(i, 420, call)) < 210


def test_a_loop_of_one_to_two_chunks_of_work_splits_in_halves() -> None:
    """Between SPLIT_WORK and two chunks of work a constant-extent loop gets half its extent
    as the grain (two chunks at two threads); under SPLIT_WORK, or of unknown extent, the
    grain of WORK_PER_CHUNK stays."""
    call = _tile_call(const(6, "int32"), 1, 1, 64)
    per = stmt_cost(call)
    grain = grain_of(call)
    extent = max(grain, -(-parallel.SPLIT_WORK // per))
    assert extent < 2 * grain
    assert grain_of(call, extent) == -(-extent // 2)
    assert grain_of(call, 2 * grain) == grain
    assert grain_of(call, None) == grain
    small = tir.Evaluate(call_extern("int32", "some_kernel", const(1, "int32")))
    assert grain_of(small, 3) == grain_of(small)


def test_a_loop_of_less_than_a_chunk_but_local_split_work_runs_in_halves() -> None:
    """A constant-extent loop with LOCAL_SPLIT_WORK or more but under one chunk of work
    (ds_cnn_kws's depthwise rows: 100 calls) gets half its extent, rounded up, so that each
    core keeps its own rows; with less work, or one iteration, the chunk grain stays."""
    call = tir.Evaluate(call_extern("int32", "ember_f32_dw3x3_ep", *[const(5, "int32")] * 9))
    per = stmt_cost(call)
    grain = grain_of(call)
    extent = -(-parallel.LOCAL_SPLIT_WORK // per) + 1
    assert extent * per < parallel.SPLIT_WORK and extent < grain
    assert grain_of(call, extent) == -(-extent // 2)
    assert grain_of(call, extent - 2) == grain
    assert grain_of(call, 1) == grain


def test_every_kernel_the_ops_emit_has_a_cost() -> None:
    """Each float32 tile kernel a rewrite may call (ember.codegen.c.f32_kernels) is in
    EXTERN_COSTS: without an entry the padded stride-2 layers' pad kernel (2 tiles of 9 us)
    got a grain of 22 and ran on one thread."""
    assert set(parallel.EXTERN_COSTS).issuperset(F32_KERNEL_NAMES)
