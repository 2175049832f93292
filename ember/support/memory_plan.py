"""Static memory planning: buffers with live intervals -> byte offsets in one workspace.

The one placement algorithm of ember, shared by both executors: the AOT build plans its
workspace with it (``ember.lowering.aot``) and the graph executor places its entries with it
when it loads a graph (``ember.formats.graph_memory``). A pure algorithm over sizes and
intervals: it knows no graph, no IR and no runtime.

Every intermediate value of a planned graph is a :class:`Buffer` live from the step whose
kernel writes it to the last step that reads it (inclusive). Two buffers whose intervals
overlap may not overlap in memory; the planner places every buffer at an aligned offset of
one workspace and tries to keep the workspace small. The lower bound is the largest sum of
sizes live at any one step; :attr:`MemoryPlan.size` is what the placement reached.

Placement (after TVM's unified static memory planner): first fit in two orders, by size
(largest first) and by conflicts (most overlapping buffers first), keep the better; then a
seeded hill climb that swaps pairs of the order and keeps a swap that does not grow the
workspace. Deterministic: the same buffers give the same offsets.

Bounded work, since the graph executor plans graphs read from files: above
:data:`MAX_CONFLICTS` pairs of buffers live at a common step, the buffers are laid end to
end in their given order (algorithm ``"sequential"``, no overlap at all; the graph
executor's storage-id plan spent at least that); the hill climb stops after
:data:`CLIMB_WORK` units of first-fit work (a buffer or a conflict pair, once per round).
The zoo's largest graph (yolo) has 137 buffers and 581 pairs, far below either bound.

In-place reuse: ``merge_in_place`` joins a kernel's output with an input it may overwrite
(an elementwise kernel reading the value for the last time, same size): the two become one
buffer, placed once, so the output lands exactly on the input. Partial overlap is never
produced, so kernels need no aliasing care beyond reading an element before writing it.

Example::

    plan = plan_memory([Buffer("a", 4096, 0, 1), Buffer("b", 4096, 1, 2), Buffer("c", 64, 2, 2)])
    plan.offsets  # {'a': 4096, 'b': 0, 'c': 4096}; plan.size == 8192 == plan.lower_bound
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ember.errors import CompileError

#: the default alignment of every buffer's offset (and of the workspace), in bytes.
DEFAULT_ALIGNMENT = 64
#: hill-climb rounds; each tries one swap of two buffers in the placement order.
DEFAULT_CLIMB_STEPS = 300
#: conflict pairs above which placement is sequential: building the conflict lists and two
#: first fits of 1M pairs take about 1-2 s of Python here (a round costs ~75 ns per unit,
#: measured on resnet50's 300 rounds of 76 buffers + 144 pairs: 4.9 ms)
MAX_CONFLICTS = 1 << 20
#: first-fit units (buffers + pairs per round) the hill climb may spend in all: ~0.3 s;
#: 300 full rounds up to 14k units (yolo: 718)
CLIMB_WORK = 1 << 22


@dataclass(frozen=True)
class Buffer:
    """One value to place: a name, its size in bytes and its live steps ``[start, end]``."""

    name: str
    size: int
    start: int
    end: int

    def overlaps(self, other: Buffer) -> bool:
        """True when the two buffers are live at a common step."""
        return self.start <= other.end and other.start <= self.end


@dataclass(frozen=True)
class MemoryPlan:
    """Offsets of every buffer in one workspace of ``size`` bytes."""

    offsets: dict[str, int]
    size: int
    lower_bound: int
    alignment: int
    algorithm: str
    aliases: dict[str, str] = field(default_factory=dict)

    def offset(self, name: str) -> int:
        """The offset of ``name`` (a buffer merged in place has its partner's offset)."""
        return self.offsets[self.aliases.get(name, name)]


def align_up(value: int, alignment: int) -> int:
    """``value`` rounded up to a multiple of ``alignment``."""
    return (value + alignment - 1) // alignment * alignment


def lower_bound(buffers: Sequence[Buffer], alignment: int = 1) -> int:
    """The largest total (aligned) size of the buffers live at one step."""
    events: dict[int, int] = {}
    for b in buffers:
        size = align_up(b.size, alignment)
        events[b.start] = events.get(b.start, 0) + size
        events[b.end + 1] = events.get(b.end + 1, 0) - size
    best = live = 0
    for step in sorted(events):
        live += events[step]
        best = max(best, live)
    return best


def merge_in_place(
    buffers: Sequence[Buffer], pairs: Iterable[tuple[str, str]]
) -> tuple[list[Buffer], dict[str, str]]:
    """Join each (output, input) pair into one buffer; returns the buffers and the aliases
    (merged name -> the name it was placed under). A pair is legal only when the input's
    last read is the step that writes the output and both have the same size."""
    by_name = {b.name: b for b in buffers}
    root: dict[str, str] = {}

    def find(name: str) -> str:
        while name in root:
            name = root[name]
        return name

    merged = dict(by_name)
    for out, inp in pairs:
        a, b = find(out), find(inp)
        if a == b or a not in merged or b not in merged:
            continue
        ba, bb = merged[a], merged[b]
        if ba.size != bb.size or bb.end != ba.start:
            raise CompileError(
                f"in-place pair ({out}, {inp}) is not legal: sizes {ba.size}/{bb.size}, "
                f"input ends at step {bb.end}, output starts at step {ba.start}"
            )
        merged[b] = Buffer(b, bb.size, min(ba.start, bb.start), max(ba.end, bb.end))
        del merged[a]
        root[a] = b
    aliases = {name: find(name) for name in by_name if find(name) != name}
    return [merged[n] for n in sorted(merged, key=list(by_name).index)], aliases


def plan_memory(
    buffers: Sequence[Buffer],
    alignment: int = DEFAULT_ALIGNMENT,
    climb_steps: int = DEFAULT_CLIMB_STEPS,
    in_place: Iterable[tuple[str, str]] = (),
) -> MemoryPlan:
    """Place ``buffers`` in one workspace (see the module docstring)."""
    if alignment < 1 or alignment & (alignment - 1):
        raise CompileError(f"alignment must be a power of two, got {alignment}")
    names = [b.name for b in buffers]
    if len(set(names)) != len(names):
        raise CompileError("buffer names must be unique")
    for b in buffers:
        if b.size < 0 or b.end < b.start:
            raise CompileError(f"buffer {b.name}: bad size {b.size} or interval {b.start}-{b.end}")
    placed, aliases = merge_in_place(buffers, in_place)
    items = [Buffer(b.name, align_up(max(b.size, 1), alignment), b.start, b.end) for b in placed]
    bound = lower_bound(items)
    pairs = count_conflicts(items)
    if pairs > MAX_CONFLICTS:
        return _sequential(items, bound, alignment, aliases)
    conflicts = _conflicts(items)
    orders = {
        "greedy_by_size": sorted(
            range(len(items)), key=lambda i: (-items[i].size, items[i].start, i)
        ),
        "greedy_by_conflicts": sorted(
            range(len(items)), key=lambda i: (-len(conflicts[i]), -items[i].size, i)
        ),
    }
    results = {name: _first_fit(items, conflicts, order) for name, order in orders.items()}
    algorithm = min(results, key=lambda n: (results[n][1], n))
    best_order = orders[algorithm]
    offsets, size = results[algorithm]
    rng = random.Random(0)
    climbed = False
    rounds = min(climb_steps, CLIMB_WORK // (len(items) + pairs + 1))
    for _ in range(rounds if len(items) > 1 and size > bound else 0):
        i, j = rng.sample(range(len(items)), 2)
        order = list(best_order)
        order[i], order[j] = order[j], order[i]
        trial, trial_size = _first_fit(items, conflicts, order)
        if trial_size <= size:
            climbed = climbed or trial_size < size
            best_order, offsets, size = order, trial, trial_size
            if size == bound:
                break
    return MemoryPlan(
        {items[i].name: offsets[i] for i in range(len(items))},
        size,
        bound,
        alignment,
        algorithm + ("+hill_climb" if climbed else ""),
        aliases,
    )


def count_conflicts(buffers: Sequence[Buffer]) -> int:
    """The number of pairs of buffers live at a common step, without listing them."""
    ends = sorted(b.end for b in buffers)
    total = 0
    for position, b in enumerate(sorted(buffers, key=lambda b: b.start)):
        # the buffers before this one in start order, less those that ended before it starts
        total += position - bisect.bisect_left(ends, b.start)
    return total


def _sequential(
    items: Sequence[Buffer], bound: int, alignment: int, aliases: dict[str, str]
) -> MemoryPlan:
    """Every buffer after the previous one: valid whatever overlaps, linear work."""
    offsets: dict[str, int] = {}
    at = 0
    for b in items:
        offsets[b.name] = at
        at += b.size
    return MemoryPlan(offsets, at, bound, alignment, "sequential", aliases)


def _conflicts(items: Sequence[Buffer]) -> list[list[int]]:
    """For each buffer, the buffers live at a common step (a sweep over start steps)."""
    out: list[list[int]] = [[] for _ in items]
    order = sorted(range(len(items)), key=lambda i: items[i].start)
    active: list[int] = []
    for i in order:
        active = [j for j in active if items[j].end >= items[i].start]
        for j in active:
            out[i].append(j)
            out[j].append(i)
        active.append(i)
    return out


def _first_fit(
    items: Sequence[Buffer], conflicts: Sequence[Sequence[int]], order: Sequence[int]
) -> tuple[list[int], int]:
    """Place buffers in ``order`` at the lowest offset clear of every placed conflict."""
    offsets = [-1] * len(items)
    size = 0
    for i in order:
        taken = sorted(
            (offsets[j], offsets[j] + items[j].size) for j in conflicts[i] if offsets[j] >= 0
        )
        at = 0
        for lo, hi in taken:
            if at + items[i].size <= lo:
                break
            at = max(at, hi)
        offsets[i] = at
        size = max(size, at + items[i].size)
    return offsets, size
