"""Own upgrade rules: opset < 7 nodes onnx's version converter has no adapter for.

Each rule rewrites one old node into its opset-7 form (plus helper nodes or initializers
it needs). The rewritten nodes are *stashed* in a private domain while the converter runs
over the rest of the graph (it leaves other domains alone) and restored afterwards, so
the converter never looks for the adapter it lacks. Example: ``Pad-1`` (attribute
``paddings``) becomes ``Pad-2`` (attribute ``pads``), the form opsets 2-10 share.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ember.errors import FrontendError

#: the private domain rewritten nodes live in while the converter runs.
STASH_DOMAIN = "ember.upgrade"

#: the TensorProto element type names (an old Cast names its target type by string).
_TYPE_NAMES = frozenset(onnx.TensorProto.DataType.keys())  # noqa: SIM118 (an enum wrapper)

#: binary ops whose opset < 7 form has legacy ``broadcast``/``axis`` (the converter has no
#: adapter for the logic ones and ignores ``axis`` in the arithmetic ones).
_LEGACY_BROADCAST = (
    *("And", "Or", "Xor", "Equal", "Greater", "Less"),
    *("Add", "Sub", "Mul", "Div", "Pow"),
)


@dataclass
class RuleContext:
    """What a rule may read (initializers, value ranks) and add (initializers)."""

    initializers: Mapping[str, np.ndarray]
    ranks: Mapping[str, int]
    label: str
    new_initializers: list[onnx.TensorProto] = field(default_factory=list)

    def const(self, node: onnx.NodeProto, index: int, what: str) -> np.ndarray:
        """The constant value of input ``index`` of ``node`` (an initializer), else an error."""
        name = node.input[index] if index < len(node.input) else ""
        if name not in self.initializers:
            raise FrontendError(
                f"ONNX model {self.label}: {node.op_type} '{node.name}' (opset < 7) takes its "
                f"{what} from '{name}', which is not an initializer; ember needs it constant "
                "to upgrade the node: bake it into the model or re-export with opset >= 7"
            )
        return self.initializers[name]

    def rank(self, node: onnx.NodeProto, index: int) -> int:
        """The rank of input ``index`` of ``node``, else an error naming it."""
        name = node.input[index]
        if name not in self.ranks:
            raise FrontendError(
                f"ONNX model {self.label}: {node.op_type} '{node.name}' (opset < 7) needs the "
                f"rank of '{name}' to be upgraded and it is unknown; declare the input shapes"
            )
        return self.ranks[name]


Rule = Callable[[onnx.NodeProto, int, RuleContext], list[onnx.NodeProto]]


def _attrs(node: onnx.NodeProto) -> dict[str, Any]:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _node(
    node: onnx.NodeProto, inputs: list[str], attrs: Mapping[str, Any], op: str = ""
) -> onnx.NodeProto:
    """A stashed copy of ``node`` with new inputs and attributes (``consumed_inputs``, which
    opset 6 dropped, removed)."""
    return helper.make_node(
        op or node.op_type,
        inputs,
        list(node.output),
        name=node.name,
        domain=STASH_DOMAIN,
        **{k: v for k, v in attrs.items() if v is not None and k != "consumed_inputs"},
    )


def _pad(node: onnx.NodeProto, version: int, rc: RuleContext) -> list[onnx.NodeProto]:
    attrs = _attrs(node)
    if version < 2 and "paddings" in attrs:
        attrs["pads"] = attrs.pop("paddings")
    return [_node(node, list(node.input), attrs)]


def _split(node: onnx.NodeProto, version: int, rc: RuleContext) -> list[onnx.NodeProto]:
    attrs = _attrs(node)
    if len(node.input) > 1 and node.input[1]:
        attrs["split"] = [int(v) for v in rc.const(node, 1, "split sizes").reshape(-1)]
    return [_node(node, [node.input[0]], attrs)]


def _rnn(node: onnx.NodeProto, version: int, rc: RuleContext) -> list[onnx.NodeProto]:
    attrs = _attrs(node)
    attrs.pop("output_sequence", None)  # opset 7 always may produce Y (an optional output)
    return [_node(node, list(node.input), attrs)]


def _lp_pool(node: onnx.NodeProto, version: int, rc: RuleContext) -> list[onnx.NodeProto]:
    attrs = _attrs(node)
    if "p" in attrs:
        p = float(attrs["p"])
        if p != int(p):
            raise FrontendError(
                f"ONNX model {rc.label}: {node.op_type} '{node.name}' has p={p}; newer "
                "opsets (and ember) take an integer p"
            )
        attrs["p"] = int(p)
    return [_node(node, list(node.input), attrs)]


def _cast(node: onnx.NodeProto, version: int, rc: RuleContext) -> list[onnx.NodeProto]:
    attrs = _attrs(node)
    to = attrs.get("to")
    if isinstance(to, bytes | str):
        name = to.decode() if isinstance(to, bytes) else to
        if name.upper() not in _TYPE_NAMES:
            raise FrontendError(
                f"ONNX model {rc.label}: Cast '{node.name}' casts to unknown type '{name}'"
            )
        attrs["to"] = int(onnx.TensorProto.DataType.Value(name.upper()))
    return [_node(node, list(node.input), attrs)]


def _tile(node: onnx.NodeProto, version: int, rc: RuleContext) -> list[onnx.NodeProto]:
    if version >= 6 or len(node.input) < 3:
        return [_node(node, list(node.input), _attrs(node))]
    tiles = int(rc.const(node, 1, "tile count").reshape(-1)[0])
    axis = int(rc.const(node, 2, "axis").reshape(-1)[0])
    rank = rc.rank(node, 0)
    repeats = np.ones(rank, dtype=np.int64)
    repeats[axis] = tiles
    name = f"{node.output[0]}__repeats"
    rc.new_initializers.append(numpy_helper.from_array(repeats, name))
    return [_node(node, [node.input[0], name], {})]


def _legacy_broadcast(node: onnx.NodeProto, version: int, rc: RuleContext) -> list[onnx.NodeProto]:
    attrs = _attrs(node)
    broadcast = int(attrs.pop("broadcast", 0))
    axis = attrs.pop("axis", None)
    inputs = list(node.input)
    if not broadcast or axis is None:
        return [_node(node, inputs, attrs)]
    rank_a, rank_b = rc.rank(node, 0), rc.rank(node, 1)
    start = int(axis) + rank_a if int(axis) < 0 else int(axis)
    trailing = rank_a - start - rank_b
    if trailing <= 0:
        return [_node(node, inputs, attrs)]
    aligned = f"{node.output[0]}__aligned_b"
    unsqueeze = helper.make_node(
        "Unsqueeze",
        [inputs[1]],
        [aligned],
        name=f"{node.name}__align",
        domain=STASH_DOMAIN,
        axes=list(range(rank_b, rank_b + trailing)),
    )
    return [unsqueeze, _node(node, [inputs[0], aligned], attrs)]


def _prelu(node: onnx.NodeProto, version: int, rc: RuleContext) -> list[onnx.NodeProto]:
    """Old PRelu broadcast a (C,) slope over axis 1; numpy broadcasting needs (C, 1, ...)."""
    rank = rc.ranks.get(node.input[0])
    slope_rank = rc.ranks.get(node.input[1])
    value = rc.initializers.get(node.input[1])
    if value is not None:
        slope_rank = value.ndim
    size = int(value.size) if value is not None else 0
    if rank is None or rank < 3 or slope_rank != 1 or size == 1:
        return [_node(node, list(node.input), {})]
    aligned = f"{node.output[0]}__slope"
    if value is not None:
        shaped = value.reshape((value.size,) + (1,) * (rank - 2))
        rc.new_initializers.append(numpy_helper.from_array(shaped, aligned))
        return [_node(node, [node.input[0], aligned], {})]
    unsqueeze = helper.make_node(
        "Unsqueeze",
        [node.input[1]],
        [aligned],
        name=f"{node.name}__slope",
        domain=STASH_DOMAIN,
        axes=list(range(1, rank - 1)),
    )
    return [unsqueeze, _node(node, [node.input[0], aligned], {})]


#: op type -> the rule rewriting its opset < 7 form.
RULES: dict[str, Rule] = {
    "Pad": _pad,
    "Split": _split,
    "GRU": _rnn,
    "LSTM": _rnn,
    "RNN": _rnn,
    "LpPool": _lp_pool,
    "GlobalLpPool": _lp_pool,
    "Cast": _cast,
    "Tile": _tile,
    "PRelu": _prelu,
    **dict.fromkeys(_LEGACY_BROADCAST, _legacy_broadcast),
}


def apply_rules(model: onnx.ModelProto, version: int, rc: RuleContext) -> onnx.ModelProto:
    """A copy of ``model`` with every node a rule covers rewritten and stashed."""
    if not any(n.op_type in RULES and n.domain in ("", "ai.onnx") for n in model.graph.node):
        return model
    out = onnx.ModelProto()
    out.CopyFrom(model)
    nodes: list[onnx.NodeProto] = []
    for node in model.graph.node:
        rule = RULES.get(node.op_type) if node.domain in ("", "ai.onnx") else None
        nodes.extend(rule(node, version, rc) if rule is not None else [node])
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    out.graph.initializer.extend(rc.new_initializers)
    out.opset_import.append(helper.make_opsetid(STASH_DOMAIN, 1))
    return out


def restore(model: onnx.ModelProto) -> onnx.ModelProto:
    """Move the stashed nodes back to the default domain and drop the private opset."""
    if not any(o.domain == STASH_DOMAIN for o in model.opset_import):
        return model
    for node in model.graph.node:
        if node.domain == STASH_DOMAIN:
            node.domain = ""
    kept = [o for o in model.opset_import if o.domain != STASH_DOMAIN]
    del model.opset_import[:]
    model.opset_import.extend(kept)
    return model
