"""The memory map of an AOT build: every workspace buffer's offset, size and live steps.

Written as ``memory_map.json`` next to the model's metadata (deterministic, sorted keys)
and printed by ``Lowered.as_text()``; the format::

    {"version": 1, "workspace_size_bytes": 8192, "lower_bound_bytes": 8192,
     "alignment": 64, "algorithm": "greedy_by_size",
     "buffers": [{"entry": 3, "node": "ember_fused_conv_relu", "offset": 0,
                  "size": 4096, "first_step": 0, "last_step": 1}, ...]}

Steps count kernel calls of the run function, in order.
"""

from __future__ import annotations

import json
from typing import Any

from ember.lowering.aot import AotProgram

MEMORY_MAP_VERSION = 1
MEMORY_MAP_FILE = "memory_map.json"


def memory_map(aot: AotProgram) -> dict[str, Any]:
    """The memory map as a JSON-ready object."""
    graph = aot.graph
    owner = {}
    for nid, node in enumerate(graph.nodes):
        for eid in range(graph.node_row_ptr[nid], graph.node_row_ptr[nid + 1]):
            owner[eid] = node.name
    rows = []
    for iv in sorted(aot.intervals, key=lambda b: (aot.memory.offset(b.name), b.start, b.name)):
        eid = int(iv.name[1:])
        rows.append(
            {
                "entry": eid,
                "node": owner[eid],
                "offset": aot.memory.offset(iv.name),
                "size": iv.size,
                "first_step": iv.start,
                "last_step": iv.end,
            }
        )
    return {
        "version": MEMORY_MAP_VERSION,
        "workspace_size_bytes": aot.memory.size,
        "lower_bound_bytes": aot.memory.lower_bound,
        "alignment": aot.memory.alignment,
        "algorithm": aot.memory.algorithm,
        "buffers": rows,
    }


def memory_map_json(aot: AotProgram) -> str:
    """The memory map as deterministic JSON text."""
    return json.dumps(memory_map(aot), indent=1, sort_keys=True) + "\n"


def memory_map_lines(aot: AotProgram) -> list[str]:
    """One line per buffer: offset, size, live steps and the node that writes it."""
    lines = [f"  {'offset':>10} {'size':>10}  steps      node (entry)"]
    for row in memory_map(aot)["buffers"]:
        steps = f"{row['first_step']}-{row['last_step']}"
        lines.append(
            f"  {row['offset']:>10} {row['size']:>10}  {steps:<10} {row['node']} (e{row['entry']})"
        )
    return lines
