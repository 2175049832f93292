"""Fusion analysis behind ``fuse_ops``: the indexed dataflow graph of a function body, its
post-dominator tree, and TVM's graph partitioner (union-find groups grown along
post-dominator paths). Everything here is iterative, so deep graphs are fine.

Graph nodes are the Calls, Tuples and TupleGetItems of one function body, in post order.
Variables and constants are not nodes: they are inputs to whatever group uses them.
Each edge ``producer -> consumer`` carries the consumer's fusion pattern, relaxed from
BROADCAST to ELEMWISE when the producer already has the consumer's shape (TVM's rule,
which lets ``conv -> add(bias)`` count as elementwise). Tuples and tuple items are OPAQUE
here: they stay in the caller, where graph planning handles them without a kernel.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ember.ir.expr import Call, Expr, Function, Tuple, TupleGetItem, children, post_order
from ember.ir.op import OpPattern
from ember.ir.types import TensorType

ELEMWISE = OpPattern.ELEMWISE
BROADCAST = OpPattern.BROADCAST
INJECTIVE = OpPattern.INJECTIVE
COMM_REDUCE = OpPattern.COMM_REDUCE
OUT_FUSABLE = OpPattern.OUT_ELEMWISE_FUSABLE
OPAQUE = OpPattern.OPAQUE


@dataclass
class GraphNode:
    """One node of the indexed forward graph: its expression, pattern and consumers."""

    index: int
    expr: Expr
    pattern: OpPattern
    outputs: list[tuple[int, OpPattern]] = field(default_factory=list)
    extern_ref: bool = False  # the function's result: nothing can post-dominate it


def node_pattern(expr: Expr) -> OpPattern:
    """The fusion pattern of a graph node."""
    if isinstance(expr, Call) and not isinstance(expr.op, Function):
        return expr.op.pattern
    return OPAQUE  # calls of (already fused) functions, tuples, tuple items


def build_graph(body: Expr) -> list[GraphNode]:
    """The indexed forward graph of ``body`` (see the module docstring)."""
    nodes: list[GraphNode] = []
    index: dict[int, int] = {}
    for expr in post_order(body):
        if not isinstance(expr, (Call, Tuple, TupleGetItem)):
            continue
        node = GraphNode(len(nodes), expr, node_pattern(expr))
        index[id(expr)] = node.index
        nodes.append(node)
        for arg in children(expr):
            if id(arg) not in index:
                continue  # a variable or constant
            edge = node.pattern
            out_ty, arg_ty = expr.type, arg.type
            if (
                edge == BROADCAST
                and isinstance(out_ty, TensorType)
                and isinstance(arg_ty, TensorType)
                and out_ty.shape == arg_ty.shape
            ):
                edge = ELEMWISE
            nodes[index[id(arg)]].outputs.append((node.index, edge))
    if id(body) in index:
        nodes[index[id(body)]].extern_ref = True
    return nodes


@dataclass
class DomNode:
    """A node of the post-dominator tree: parent, depth, and the combined edge pattern on
    the way from the graph node to its immediate post-dominator."""

    parent: int | None
    depth: int
    pattern: OpPattern


def post_dominators(nodes: list[GraphNode]) -> list[DomNode]:
    """The post-dominator tree, built consumers first (reverse post order)."""
    tree: list[DomNode | None] = [None] * len(nodes)
    for node in reversed(nodes):
        if node.extern_ref or not node.outputs:
            tree[node.index] = DomNode(None, 1, OPAQUE)
            continue
        pattern = ELEMWISE
        parent: int | None = node.outputs[0][0]
        pattern = max(pattern, node.outputs[0][1])
        for consumer, edge in node.outputs[1:]:
            parent, pattern = _lca(tree, parent, consumer, pattern)
            pattern = max(pattern, edge)
        depth = 1 if parent is None else _dom(tree, parent).depth + 1
        tree[node.index] = DomNode(parent, depth, OpPattern(pattern))
    return [_dom(tree, i) for i in range(len(nodes))]


def _dom(tree: list[DomNode | None], i: int) -> DomNode:
    d = tree[i]
    if d is None:  # consumers come later in post order, so they are always built first
        raise RuntimeError(f"post-dominator of node {i} requested before it was built")
    return d


def _lca(
    tree: list[DomNode | None], a: int | None, b: int | None, pattern: OpPattern
) -> tuple[int | None, OpPattern]:
    """Least common ancestor of ``a`` and ``b``, combining the patterns walked over."""
    while a != b:
        if a is None or b is None:
            return None, pattern
        da, db = _dom(tree, a), _dom(tree, b)
        if da.depth < db.depth:
            pattern = max(pattern, db.pattern)
            b = db.parent
        elif db.depth < da.depth:
            pattern = max(pattern, da.pattern)
            a = da.parent
        else:
            pattern = max(pattern, da.pattern, db.pattern)
            a, b = da.parent, db.parent
    return a, pattern


class Partitioner:
    """TVM's graph partitioner: union-find groups merged along post-dominator paths.

    Phase 0 fuses OUT_ELEMWISE_FUSABLE anchors (conv, dense, matmul) with their
    elementwise/broadcast epilogues; in phases 0 and 1 elementwise/broadcast ops join an
    injective, reduction or anchored consumer group; phase 1 (after the anchors are done)
    fuses injective ops into their post-dominator when every path is injective and the
    post-dominator's group is injective or a reduction.
    ``max_depth`` bounds the number of ops in one group.
    """

    def __init__(self, nodes: list[GraphNode], max_depth: int) -> None:
        self.nodes = nodes
        self.tree = post_dominators(nodes)
        self.max_depth = max_depth
        n = len(nodes)
        self.parent = list(range(n))
        self.pattern = [node.pattern for node in nodes]
        self.anchor = [node.pattern == OUT_FUSABLE for node in nodes]
        self.num_nodes = [1] * n

    def find(self, i: int) -> int:
        """The root group of node ``i`` (with path compression)."""
        root = i
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[i] != root:
            self.parent[i], i = root, self.parent[i]
        return root

    def merge(self, child: int, parent: int) -> None:
        child, parent = self.find(child), self.find(parent)
        if child == parent:
            return
        self.num_nodes[parent] += self.num_nodes[child]
        self.parent[child] = parent
        if self.anchor[child]:
            self.anchor[parent] = True
            self.pattern[parent] = max(self.pattern[child], self.pattern[parent])

    def _walk(self, src: int, sink: int) -> list[int]:
        """Every node on a path from ``src``'s consumers up to and including ``sink``."""
        seen: set[int] = set()
        stack = [c for c, _ in self.nodes[src].outputs]
        order: list[int] = []
        while stack:
            i = stack.pop()
            if i in seen:
                continue
            seen.add(i)
            order.append(i)
            if i != sink:
                stack.extend(c for c, _ in self.nodes[i].outputs)
        return order

    def check_path(self, src: int, sink: int, limit: OpPattern, sink_ok: set[OpPattern]) -> bool:
        """True if every group on the paths src -> sink has a pattern <= ``limit`` (the sink's
        group: a pattern in ``sink_ok``)."""
        for i in self._walk(src, sink):
            kind = self.pattern[self.find(i)]
            if i == sink:
                if kind not in sink_ok:
                    return False
            elif kind > limit:
                return False
        return True

    def commit(self, src: int, sink: int) -> None:
        """Merge every group on the paths src -> sink into the sink's group."""
        target = self.find(sink)
        self.merge(src, target)
        for i in self._walk(src, sink):
            self.merge(i, target)

    def count_with(self, child: int, dom_parent: int) -> int:
        """The size of the group that fusing ``child`` into ``dom_parent`` would make."""
        total = self.num_nodes[self.find(dom_parent)] + self.num_nodes[child]
        for i in self._walk(child, dom_parent):
            if i != dom_parent:
                total += self.num_nodes[i]
        return total

    def run(self) -> list[int]:
        """Partition; return the root group index of every node."""
        for phase in (0, 1):
            for i in range(len(self.nodes)):
                self.visit(i, phase)
        return [self.find(i) for i in range(len(self.nodes))]

    def visit(self, i: int, phase: int) -> None:
        pattern = self.pattern[i]
        dom = self.tree[i]
        if pattern == OPAQUE or dom.parent is None:
            return
        sink = dom.parent
        if self.find(i) == self.find(sink) or self.pattern[sink] == OPAQUE:
            return
        if self.nodes[sink].pattern == OPAQUE:
            return
        if self.count_with(i, sink) > self.max_depth:
            return
        upto_injective = {ELEMWISE, BROADCAST, INJECTIVE}
        ok = False
        if pattern == OUT_FUSABLE:
            # an anchor takes its epilogue when the path to it is elementwise/broadcast
            ok = phase == 0 and dom.pattern == ELEMWISE
            ok = ok and self.check_path(i, sink, BROADCAST, {ELEMWISE, BROADCAST})
        elif pattern <= BROADCAST:
            # into an injective, reduction or anchored consumer; parallel branches injective
            ok = dom.pattern <= INJECTIVE or dom.pattern == COMM_REDUCE
            sink_ok = upto_injective | {COMM_REDUCE, OUT_FUSABLE}
            ok = ok and self.check_path(i, sink, INJECTIVE, sink_ok)
        elif pattern == INJECTIVE:
            # deferred to phase 1 so that anchors have taken their epilogues first; the
            # sink may be a reduction (the TVM paper's rule; TVM's code stops at injective)
            sink_ok = upto_injective | {COMM_REDUCE}
            ok = phase == 1 and self.check_path(i, sink, INJECTIVE, sink_ok)
        if ok:
            self.commit(i, sink)
