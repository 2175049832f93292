"""The table of benchmarks/models.py: one row per model, ratios, geometric means.

Times are seconds; a :class:`Row` holds every engine's :class:`Timing` from one
interleaved run and prints itself (``cells``) next to the :func:`header`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bench_common import markdown_table
from bench_host import FmaLimit


@dataclass(frozen=True)
class Timing:
    """Median wall time and median thread CPU time of one engine's runs (seconds)."""

    wall: float
    cpu: float


@dataclass(frozen=True)
class TargetTimes:
    """A further target's build, load and 1-thread graph-executor latency (seconds)."""

    target: str
    build_s: float
    load_s: float
    ember_s: float
    first_s: float = 0.0  # the first target's latency timed with it (0: use the main run's)

    def cells(self, first_s: float) -> list[str]:
        """Its printed cells: build, load, latency and latency over the first target's."""
        first = self.first_s if self.first_s > 0 else first_s
        return [
            f"{self.build_s:.2f}",
            f"{self.load_s:.2f}",
            f"{self.ember_s * 1e3:.3f}",
            f"{self.ember_s / first:.2f}",
        ]


def target_header(first: str, target: str) -> list[str]:
    """The header cells of a further target's columns (see TargetTimes.cells)."""
    return [f"{target} build s", f"{target} cc+load s", f"{target} ms", f"{target}/{first}"]


@dataclass(frozen=True)
class Row:
    """One model's measurements: ``times`` maps (engine, threads) to its Timing, engines
    being ``graph``, ``aot``, ``aotc`` (the AOT run function timed from C; absent when it
    has no C entry) and ``ort``; ``threads`` is the multi-threaded count."""

    name: str
    build_s: float
    load_s: float
    times: dict[tuple[str, int], Timing]
    threads: int
    cpu_clock: bool
    max_err: float
    gflop: float
    others: tuple[TargetTimes, ...] = ()
    #: what the run governor used at ``threads`` after the rounds, graph/AOT executor:
    #: "pool" or "alone" each ("-": not governed, e.g. a policy without it)
    choices: str = "-"

    def seconds(self, engine: str, threads: int) -> float:
        """The reported time: thread CPU time for 1 thread under --cpu-clock, else wall."""
        t = self.times[(engine, threads)]
        return t.cpu if threads == 1 and self.cpu_clock else t.wall

    def ember(self, threads: int, wall: bool = False) -> float:
        """ember's best executor (graph or AOT) at ``threads``."""
        if wall:
            return min(self.times[(e, threads)].wall for e in ("graph", "aot"))
        return min(self.seconds(e, threads) for e in ("graph", "aot"))

    def from_c(self, threads: int) -> str:
        """The AOT run timed from C, in ms ("-" when it was not timed)."""
        if ("aotc", threads) not in self.times:
            return "-"
        return f"{self.seconds('aotc', threads) * 1e3:.3f}"

    def overhead(self, engine: str) -> str:
        """``engine``'s 1-thread time minus the AOT run timed from C, in us: what the
        executor adds to the kernels ("-" without a time from C)."""
        if ("aotc", 1) not in self.times:
            return "-"
        return f"{(self.seconds(engine, 1) - self.seconds('aotc', 1)) * 1e6:.1f}"

    def speedup(self, threads: int) -> float:
        """onnxruntime time / ember's best time (above 1: ember is faster)."""
        return self.seconds("ort", threads) / self.ember(threads)

    def spin_speedup(self) -> float:
        """Spinning onnxruntime's time / ember's AOT time, at ``threads``, from their own
        pass (models.py's _spinning_pass)."""
        n = self.threads
        return self.seconds("orts", n) / self.seconds("aots", n)

    def spinning(self) -> list[str]:
        """The cells of the spinning pass (ember, onnxruntime, ratio), "-" if not run."""
        n = self.threads
        if ("orts", n) not in self.times:
            return ["-", "-", "-"]
        ms = [f"{self.seconds(e, n) * 1e3:.3f}" for e in ("aots", "orts")]
        return [*ms, f"{self.spin_speedup():.2f}"]

    def noise_ratio(self) -> float:
        """ember's best wall time at ``threads`` threads over its best at 1 thread."""
        return self.ember(self.threads, wall=True) / self.ember(1, wall=True)

    def fma_percent(self, seconds: float, cores: int, limit: FmaLimit) -> float:
        """GFLOP/s as a percentage of ``cores`` x one core's FMA limit."""
        return 100.0 * self.gflop / seconds / (cores * limit.gflops)

    def cells(self, limit: FmaLimit, noisy: bool) -> list[str]:
        """The printed cells of this row."""
        n = self.threads
        cores = min(n, os.cpu_count() or 1)
        ms = [f"{self.seconds(e, t) * 1e3:.3f}" for t in (1, n) for e in ("graph", "aot", "ort")]
        extra = [c for t in self.others for c in t.cells(self.seconds("graph", 1))]
        return [
            self.name,
            f"{self.build_s:.2f}",
            f"{self.load_s:.2f}",
            *ms[:2],
            self.from_c(1),
            self.overhead("graph"),
            self.overhead("aot"),
            ms[2],
            f"{self.speedup(1):.2f}",
            *ms[3:5],
            self.from_c(n),
            ms[5],
            f"{self.speedup(n):.2f}",
            self.choices,
            *self.spinning(),
            f"{self.gflop:.3g}",
            f"{self.fma_percent(self.ember(1), 1, limit):.0f}",
            f"{self.fma_percent(self.seconds('ort', 1), 1, limit):.0f}",
            f"{self.fma_percent(self.ember(n), cores, limit):.0f}",
            f"{self.max_err:.1e}",
            *([f"{self.noise_ratio():.2f}"] if noisy else []),
            *extra,
        ]


def header(threads: int, noisy: bool, targets: Sequence[str] = ("c",)) -> list[str]:
    """The table's header for ``threads`` (the multi-threaded count)."""
    n = threads
    cells = ["model", "build s", "cc+load s", "graph1 ms", "aot1 ms", "aotC1 ms"]
    cells += ["graph1 ovh us", "aot1 ovh us", "ort1 ms", "ort1/ember1"]
    cells += [f"graph{n} ms", f"aot{n} ms", f"aotC{n} ms", f"ort{n} ms", f"ort{n}/ember{n}"]
    cells += [f"ember{n} used (graph/aot)"]
    cells += [f"aot{n} (spin pass) ms", f"ort{n}spin ms", f"ort{n}spin/aot{n}"]
    cells += ["GFLOP"]
    cells += ["ember1 %FMA", "ort1 %FMA", f"ember{n} %FMA", "max abs err"]
    cells += [f"noisy ember{n}/ember1"] if noisy else []
    return cells + [c for t in targets[1:] for c in target_header(targets[0], t)]


def format_table(
    rows: Sequence[Row], limit: FmaLimit, noisy: bool = False, targets: Sequence[str] = ("c",)
) -> str:
    """A markdown table of ``rows`` (so that docs/performance.md can take it verbatim)."""
    threads = rows[0].threads if rows else 2
    cells = [r.cells(limit, noisy) for r in rows]
    return markdown_table(header(threads, noisy, targets), cells)


def geomean(values: Sequence[float]) -> float:
    """The geometric mean of positive ``values``."""
    return math.exp(sum(math.log(v) for v in values) / len(values))


def summary(rows: Sequence[Row], noisy: bool) -> str:
    """Geometric means over ``rows`` of the speedups (and of the noise ratio), with the
    extreme model of each."""
    if not rows:
        return ""
    n = rows[0].threads
    spun = [r for r in rows if ("orts", n) in r.times]
    lines = []
    ratios: tuple[tuple[str, Callable[[Row], float], Sequence[Row]], ...] = (
        ("ort1/ember1", lambda r: r.speedup(1), rows),
        (f"ort{n}/ember{n}", lambda r: r.speedup(n), rows),
        (f"ort{n}spin/aot{n} (onnxruntime's spinning default)", Row.spin_speedup, spun),
    )
    for label, value, measured in ratios:
        if not measured:
            continue
        worst = min(measured, key=value)
        lines.append(
            f"{label}: geomean {geomean([value(r) for r in measured]):.2f} over "
            f"{len(measured)} models, lowest {value(worst):.2f} ({worst.name})"
        )
    if noisy:
        worst = max(rows, key=Row.noise_ratio)
        mean = geomean([r.noise_ratio() for r in rows])
        lines.append(
            f"noisy ember{n}/ember1 (wall): geomean {mean:.2f}, "
            f"highest {worst.noise_ratio():.2f} ({worst.name})"
        )
    return "\n".join(lines)
