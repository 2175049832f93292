"""``memory_map.json``: where every intermediate of an AOT build lives in its workspace.

::

    {"version": 1, "workspace_size_bytes": 8192, "lower_bound_bytes": 8192,
     "alignment": 64, "algorithm": "greedy_by_size",
     "buffers": [{"entry": 3, "node": "ember_fused_conv_relu", "offset": 0,
                  "size": 4096, "first_step": 0, "last_step": 1}, ...]}

Steps count the run function's kernel calls, in order. Written deterministically (sorted
keys); read with validation (``SerializationError``), bounded in size.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ember.errors import SerializationError

MEMORY_MAP_VERSION = 1
MEMORY_MAP_FILE = "memory_map.json"
MAX_MEMORY_MAP_BYTES = 64 << 20
_INT_FIELDS = ("entry", "offset", "size", "first_step", "last_step")


@dataclass(frozen=True)
class BufferPlacement:
    """One intermediate: its graph entry, writing node, offset, size and live steps."""

    entry: int
    node: str
    offset: int
    size: int
    first_step: int
    last_step: int


@dataclass(frozen=True)
class MemoryMap:
    """The placement of every intermediate in one workspace."""

    workspace_size_bytes: int
    lower_bound_bytes: int
    alignment: int
    algorithm: str
    buffers: tuple[BufferPlacement, ...]
    version: int = MEMORY_MAP_VERSION

    def to_json(self) -> str:
        """Deterministic JSON text."""
        obj = {
            "version": self.version,
            "workspace_size_bytes": self.workspace_size_bytes,
            "lower_bound_bytes": self.lower_bound_bytes,
            "alignment": self.alignment,
            "algorithm": self.algorithm,
            "buffers": [b.__dict__ for b in self.buffers],
        }
        return json.dumps(obj, indent=1, sort_keys=True) + "\n"

    @staticmethod
    def from_json(text: str | bytes) -> MemoryMap:
        """Read and validate a memory map."""
        if len(text) > MAX_MEMORY_MAP_BYTES:
            raise SerializationError(f"memory map of {len(text)} bytes is over the limit")
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError) as err:
            raise SerializationError(f"memory map is not valid JSON: {err}") from None
        if not isinstance(obj, dict):
            raise SerializationError("memory map: expected a JSON object")
        if obj.get("version") != MEMORY_MAP_VERSION:
            raise SerializationError(
                f"memory map version {obj.get('version')!r}; this ember reads version "
                f"{MEMORY_MAP_VERSION}"
            )
        head = [_int(obj, k, "memory map") for k in ("workspace_size_bytes", "lower_bound_bytes")]
        alignment = _int(obj, "alignment", "memory map")
        algorithm = obj.get("algorithm")
        rows = obj.get("buffers")
        if not isinstance(algorithm, str) or not isinstance(rows, list):
            raise SerializationError("memory map: 'algorithm' must be text, 'buffers' a list")
        buffers = []
        for i, row in enumerate(rows):
            where = f"memory map buffers[{i}]"
            if not isinstance(row, dict) or not isinstance(row.get("node"), str):
                raise SerializationError(f"{where}: expected an object with a 'node' name")
            ints = [_int(row, k, where) for k in _INT_FIELDS]
            buffers.append(BufferPlacement(ints[0], row["node"], *ints[1:]))
        return MemoryMap(head[0], head[1], alignment, algorithm, tuple(buffers))

    def table(self) -> str:
        """A text table: one line per buffer, offset order."""
        lines = [
            f"workspace {self.workspace_size_bytes} bytes (lower bound "
            f"{self.lower_bound_bytes}, {self.algorithm}, alignment {self.alignment})",
            f"  {'offset':>10} {'size':>10}  steps      node (entry)",
        ]
        for b in self.buffers:
            steps = f"{b.first_step}-{b.last_step}"
            lines.append(f"  {b.offset:>10} {b.size:>10}  {steps:<10} {b.node} (e{b.entry})")
        return "\n".join(lines) + "\n"


def _int(obj: dict[str, Any], key: str, where: str) -> int:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 62:
        raise SerializationError(f"{where}: {key!r} must be a non-negative integer")
    return value
