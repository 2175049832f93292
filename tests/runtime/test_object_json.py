"""Object JSON: round trips, shared references, arrays, versioning and hostile input."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np
import pytest

import ember
import ember.runtime as rt
from ember.errors import SerializationError


@ember.register_object("test_json.Kind")
class Kind(enum.IntEnum):
    A = 1
    B = 2


@ember.register_object("test_json.Leaf")
@dataclass(frozen=True)
class Leaf(rt.Object):
    name: str
    value: float = 0.0
    kind: Kind = Kind.A


@ember.register_object("test_json.Tree")
@dataclass(frozen=True)
class Tree(rt.Object):
    children: tuple
    attrs: dict = field(default_factory=dict)
    weights: object = None
    cached: int = field(default=0, init=False)


def test_round_trip_with_sharing():
    leaf = Leaf("x", 1.5, Kind.B)
    tree = Tree((leaf, leaf, Leaf("y")), {"k": [1, 2, None], 3: b"\x00\x01", "t": True})
    text = ember.save_json(tree)
    back = ember.load_json(text)
    assert back == tree
    assert back.children[0] is back.children[1]  # shared reference kept
    assert back.children[0].kind is Kind.B
    assert ember.save_json(back) == text  # deterministic


def test_arrays_and_special_values():
    weights = {
        "f32": np.arange(6, dtype="float32").reshape(2, 3),
        "bf16": np.array([1.5, -2.0], dtype=ml_dtypes.bfloat16),
        "bool": np.array([True, False]),
        "scalar": np.int64(7),
        "nd": ember.nd.array(np.ones((2,), "uint8")),
        "floats": [float("inf"), float("-inf")],
        "dtype": rt.dtype("int8"),
        "device": ember.cpu(1),
    }
    back = ember.load_json(ember.save_json(Tree((), weights=weights)))
    w = back.weights
    np.testing.assert_array_equal(w["f32"], weights["f32"])
    assert w["f32"].dtype == np.float32
    assert w["bf16"].dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(w["bf16"].astype("float32"), [1.5, -2.0])
    assert w["bool"].dtype == np.bool_ and w["scalar"] == 7
    assert isinstance(w["nd"], rt.NDArray) and w["nd"].numpy().tolist() == [1, 1]
    assert w["floats"] == [float("inf"), float("-inf")]
    assert w["dtype"] == rt.dtype("int8") and w["device"] == ember.cpu(1)
    nan = ember.load_json(ember.save_json(float("nan")))
    assert nan != nan


def test_init_false_fields_survive():
    tree = Tree(())
    object.__setattr__(tree, "cached", 42)
    assert ember.load_json(ember.save_json(tree)).cached == 42


def test_format_header():
    doc = json.loads(ember.save_json([1, "a"]))
    assert doc["format"] == "ember.object-json" and doc["version"] == 1
    assert doc["nodes"] == [{"list": [1, "a"]}] and doc["root"] == {"ref": 0}


def test_unsupported_values_and_cycles():
    with pytest.raises(SerializationError, match="cannot save"):
        ember.save_json(object())
    loop: list = []
    loop.append(loop)
    with pytest.raises(SerializationError, match="cycle"):
        ember.save_json(loop)

    class Loose(enum.Enum):
        A = 1

    with pytest.raises(SerializationError, match="not registered"):
        ember.save_json(Loose.A)


@pytest.mark.parametrize(
    "text, message",
    [
        ("not json", "not valid JSON"),
        ('{"format": "other"}', "not an ember.object-json"),
        ('{"format": "ember.object-json", "version": 99, "nodes": []}', "version 99"),
        (
            '{"format": "ember.object-json", "version": 1, "nodes": [], "root": {"ref": 0}}',
            "not an earlier node",
        ),
        (
            '{"format": "ember.object-json", "version": 1, "root": {"ref": 0},'
            ' "nodes": [{"object": "test_json.Nope", "fields": {}}]}',
            "not registered",
        ),
        (
            '{"format": "ember.object-json", "version": 1, "root": {"ref": 0},'
            ' "nodes": [{"object": "test_json.Leaf", "fields": {"evil": 1}}]}',
            "unknown fields",
        ),
        (
            '{"format": "ember.object-json", "version": 1, "root": {"ref": 0},'
            ' "nodes": [{"ndarray": {"dtype": "float32", "shape": [4], "data": "AAAA"}}]}',
            "needs 16",
        ),
        (
            '{"format": "ember.object-json", "version": 1, "root": {"ref": 0},'
            ' "nodes": [{"bytes": "!!"}]}',
            "bad base64",
        ),
        (
            '{"format": "ember.object-json", "version": 1, "root": {"ref": 0},'
            ' "nodes": [{"what": 1}]}',
            "unknown kind",
        ),
    ],
)
def test_malformed_input_raises_serialization_error(text, message):
    with pytest.raises(SerializationError, match=message):
        ember.load_json(text)
