"""Graph memory: graph JSON -> where each entry and each kernel's scratch lives.

Derived from the graph alone, so that a graph executor computes its own placement when it
loads a graph and trusts no offset written in a file (graph.json is data a user can edit):

- **liveness**: nodes run in graph order; a kernel node is one *step*; an entry is live from
  the step of the node that writes it to the last step that reads it (``graph_buffers``);
  a node's scratch (its ``scratch_bytes`` attribute) is live for its own step;
- **storages kept apart**: a storage id used by a model input, a parameter or a graph
  output keeps a buffer of its own, sized by its largest entry (``storage_sizes``), so
  that ``set_input_zero_copy``, shared parameters and ``get_output`` views behave as with
  TVM's one-buffer-per-storage-id plan;
- **the workspace**: every other entry and every scratch is placed in ONE buffer by the
  static planner (:func:`ember.support.memory_plan.plan_memory`, the AOT build's): the same
  buffers in the same order as the AOT build of the same model, hence the same offsets.

Storage ids keep TVM's meaning: entries sharing one share memory. Within a storage id,
entries live at a common step (an in-place kernel writes its output at the step that last
reads its input; a ``__nop`` output aliases its input) form one group placed at one
offset, sized by its largest entry; groups of one storage id that are
never live together may be placed apart (nothing can observe the difference). Graphs that
ember builds give one entry per group.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ember.formats.dtypes import numpy_dtype
from ember.formats.graph_json import OP_NULL, SCRATCH_ATTR, GraphJSON
from ember.support.memory_plan import DEFAULT_ALIGNMENT, Buffer, MemoryPlan, align_up, plan_memory


def entry_nbytes(graph: GraphJSON, eid: int) -> int:
    """Bytes of entry ``eid`` (its shape times its dtype's size)."""
    count = int(np.prod(graph.shape[eid], dtype=np.int64))
    return count * numpy_dtype(graph.dltype[eid]).itemsize


def kernel_steps(graph: GraphJSON) -> dict[int, int]:
    """Node id -> step, for every kernel node (null nodes run nothing)."""
    steps: dict[int, int] = {}
    for nid, node in enumerate(graph.nodes):
        if node.op != OP_NULL:
            steps[nid] = len(steps)
    return steps


def graph_buffers(graph: GraphJSON) -> list[Buffer]:
    """The intermediate values of ``graph`` as buffers named ``e<entry id>``: written by a
    kernel, live until their last reader; model inputs, parameters and graph outputs are
    not planned (the caller owns them). Steps count kernel nodes in graph order."""
    step_of = kernel_steps(graph)
    pinned = set(graph.output_entry_ids())
    last_read: dict[int, int] = {}
    for nid, node in enumerate(graph.nodes):
        for e in node.inputs:
            eid = graph.entry_id(e)
            last_read[eid] = max(last_read.get(eid, -1), step_of.get(nid, -1))
    buffers = []
    for nid, step in step_of.items():
        for eid in range(graph.node_row_ptr[nid], graph.node_row_ptr[nid + 1]):
            if eid in pinned:
                continue
            size = entry_nbytes(graph, eid)
            buffers.append(Buffer(f"e{eid}", size, step, max(step, last_read.get(eid, step))))
    return buffers


def node_scratch(graph: GraphJSON) -> dict[int, int]:
    """Node id -> the scratch bytes its kernel takes (nodes with a ``scratch_bytes``
    attribute above zero; ``load_graph_json`` bounds it)."""
    sizes: dict[int, int] = {}
    for nid, node in enumerate(graph.nodes):
        if node.op != OP_NULL and node.attrs is not None:
            nbytes = int(dict(node.attrs.extra).get(SCRATCH_ATTR, 0))
            if nbytes > 0:
                sizes[nid] = nbytes
    return sizes


def storage_sizes(graph: GraphJSON, alignment: int = DEFAULT_ALIGNMENT) -> dict[int, int]:
    """Bytes of each storage id: the largest entry using it, rounded up to ``alignment``."""
    sizes: dict[int, int] = {}
    for eid, sid in enumerate(graph.storage_id):
        sizes[sid] = max(sizes.get(sid, 0), align_up(entry_nbytes(graph, eid), alignment))
    return dict(sorted(sizes.items()))


def scratch_size(graph: GraphJSON) -> int:
    """The largest ``scratch_bytes`` of the graph's nodes (0 without any)."""
    return max(node_scratch(graph).values(), default=0)


def kept_storages(graph: GraphJSON) -> set[int]:
    """The storage ids kept apart from the workspace: those of model inputs, parameters and
    graph outputs (every entry sharing one of them lives there too)."""
    kept = {graph.storage_id[graph.node_row_ptr[nid]] for nid in graph.arg_nodes}
    return kept | {graph.storage_id[eid] for eid in graph.output_entry_ids()}


@dataclass(frozen=True)
class GraphMemory:
    """Where a graph's memory lives: ``plan`` places the workspace (``plan.size`` bytes);
    ``entry_offsets`` gives each workspace entry's offset, ``scratch`` each kernel node's
    ``(offset, bytes)`` of scratch in it; ``storages`` the bytes of each storage id kept
    apart (inputs, parameters, outputs and the entries sharing their storage)."""

    plan: MemoryPlan
    entry_offsets: Mapping[int, int]
    scratch: Mapping[int, tuple[int, int]]
    storages: Mapping[int, int]

    @property
    def workspace_size(self) -> int:
        """Bytes of the workspace."""
        return self.plan.size


def _storage_groups(graph: GraphJSON, buffers: list[Buffer]) -> tuple[list[Buffer], dict[str, str]]:
    """Merge the buffers of one storage id that are live at a common step into one buffer
    named after its first member; returns the buffers in their order and the aliases
    (member name -> group name)."""
    by_sid: dict[int, list[Buffer]] = {}
    for b in buffers:
        by_sid.setdefault(graph.storage_id[int(b.name[1:])], []).append(b)
    aliases: dict[str, str] = {}
    merged: dict[str, Buffer] = {}
    for members in by_sid.values():
        group: Buffer | None = None
        for b in sorted(members, key=lambda m: (m.start, int(m.name[1:]))):
            if group is not None and b.start <= group.end:
                aliases[b.name] = group.name
                size = max(group.size, b.size)
                group = Buffer(group.name, size, group.start, max(group.end, b.end))
            else:
                group = b
            merged[group.name] = group
    return [merged[b.name] for b in buffers if b.name in merged], aliases


def plan_graph_memory(graph: GraphJSON, alignment: int = DEFAULT_ALIGNMENT) -> GraphMemory:
    """The placement of ``graph``'s memory (see the module docstring)."""
    kept = kept_storages(graph)
    entries = [b for b in graph_buffers(graph) if graph.storage_id[int(b.name[1:])] not in kept]
    groups, aliases = _storage_groups(graph, entries)
    step_of = kernel_steps(graph)
    scratch = node_scratch(graph)
    buffers = [
        *groups,
        *(Buffer(f"s{nid}", n, step_of[nid], step_of[nid]) for nid, n in scratch.items()),
    ]
    plan = plan_memory(buffers, alignment=alignment)
    offsets = {int(b.name[1:]): plan.offsets[aliases.get(b.name, b.name)] for b in entries}
    sizes = storage_sizes(graph, alignment)
    return GraphMemory(
        plan,
        offsets,
        {nid: (plan.offsets[f"s{nid}"], n) for nid, n in scratch.items()},
        {sid: sizes[sid] for sid in sorted(kept)},
    )
