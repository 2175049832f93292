"""Per-node profiles of a graph run: the debug executor's table (name, op, time, percent, shape).

Example::

    report = executor.profile(repeat=20)
    print(report)                       # a fixed-width table, slowest nodes first
    report.rows[0].name, report.total_us
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


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
        totals: dict[str, tuple[int, float]] = {}
        for r in self.rows:
            count, us = totals.get(r.op, (0, 0.0))
            totals[r.op] = (count + 1, us + r.time_us)
        whole = self.total_us or 1.0
        out = [(op, n, us, 100.0 * us / whole) for op, (n, us) in totals.items()]
        return sorted(out, key=lambda item: (-item[2], item[0]))

    def table(self, sort: bool = True) -> str:
        """A fixed-width text table, slowest first unless ``sort`` is false."""
        rows = self.sorted() if sort else list(self.rows)
        header = ("Node", "Op", "Time(us)", "Percent", "Shape", "Dtype")
        body = [
            (
                r.name,
                r.op,
                f"{r.time_us:.2f}",
                f"{r.percent:.1f}",
                ", ".join(str(list(s)) for s in r.shape),
                r.dtype,
            )
            for r in rows
        ]
        body.append(("Total", "", f"{self.total_us:.2f}", "100.0", "", ""))
        widths = [max(len(str(line[i])) for line in [header, *body]) for i in range(6)]
        lines = [
            "  ".join(f"{cell:<{w}}" for cell, w in zip(line, widths, strict=True))
            for line in [header, *body]
        ]
        lines.insert(1, "  ".join("-" * w for w in widths))
        lines.append(f"({self.repeat} run(s); node times are means)")
        return "\n".join(line.rstrip() for line in lines)

    def __str__(self) -> str:
        return self.table()


def make_report(
    node_ids: Sequence[int],
    names: Sequence[str],
    ops: Sequence[str],
    shapes: Sequence[tuple[tuple[int, ...], ...]],
    dtypes: Sequence[str],
    totals_ns: Sequence[int],
    repeat: int,
) -> ProfileReport:
    """Build a report from per-call accumulated nanoseconds over ``repeat`` runs."""
    runs = max(repeat, 1)
    means_us = [t / runs / 1000.0 for t in totals_ns]
    total = sum(means_us) or 1.0
    rows = tuple(
        ProfileRow(nid, name, op, us, 100.0 * us / total, shape, dtype)
        for nid, name, op, us, shape, dtype in zip(
            node_ids, names, ops, means_us, shapes, dtypes, strict=True
        )
    )
    return ProfileReport(rows, repeat)
