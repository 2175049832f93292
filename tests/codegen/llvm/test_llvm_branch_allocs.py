"""A stack buffer whose scope is one if/else is allocated on each side on llvm
(ember.codegen.llvm.branch_allocs): the full register tile of a packed convolution gets an
alloca of its own, which SROA promotes to registers whatever the guarded tail tile does
with its copy. Structure and results, never timings."""

from __future__ import annotations

import numpy as np
import pytest

from ember.codegen.llvm.branch_allocs import split_branch_allocs
from ember.ir import Attrs, Function, TensorType, Var, call, const
from ember.ir.ops.nn_conv_weights import pack_conv_weight
from ember.lowering.lower_group import lower_group
from ember.tir.buffer import decl_buffer
from ember.tir.expr import LT, IntImm
from ember.tir.expr import Var as TVar
from ember.tir.functor import post_order_visit
from ember.tir.stmt import Allocate, BufferStore, IfThenElse, PrimFunc, StorageKind, seq

pytest.importorskip("llvmlite")


def _func(storage: StorageKind = StorageKind.STACK, with_else: bool = True) -> PrimFunc:
    """``acc = allocate(4); if n < 3: acc[0] = 1; out[0] = acc[0] else: ...``."""
    out = decl_buffer((4,), "float32", "out")
    acc = decl_buffer((4,), "float32", "acc", scope="local")
    n = TVar("n", "int32")
    zero = IntImm("int32", 0)
    full = seq(BufferStore(acc, const_f(1.0), (zero,)), BufferStore(out, acc[zero], (zero,)))
    tail = seq(BufferStore(acc, const_f(2.0), (zero,)), BufferStore(out, acc[zero], (zero,)))
    branch = IfThenElse(LT(n, IntImm("int32", 3)), full, tail if with_else else None)
    return PrimFunc("f", (out, n), Allocate(acc, branch, storage))


def const_f(value: float):
    from ember.tir.expr import FloatImm

    return FloatImm("float32", value)


def test_stack_buffer_around_if_else_is_allocated_on_each_side():
    body = split_branch_allocs(_func()).body
    assert isinstance(body, IfThenElse)
    sides = (body.then_case, body.else_case)
    assert all(isinstance(s, Allocate) and s.storage is StorageKind.STACK for s in sides)
    assert sides[0].buffer is sides[1].buffer  # type: ignore[union-attr]


def test_heap_buffers_lone_ifs_and_conditions_reading_the_buffer_stay():
    for func in (_func(StorageKind.HEAP), _func(with_else=False)):
        assert split_branch_allocs(func).body is func.body
    acc = decl_buffer((4,), "float32", "acc", scope="local")
    out = decl_buffer((4,), "float32", "out")
    zero = IntImm("int32", 0)
    store = BufferStore(out, acc[zero], (zero,))
    reads = IfThenElse(LT(acc[zero], const_f(0.5)), store, store)
    func = PrimFunc("g", (out,), Allocate(acc, reads))
    assert split_branch_allocs(func).body is func.body


def _tail_tile_conv(width: int, weight_param: bool = False) -> tuple[Function, list[np.ndarray]]:
    """relu(3x3 conv 16->16) at ``width`` columns (12-column tiles leave a guarded tail),
    its packed weight a constant or (``weight_param``) the second parameter."""
    rng = np.random.default_rng(0)
    packed = pack_conv_weight(rng.standard_normal((16, 16, 3, 3)).astype("float32"), 16)
    x = Var("x", TensorType((1, 16, 8, width), "float32"))
    wv = Var("w", TensorType(packed.shape, "float32"))
    body = call(
        "relu",
        call("nn.conv_packed", x, wv if weight_param else const(packed), padding=(1, 1, 1, 1)),
    )
    params = (x, wv) if weight_param else (x,)
    xs = [rng.standard_normal((1, 16, 8, width)).astype("float32")]
    return Function(params, body, Attrs({"Primitive": 1})), xs


def test_full_tile_and_tail_tile_get_their_own_allocation(monkeypatch):
    import ember.ops.nn_schedule_tiles as tiles

    monkeypatch.setitem(tiles.TILES, "llvm x86-avx512", tiles.RegisterTiles(12, (8, 32)))
    func, _ = _tail_tile_conv(32, weight_param=True)
    prim = lower_group(func, "kernel", "llvm -mcpu=skylake-avx512")
    allocs: list[Allocate] = []

    def fn(n: object) -> None:
        if isinstance(n, Allocate) and n.storage is StorageKind.STACK:
            allocs.append(n)

    post_order_visit(prim.body, fn)
    around = [a for a in allocs if isinstance(a.body, IfThenElse)]  # the tile: full / tail
    assert len(around) == 1
    allocs.clear()
    post_order_visit(split_branch_allocs(prim).body, fn)
    tiles_now = [a for a in allocs if a.buffer is around[0].buffer]
    assert len(tiles_now) == 2 and not any(isinstance(a.body, IfThenElse) for a in tiles_now)


@pytest.mark.parametrize("cols", [10, 12, 14])
def test_tail_tiles_compute_what_c_computes(monkeypatch, cols):
    import ember.ops.nn_schedule_tiles as tiles
    from ember.driver import build
    from ember.ir import IRModule
    from ember.testing.runners import run_artifacts

    monkeypatch.setitem(tiles.TILES, "llvm x86-avx512", tiles.RegisterTiles(cols, (8, 32)))
    func, xs = _tail_tile_conv(32)
    outs = []
    for target in ("llvm -mcpu=skylake-avx512", "c"):
        mod = IRModule({"main": Function(func.params, func.body)})
        outs.append(run_artifacts(build(mod, target), {"x": xs[0]})[0])
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-5)


def test_only_cpus_with_32_vector_registers_split():
    """AVX2 keeps one buffer: its 16 registers spilled accumulators of yolo's split tiles."""
    from ember.codegen.llvm.build import LLVMOptions
    from ember.target import Target

    for spec, split in [
        ("llvm -mcpu=haswell", False),
        ("llvm -mcpu=skylake-avx512 -mattr=-avx512f", False),
        ("llvm -mcpu=skylake-avx512", True),
        ("llvmjit -mcpu=znver4", True),
    ]:
        assert LLVMOptions(Target.create(spec)).codegen.split_branch_allocs is split
