"""Opset upgrade: a model older than the importer's minimum opset -> the same model at it.

ONNX's version converter does the work (``onnx.version_converter.convert_version``); this
module fixes what it gets wrong or drops, keeping the original opset's meaning:

- nodes the converter has no adapter for, or converts wrongly (``Pad-1``, ``Split-1``,
  ``GRU``/``LSTM``/``RNN``, ``LpPool``, ``Cast-1``, ``Tile-1``, logic ops with legacy
  broadcast, ``PRelu`` whose ``(C,)`` slope broadcast over axis 1) go through own rules
  (``upgrade_rules``).
- training-mode ``BatchNormalization``/``Dropout`` (``is_test=0``; the converter removes the
  attribute silently) is refused with the node named, since inference cannot reproduce it.
- ``consumed_inputs`` and the legacy ``broadcast``/``axis`` attributes of binary ops are
  translated by the converter's own adapters.
"""

from __future__ import annotations

import onnx
from onnx import helper, numpy_helper, shape_inference, version_converter

from ember.errors import FrontendError
from ember.frontend.onnx import upgrade_rules

#: the default-domain opset old models are converted to (the importer's minimum).
TARGET_OPSET = 7

#: ops whose opset < 7 form has an ``is_test`` attribute meaning inference when set.
_IS_TEST_OPS = ("BatchNormalization", "Dropout")


def default_opset(model: onnx.ModelProto) -> int | None:
    """The model's default-domain opset, or None when it imports none."""
    versions = [int(o.version) for o in model.opset_import if o.domain in ("", "ai.onnx")]
    return max(versions) if versions else None


def upgrade_model(model: onnx.ModelProto, target: int = TARGET_OPSET) -> onnx.ModelProto:
    """``model`` converted to default-domain opset ``target`` if older (else unchanged)."""
    version = default_opset(model)
    if version is None or version >= target:
        return model
    label = f"'{model.graph.name}'" if model.graph.name else "(unnamed graph)"
    _refuse_training(model, version, label)
    model = _declare_initializers(model)
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    ctx = upgrade_rules.RuleContext(inits, _value_ranks(model), label)
    model = _declare_initializers(upgrade_rules.apply_rules(model, version, ctx))
    try:
        converted = upgrade_rules.restore(version_converter.convert_version(model, target))
    except Exception as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise FrontendError(
            f"ONNX model {label} uses opset {version}; converting it to opset {target} "
            f"failed: {first}. Re-export the model with opset >= {target}"
        ) from None
    return converted


def _refuse_training(model: onnx.ModelProto, version: int, label: str) -> None:
    """Old training-mode nodes (``is_test=0``) cannot be imported for inference."""
    bad = []
    for i, node in enumerate(model.graph.node):
        if node.op_type not in _IS_TEST_OPS or node.domain not in ("", "ai.onnx"):
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if "is_test" in attrs and int(attrs["is_test"]) == 0:
            bad.append(f"{node.op_type} '{node.name or f'#{i}'}'")
    if bad:
        raise FrontendError(
            f"ONNX model {label} (opset {version}): {', '.join(bad)} run in training mode "
            "(is_test=0); ember compiles inference graphs: export the model in eval mode"
        )


def _declare_initializers(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy where every initializer is also a graph input (the converter, like IR < 4,
    looks values up among the inputs only); the importer still treats them as constants."""
    declared = {vi.name for vi in model.graph.input}
    missing = [t for t in model.graph.initializer if t.name not in declared]
    if not missing:
        return model
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for t in missing:
        out.graph.input.append(helper.make_tensor_value_info(t.name, t.data_type, t.dims))
    return out


def _value_ranks(model: onnx.ModelProto) -> dict[str, int]:
    """Rank of every value whose shape onnx's shape inference knows."""
    try:
        inferred = shape_inference.infer_shapes(model)
    except Exception:
        inferred = model
    graph = inferred.graph
    ranks: dict[str, int] = {}
    for vi in [*graph.input, *graph.value_info, *graph.output]:
        tt = vi.type.tensor_type
        if vi.type.HasField("tensor_type") and tt.HasField("shape"):
            ranks[vi.name] = len(tt.shape.dim)
    return ranks
