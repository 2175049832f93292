"""Stores of a choice between an element and its own old value, kept plain stores.

``buf[i] = max(buf[i], x)`` (a max pool's update, a ReLU in place) is ``select`` between
the loaded old value and ``x`` stored back to the same address. LLVM 22's DAG combiner
(``foldToMaskedStore``, llvm-project #145176) turns every such vector store into a masked
store that writes only the lanes that changed; on AVX2 that is ``vmaskmovps``, microcoded
on Zen 1-3 and a store-forwarding stall for the next tap's load (fixed upstream for those
CPUs by #214187, not in the LLVM llvmlite bundles). yolo's 5x5 max pool over 10x10x128
ran 11x c's time (0.23 vs 0.021 ms, where gcc emits ``vmaxps`` and a plain store).

Here the stored value of such a store is wrapped in ``freeze``: the combiner no longer sees
the select's load directly, and instruction selection still forms ``vmaxps``/``vminps``.
``freeze`` of a value that is not poison is that value, so results do not change.
"""

from __future__ import annotations

from ember.codegen.llvm.contract import contracted_update, reduction_update
from ember.codegen.llvm.expr import ExprLowering
from ember.codegen.llvm.ir_text import Val
from ember.tir.expr import BufferLoad, Max, Min, Select
from ember.tir.stmt import BufferStore


def selects_own_value(store: BufferStore) -> bool:
    """True when ``store`` writes a min, max or select one of whose operands is a load of
    the buffer it stores to (the masked-store pattern)."""
    value = store.value
    if isinstance(value, Min | Max):
        operands = (value.a, value.b)
    elif isinstance(value, Select):
        operands = (value.true_value, value.false_value)
    else:
        return False
    return any(isinstance(x, BufferLoad) and x.buffer is store.buffer for x in operands)


def stored_value(lower: ExprLowering, store: BufferStore) -> Val:
    """The value ``store`` writes (not a narrow float): a reduction update contracted, a
    choice against the element's own value frozen, else the expression."""
    fused = reduction_update(store)
    if fused:
        return contracted_update(lower, *fused)
    value = lower.expr(store.value)
    if selects_own_value(store):
        return lower.w.inst(value.ty, f"freeze {value.typed()}")
    return value


__all__ = ["selects_own_value", "stored_value"]
