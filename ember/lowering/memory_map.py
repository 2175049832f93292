"""The memory map of an AOT build (``ember.formats.memory_map``), from its program."""

from __future__ import annotations

from ember.formats.memory_map import BufferPlacement, MemoryMap
from ember.lowering.aot import AotProgram


def memory_map(aot: AotProgram) -> MemoryMap:
    """Every workspace buffer of ``aot``: offset, size, live steps and the node writing it
    (a kernel's scratch is listed as ``<node> scratch`` with the node's id as entry)."""
    graph = aot.graph
    owner = {}
    for nid, node in enumerate(graph.nodes):
        for eid in range(graph.node_row_ptr[nid], graph.node_row_ptr[nid + 1]):
            owner[eid] = node.name
    rows = []
    for iv in sorted(aot.intervals, key=lambda b: (aot.memory.offset(b.name), b.start, b.name)):
        number = int(iv.name[1:])
        writer = owner[number] if iv.name.startswith("e") else graph.nodes[number].name + " scratch"
        offset = aot.memory.offset(iv.name)
        rows.append(BufferPlacement(number, writer, offset, iv.size, iv.start, iv.end))
    mem = aot.memory
    return MemoryMap(mem.size, mem.lower_bound, mem.alignment, mem.algorithm, tuple(rows))
