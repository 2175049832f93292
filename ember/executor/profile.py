"""Per-node profiles of a graph run: the debug executor's table (name, op, time, percent, shape).

Each row also names what its kernel computes in the source model: the ONNX nodes fused
into it and their op types (recorded in the graph JSON at compile time). A report exports
as plain JSON (:meth:`ProfileReport.to_json`) and as a Chrome/Perfetto trace
(:meth:`ProfileReport.chrome_trace`, the Trace Event Format: one complete ``"X"`` event
per kernel call of one mean run, times in microseconds). Example::

    report = executor.profile(repeat=20)
    print(report)                       # a fixed-width table, slowest nodes first
    print(report.op_type_table())       # totals per ONNX op type
    report.rows[0].name, report.total_us
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ProfileRow:
    """One kernel call: node name, kernel name, mean time, share of the total, output shape."""

    node_id: int
    name: str
    op: str
    time_us: float
    percent: float
    shape: tuple[tuple[int, ...], ...]
    dtype: str
    onnx_nodes: tuple[str, ...] = ()
    op_types: tuple[str, ...] = ()

    @property
    def op_type(self) -> str:
        """The source op types fused into this kernel, ``Conv+Relu`` (else the kernel name)."""
        return "+".join(dict.fromkeys(self.op_types)) or self.op

    def as_dict(self) -> dict[str, object]:
        """The row as plain data (for JSON or pandas)."""
        return {
            "node_id": self.node_id,
            "name": self.name,
            "op": self.op,
            "time_us": self.time_us,
            "percent": self.percent,
            "shape": [list(s) for s in self.shape],
            "dtype": self.dtype,
            "onnx_nodes": list(self.onnx_nodes),
            "op_types": list(self.op_types),
        }


@dataclass(frozen=True)
class ProfileReport:
    """The per-node profile of ``repeat`` runs (times are means over the runs)."""

    rows: tuple[ProfileRow, ...]
    repeat: int

    @property
    def total_us(self) -> float:
        """Sum of the mean node times in microseconds."""
        return sum(r.time_us for r in self.rows)

    def sorted(self) -> list[ProfileRow]:
        """Rows from slowest to fastest (ties keep graph order)."""
        return sorted(self.rows, key=lambda r: (-r.time_us, r.node_id))

    def by_op(self) -> list[tuple[str, int, float, float]]:
        """Per kernel: (op, calls, total mean time in us, percent), slowest first."""
        return self._totals(lambda r: r.op)

    def by_op_type(self) -> list[tuple[str, int, float, float]]:
        """Per source op type (``Conv+Relu`` for a fused kernel): (op type, kernel calls,
        total mean time in us, percent), slowest first."""
        return self._totals(lambda r: r.op_type)

    def _totals(self, key: Callable[[ProfileRow], str]) -> list[tuple[str, int, float, float]]:
        totals: dict[str, tuple[int, float]] = {}
        for r in self.rows:
            count, us = totals.get(key(r), (0, 0.0))
            totals[key(r)] = (count + 1, us + r.time_us)
        whole = self.total_us or 1.0
        out = [(op, n, us, 100.0 * us / whole) for op, (n, us) in totals.items()]
        return sorted(out, key=lambda item: (-item[2], item[0]))

    def table(self, sort: bool = True) -> str:
        """A fixed-width text table, slowest first unless ``sort`` is false."""
        rows = self.sorted() if sort else list(self.rows)
        header = ("Node", "Op", "Time(us)", "Percent", "Shape", "Dtype", "ONNX nodes")
        body = [
            (
                r.name,
                r.op,
                f"{r.time_us:.2f}",
                f"{r.percent:.1f}",
                ", ".join(str(list(s)) for s in r.shape),
                r.dtype,
                ", ".join(r.onnx_nodes),
            )
            for r in rows
        ]
        body.append(("Total", "", f"{self.total_us:.2f}", "100.0", "", "", ""))
        lines = _columns(header, body)
        lines.append(f"({self.repeat} run(s); node times are means)")
        return "\n".join(lines)

    def op_type_table(self) -> str:
        """Totals per source op type (:meth:`by_op_type`) as a fixed-width table."""
        body = [(op, str(n), f"{us:.2f}", f"{pct:.1f}") for op, n, us, pct in self.by_op_type()]
        return "\n".join(_columns(("Op type", "Kernels", "Time(us)", "Percent"), body))

    def to_json_obj(self) -> dict[str, Any]:
        """The whole report as plain data: rows in graph order, per-op-type and per-kernel
        totals."""
        return {
            "repeat": self.repeat,
            "total_us": self.total_us,
            "rows": [r.as_dict() for r in self.rows],
            "by_op_type": [
                {"op_type": op, "kernels": n, "time_us": us, "percent": pct}
                for op, n, us, pct in self.by_op_type()
            ],
            "by_kernel": [
                {"op": op, "calls": n, "time_us": us, "percent": pct}
                for op, n, us, pct in self.by_op()
            ],
        }

    def to_json(self) -> str:
        """:meth:`to_json_obj` as deterministic JSON text."""
        return json.dumps(self.to_json_obj(), indent=2, sort_keys=True) + "\n"

    def chrome_trace(self) -> dict[str, Any]:
        """The Trace Event Format (chrome://tracing, ui.perfetto.dev): one complete event
        (``"ph": "X"``, ``ts``/``dur`` in microseconds) per kernel call, laid end to end in
        graph order over one mean run."""
        events: list[dict[str, Any]] = [
            {"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": "ember"}},
            {"name": "thread_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": "graph"}},
        ]
        ts = 0.0
        for r in self.rows:
            # rounded boundaries, so that each event ends exactly where the next starts
            start, end = round(ts, 3), round(ts + r.time_us, 3)
            events.append(
                {
                    "name": r.name,
                    "cat": r.op_type,
                    "ph": "X",
                    "ts": start,
                    "dur": round(end - start, 3),
                    "pid": 0,
                    "tid": 0,
                    "args": {
                        "kernel": r.op,
                        "onnx_nodes": list(r.onnx_nodes),
                        "op_types": list(r.op_types),
                        "shape": [list(s) for s in r.shape],
                        "dtype": r.dtype,
                    },
                }
            )
            ts += r.time_us
        return {
            "traceEvents": events,
            "displayTimeUnit": "ms",
            "otherData": {"repeat": self.repeat, "note": "node times are means over the runs"},
        }

    def __str__(self) -> str:
        return self.table()


def _columns(header: tuple[str, ...], body: Sequence[tuple[str, ...]]) -> list[str]:
    """Left-aligned columns under a header and a dashed rule, trailing blanks stripped."""
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
    lines = [
        "  ".join(f"{cell:<{w}}" for cell, w in zip(line, widths, strict=True)).rstrip()
        for line in [header, *body]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def node_sources(extra: Sequence[tuple[str, str]]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A kernel node's (ONNX node names, op types) from its graph JSON string attributes
    (``onnx_nodes``/``onnx_op_types``, JSON lists); empty when the build recorded none."""
    found = dict(extra)
    out: list[tuple[str, ...]] = []
    for key in ("onnx_nodes", "onnx_op_types"):
        try:
            value = json.loads(found.get(key, "[]"))
        except ValueError:
            value = []
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        out.append(tuple(value) if ok else ())
    return out[0], out[1]


def make_report(
    node_ids: Sequence[int],
    names: Sequence[str],
    ops: Sequence[str],
    shapes: Sequence[tuple[tuple[int, ...], ...]],
    dtypes: Sequence[str],
    totals_ns: Sequence[int],
    repeat: int,
    sources: Sequence[tuple[tuple[str, ...], tuple[str, ...]]] | None = None,
) -> ProfileReport:
    """Build a report from per-call accumulated nanoseconds over ``repeat`` runs;
    ``sources`` gives each call's (ONNX node names, op types)."""
    runs = max(repeat, 1)
    means_us = [t / runs / 1000.0 for t in totals_ns]
    total = sum(means_us) or 1.0
    src = list(sources) if sources is not None else [((), ())] * len(means_us)
    rows = tuple(
        ProfileRow(nid, name, op, us, 100.0 * us / total, shape, dtype, nodes, types)
        for nid, name, op, us, shape, dtype, (nodes, types) in zip(
            node_ids, names, ops, means_us, shapes, dtypes, src, strict=True
        )
    )
    return ProfileReport(rows, repeat)
