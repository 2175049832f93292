"""Object system: type keys, type indices and field reflection for registered dataclasses.

``@register_object("ember.TypeKey")`` records a (preferably frozen) dataclass, or an Enum,
in the object type registry under a globally unique type key and gives it a type index.
Registered objects can be reflected on (:func:`list_fields`, ``Object.fields()``), passed
through packed functions, and saved/loaded with :mod:`ember.runtime.object_json`. Example::

    @ember.register_object("demo.Point")
    @dataclass(frozen=True)
    class Point(ember.runtime.Object):
        x: int
        y: int

    Point(1, 2).fields()     # -> {"x": 1, "y": 2}
"""

from __future__ import annotations

import dataclasses
import enum
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from ember.errors import EmberTypeError, RegistryError
from ember.support.registry import Registry

T = TypeVar("T", bound=type)

OBJECT_TYPES: Registry[type] = Registry("object type")
_BY_INDEX: list[type] = []
_LOCK = threading.Lock()
ROOT_TYPE_INDEX = 0  # the index of Object itself; registered types start at 1


class Object:
    """Optional base of registered objects: ``type_key``, ``type_index``, ``fields()``."""

    __slots__ = ()

    @property
    def type_key(self) -> str:
        """The registered type key of this object's class."""
        return type_key_of(type(self))

    @property
    def type_index(self) -> int:
        """The runtime type index of this object's class."""
        return type_index_of(type(self))

    def fields(self) -> dict[str, Any]:
        """Field names mapped to their values, in declaration order."""
        return {name: getattr(self, name) for name in list_fields(type(self))}


def register_object(type_key: str | type | None = None) -> Any:
    """Register a dataclass (or Enum) under ``type_key``; usable as ``@register_object("k")``."""
    if isinstance(type_key, type):  # bare @register_object
        return _register(type_key, type_key.__name__)

    def wrap(cls: T) -> T:
        return _register(cls, type_key or cls.__name__)

    return wrap


def _register(cls: T, type_key: str) -> T:
    if not isinstance(cls, type):
        raise EmberTypeError(f"register_object decorates classes, got {type(cls).__name__}")
    if not (dataclasses.is_dataclass(cls) or issubclass(cls, enum.Enum)):
        raise EmberTypeError(
            f"register_object('{type_key}'): {cls.__qualname__} must be a dataclass or an "
            "Enum; put @register_object above @dataclass(frozen=True)"
        )
    with _LOCK:
        existing = OBJECT_TYPES.find(type_key)
        same = existing is not None and (
            existing.__module__ == cls.__module__ and existing.__qualname__ == cls.__qualname__
        )
        if existing is not None and not same:
            raise RegistryError(
                f"object type '{type_key}' is already registered by "
                f"{existing.__module__}.{existing.__qualname__}; choose another type key"
            )
        if same and existing is not None:
            index = existing.__dict__["__ember_type_index__"]
            _BY_INDEX[index - 1] = cls
        else:
            index = len(_BY_INDEX) + 1
            _BY_INDEX.append(cls)
        OBJECT_TYPES.register(type_key, cls, override=same)
        type.__setattr__(cls, "__ember_type_key__", type_key)
        type.__setattr__(cls, "__ember_type_index__", index)
    return cls


def is_registered_object(value: Any) -> bool:
    """Whether ``value`` is an instance of a class registered with register_object."""
    return "__ember_type_key__" in type(value).__dict__


def type_key_of(cls: type) -> str:
    """The type key of a registered class."""
    key = cls.__dict__.get("__ember_type_key__")
    if key is None:
        raise RegistryError(
            f"{cls.__qualname__} is not a registered object type; decorate it with "
            "@ember.register_object('<type key>')"
        )
    return str(key)


def type_index_of(cls: type) -> int:
    """The runtime type index of a registered class."""
    type_key_of(cls)
    return int(cls.__dict__["__ember_type_index__"])


def get_type(type_key: str | int) -> type:
    """The class registered under a type key or a type index."""
    if isinstance(type_key, int):
        if not 1 <= type_key <= len(_BY_INDEX):
            raise RegistryError(f"unknown object type index {type_key}; known: 1..{len(_BY_INDEX)}")
        return _BY_INDEX[type_key - 1]
    return OBJECT_TYPES.get(type_key)


def list_object_types() -> list[str]:
    """Every registered type key, sorted."""
    return OBJECT_TYPES.names()


def list_fields(obj_or_type: Any) -> list[str]:
    """The reflected field names of a registered object or class, in declaration order."""
    cls = obj_or_type if isinstance(obj_or_type, type) else type(obj_or_type)
    if issubclass(cls, enum.Enum):
        return ["value"]
    if not dataclasses.is_dataclass(cls):
        raise EmberTypeError(f"{cls.__qualname__} has no reflected fields (not a dataclass)")
    return [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]


def object_factory(cls: type) -> Callable[[dict[str, Any]], Any]:
    """A function building an instance of ``cls`` from a field mapping (used by loaders)."""
    if issubclass(cls, enum.Enum):
        return lambda fields: cls(fields["value"])
    init_names = {f.name for f in dataclasses.fields(cls) if f.init}  # type: ignore[arg-type]

    def build(fields: dict[str, Any]) -> Any:
        obj = cls(**{k: v for k, v in fields.items() if k in init_names})
        for k, v in fields.items():
            if k not in init_names:
                object.__setattr__(obj, k, v)
        return obj

    return build
