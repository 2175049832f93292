"""partition: move the parts of ``main`` that external kinds claim into marked functions.

For a composite target (``"openblas, onednn, c"``) the driver runs this right before
fusion. Three steps:

1. **annotate**: for each external kind in priority order, each pattern of its table
   (:mod:`ember.transform.partition_patterns`, longest first) is matched at every op not
   yet claimed; a match becomes a unit of that kind.
2. **merge**: a unit joins the unit of the same kind that consumes it (unless the kind's
   table says ``merge=False``: its hooks take one pattern per region) when that is legal:
   all its users are in the consumer (regions have one output) and no path leaves the
   pair and comes back (that would make a cycle between the region and the host; the
   diamond ``a -> host op -> b, a -> b`` is the case this refuses).
3. **outline**: each region becomes ``Call(Function(params, body, {"Primitive": 1,
   "Compiler": kind, "Composite": pattern names}), inputs)``. Fusion treats the call as
   opaque; graph planning makes it one kernel, and the driver hands it to the kind's hooks.
   Constants stay inside the region; planning lifts them into parameters unless the
   kind's ``constant_updater`` takes them over (attribute ``ExternalConstants=1``).

Everything no pattern claims stays on the host.
"""

from __future__ import annotations

from collections.abc import Sequence

from ember.ir.expr import Call, Expr, Function, children, post_order, with_children
from ember.ir.module import IRModule
from ember.ir.op import Attrs, OpDef
from ember.transform._util import map_bodies
from ember.transform.fuse_ops import make_group_call
from ember.transform.partition_patterns import Pattern, get_pattern_table

#: function attribute naming the external kind a region belongs to.
COMPILER_ATTR = "Compiler"


def partition(mod: IRModule, kinds: Sequence[str], own_constants: Sequence[str] = ()) -> IRModule:
    """Outline the regions ``kinds`` claim (see the module docstring); ``own_constants``
    names the kinds whose regions keep their constants (``ExternalConstants=1``)."""
    if not kinds:
        return mod
    return map_bodies(mod, lambda body: partition_body(body, kinds, own_constants))


def partition_body(body: Expr, kinds: Sequence[str], own_constants: Sequence[str] = ()) -> Expr:
    """Partition one function body."""
    order = post_order(body)
    users: dict[int, list[Expr]] = {}
    for node in order:
        for kid in children(node):
            users.setdefault(id(kid), []).append(node)
    units = _annotate(order, users, kinds)
    if not units:
        return body
    regions = _merge(order, users, units, body)
    return _outline(order, body, regions, set(own_constants))


class _Unit:
    """A set of calls that go to one kind together (a match, then a merged region)."""

    def __init__(self, kind: str, calls: list[Call], names: list[str]) -> None:
        self.kind = kind
        self.calls = calls  # in post order; the last one is the output
        self.names = names

    @property
    def out(self) -> Call:
        return self.calls[-1]


def _annotate(
    order: list[Expr], users: dict[int, list[Expr]], kinds: Sequence[str]
) -> dict[int, _Unit]:
    unit_of: dict[int, _Unit] = {}
    for kind in kinds:
        for pattern in get_pattern_table(kind).patterns:
            for node in order:
                if not isinstance(node, Call) or id(node) in unit_of:
                    continue
                calls = _match(pattern, node, users, unit_of)
                if calls is not None and pattern.accepts(calls):
                    unit = _Unit(kind, calls, [pattern.name])
                    for c in calls:
                        unit_of[id(c)] = unit
    return unit_of


def _match(
    pattern: Pattern, root: Call, users: dict[int, list[Expr]], taken: dict[int, _Unit]
) -> list[Call] | None:
    """The calls of ``pattern``'s chain ending at ``root``, producer first, or None."""
    chain = [root]
    for k in range(len(pattern.ops) - 1, -1, -1):
        cur = chain[0]
        if not (isinstance(cur.op, OpDef) and cur.op.name == pattern.ops[k]):
            return None
        if k == 0:
            return chain
        prev = next(
            (
                a
                for a in cur.args
                if isinstance(a, Call)
                and id(a) not in taken
                and [id(u) for u in users.get(id(a), [])] == [id(cur)]
                and isinstance(a.op, OpDef)
                and a.op.name == pattern.ops[k - 1]
            ),
            None,
        )
        if prev is None:
            return None
        chain.insert(0, prev)
    return chain


def _merge(
    order: list[Expr], users: dict[int, list[Expr]], unit_of: dict[int, _Unit], body: Expr
) -> list[_Unit]:
    position = {id(n): i for i, n in enumerate(order)}
    for node in order:
        unit = unit_of.get(id(node))
        if unit is None or node is not unit.out:
            continue
        for call in list(unit.calls):
            for arg in call.args:
                other = unit_of.get(id(arg))
                if other is None or other is unit or other.kind != unit.kind:
                    continue
                if not get_pattern_table(unit.kind).merge:
                    continue
                if arg is other.out and _can_merge(other, unit, users, unit_of, body):
                    unit.calls = sorted(other.calls + unit.calls, key=lambda c: position[id(c)])
                    unit.names = other.names + [n for n in unit.names if n not in other.names]
                    for c in other.calls:
                        unit_of[id(c)] = unit
    seen: dict[int, _Unit] = {id(u): u for u in unit_of.values()}
    return list(seen.values())


def _can_merge(
    producer: _Unit,
    consumer: _Unit,
    users: dict[int, list[Expr]],
    unit_of: dict[int, _Unit],
    body: Expr,
) -> bool:
    """Whether ``producer`` may join ``consumer``: one output, and no cycle created."""
    if producer.out is body:
        return False
    members = {id(c) for c in producer.calls + consumer.calls}
    outside = [u for u in users.get(id(producer.out), []) if id(u) not in members]
    if outside and creates_cycle(outside, members, users):
        return False
    return not outside  # regions have one output: every user of the producer is inside


def creates_cycle(starts: list[Expr], members: set[int], users: dict[int, list[Expr]]) -> bool:
    """Whether a path from ``starts`` (outside the merged region) leads back into it."""
    stack, seen = list(starts), set()
    while stack:
        node = stack.pop()
        if id(node) in members:
            return True
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.extend(users.get(id(node), []))
    return False


def _outline(order: list[Expr], body: Expr, regions: list[_Unit], own: set[str]) -> Expr:
    region_of = {id(c): r for r in regions for c in r.calls}
    new: dict[int, Expr] = {}
    for node in order:
        region = region_of.get(id(node))
        if region is not None and node is not region.out:
            continue  # built inside its region's function
        if region is not None:
            new[id(node)] = _region_call(region, new, region.kind in own)
        else:
            new[id(node)] = with_children(node, tuple(new.get(id(k), k) for k in children(node)))
    return new[id(body)]


def _region_call(region: _Unit, outer: dict[int, Expr], own_constants: bool) -> Call:
    attrs = {"Primitive": 1, COMPILER_ATTR: region.kind, "Composite": ",".join(region.names)}
    if own_constants:
        attrs["ExternalConstants"] = 1
    # constants stay inside: planning lifts them unless the kind owns them
    return make_group_call(
        list(region.calls), lambda e: outer.get(id(e), e), Attrs(attrs), inline_limit=2**62
    )


def region_kind(func: Function) -> str | None:
    """The external kind a (partitioned) function belongs to, or None for the host."""
    kind = dict(func.attrs).get(COMPILER_ATTR)
    return str(kind) if kind is not None else None
