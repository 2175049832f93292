"""The Object system: registration, type keys and indices, reflection."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import pytest

import ember
import ember.runtime as rt
from ember.errors import EmberTypeError, RegistryError
from ember.runtime.object import is_registered_object, list_object_types


@ember.register_object("test_obj.Point")
@dataclass(frozen=True)
class Point(rt.Object):
    x: int
    y: int = 0


@ember.register_object("test_obj.Color")
class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


def test_type_key_index_and_fields():
    p = Point(1, 2)
    assert p.type_key == "test_obj.Point"
    assert isinstance(p.type_index, int) and p.type_index >= 1
    assert rt.get_type("test_obj.Point") is Point
    assert rt.get_type(p.type_index) is Point
    assert rt.type_key_of(Point) == "test_obj.Point"
    assert p.fields() == {"x": 1, "y": 2}
    assert rt.list_fields(Point) == ["x", "y"]
    assert rt.list_fields(p) == ["x", "y"]
    assert rt.list_fields(Color) == ["value"]
    assert "test_obj.Point" in list_object_types()
    assert is_registered_object(p) and is_registered_object(Color.RED)
    assert not is_registered_object(3)


def test_plain_dataclass_without_base_class():
    @ember.register_object("test_obj.Plain")
    @dataclass
    class Plain:
        items: list = field(default_factory=list)

    assert rt.type_key_of(Plain) == "test_obj.Plain"
    assert rt.list_fields(Plain()) == ["items"]


def test_registration_errors():
    with pytest.raises(EmberTypeError, match="must be a dataclass"):
        ember.register_object("test_obj.NotData")(type("NotData", (), {}))
    with pytest.raises(RegistryError, match="already registered"):

        @ember.register_object("test_obj.Point")
        @dataclass
        class Other:
            a: int

    with pytest.raises(RegistryError, match="not a registered object type"):
        rt.type_key_of(int)
    with pytest.raises(RegistryError):
        rt.get_type("test_obj.Nope")
    with pytest.raises(RegistryError):
        rt.get_type(10**6)


def test_subclass_of_registered_class_is_not_registered():
    @dataclass(frozen=True)
    class Sub(Point):
        z: int = 0

    assert not is_registered_object(Sub(1))
