"""interleave_loops (ember.tir.transform.interleave_loops): a vectorized loop reading its
variable as ``i % g`` becomes ``n / g`` iterations of g copies, each reading one source;
channel shuffles lowered from the graph compute the same values."""

from __future__ import annotations

import numpy as np
import pytest

from ember import tir
from ember.ir import Attrs, Function, TensorType, Var, call, evaluate
from ember.lowering.lower_group import lower_group
from ember.tir.buffer import decl_buffer
from ember.tir.expr import FloorDiv, FloorMod, IntImm
from ember.tir.expr import Var as TVar
from ember.tir.stmt import BufferStore, For, ForKind, PrimFunc
from ember.tir.transform.interleave_loops import MAX_INTERLEAVE, interleave_loops


def _loop(extent: int, g: int, kind: ForKind = ForKind.VECTORIZED) -> PrimFunc:
    """out[i] = a[(i % g) * (n / g) + i / g] over i in [0, extent): a transpose of g rows."""
    a = decl_buffer((extent,), "float32", "a")
    out = decl_buffer((extent,), "float32", "out")
    i = TVar("i", "int32")
    c = IntImm("int32", g)
    index = FloorMod(i, c) * IntImm("int32", extent // g) + FloorDiv(i, c)
    body = BufferStore(out, a[index], (i,))
    return PrimFunc("f", (a, out), For(i, IntImm("int32", 0), IntImm("int32", extent), kind, body))


def _run(func: PrimFunc, extent: int) -> np.ndarray:
    a = np.arange(extent, dtype=np.float32)
    out = np.zeros(extent, np.float32)
    tir.interpret(func, [a, out])
    return out


def test_interleaved_loop_becomes_copies_reading_one_source_each() -> None:
    func = _loop(12, 4)
    new = interleave_loops(func)
    loop = new.body
    assert isinstance(loop, For) and loop.kind is ForKind.VECTORIZED
    assert int(loop.extent.value) == 3 and len(loop.body.seq) == 4
    text = str(new)
    assert "%" not in text and "//" not in text  # folded: copy l reads a[l * 3 + o]
    np.testing.assert_array_equal(_run(new, 12), _run(func, 12))


@pytest.mark.parametrize(
    ("extent", "g", "kind"),
    [
        (12, 5, ForKind.VECTORIZED),  # 5 does not divide 12
        (4, 4, ForKind.VECTORIZED),  # one group of g: nothing to gain
        (40, MAX_INTERLEAVE + 2, ForKind.VECTORIZED),  # too many copies
        (12, 4, ForKind.SERIAL),  # not vectorized
    ],
)
def test_other_loops_are_left_alone(extent: int, g: int, kind: ForKind) -> None:
    func = _loop(extent, g, kind)
    assert interleave_loops(func) is func


@pytest.mark.parametrize(("groups", "per"), [(4, 68), (3, 20), (8, 16)])
def test_channel_shuffle_groups_lower_interleaved_and_exact(groups: int, per: int) -> None:
    """ShuffleNet's shuffle of a concatenation, NHWC: the group's loop over the channels
    is interleaved and computes the graph's values."""
    parts = [Var(f"p{g}", TensorType((1, 3, 5, per), "float32")) for g in range(groups)]
    cat = call("concatenate", *parts, axis=3)
    y = call("reshape", cat, newshape=(1, 3, 5, groups, per))
    y = call("transpose", y, axes=(0, 1, 2, 4, 3))
    y = call("reshape", y, newshape=(1, 3, 5, groups * per))
    func = Function(tuple(parts), y, Attrs({"Primitive": 1}))
    prim = lower_group(func, "kernel")
    assert f"i3_o in vectorized({per})" in str(prim)
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((1, 3, 5, per)).astype(np.float32) for _ in parts]
    want = evaluate(Function(func.params, func.body), xs)[0]
    out = np.zeros(want.shape, np.float32)
    tir.interpret(prim, [*xs, out])
    np.testing.assert_array_equal(out, want)


def test_runs_of_sixteen_or_more_become_blocks_of_a_vectorized_loop() -> None:
    """``i % 64`` over 384 (attention heads merged back): six serial blocks of a vectorized
    64, each a contiguous run; the same values."""
    func = _loop(384, 64)
    new = interleave_loops(func)
    outer = new.body
    assert isinstance(outer, For) and outer.kind == ForKind.SERIAL and outer.extent.value == 6
    inner = outer.body
    assert isinstance(inner, For) and inner.kind == ForKind.VECTORIZED and inner.extent.value == 64
    assert "%" not in str(new) and "//" not in str(new)
    np.testing.assert_array_equal(_run(new, 384), _run(func, 384))


def test_heads_merged_back_read_contiguous_runs() -> None:
    x = Var("x", TensorType((1, 6, 15, 64), "float32"))
    body = call("reshape", call("transpose", x, axes=(0, 2, 1, 3)), newshape=(1, 15, 384))
    prim = lower_group(Function((x,), body, Attrs({"Primitive": 1})), "k")
    assert "p0[0, i2_b, i0_i1_fused, i2_l]" in str(prim), prim
    data = np.random.default_rng(0).standard_normal((1, 6, 15, 64)).astype(np.float32)
    out = np.zeros((1, 15, 384), np.float32)
    tir.interpret(prim, [data, out])
    np.testing.assert_array_equal(out, evaluate(Function((x,), body), [data])[0])
