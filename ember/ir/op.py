"""Operator registry of the graph IR: each op declares its attributes, type rule, fusion
pattern and a numpy reference implementation.

Example::

    register_op(OpDef(
        name="relu", num_inputs=1, pattern=OpPattern.ELEMWISE,
        infer_type=lambda types, attrs: types[0],
        reference=lambda xs, attrs: np.maximum(xs[0], 0),
    ))
    get_op("relu")
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ember.errors import IRError
from ember.ir.types import Type
from ember.support.registry import Registry


class OpPattern(enum.IntEnum):
    """How an op may be fused (TVM's numbering: lower is easier to fuse)."""

    ELEMWISE = 0
    BROADCAST = 1
    INJECTIVE = 2
    COMM_REDUCE = 3
    OUT_ELEMWISE_FUSABLE = 4
    TUPLE = 7
    OPAQUE = 8


#: attribute kinds and the Python values they accept after normalisation.
ATTR_KINDS = ("int", "float", "bool", "str", "ints", "floats", "strs", "dtype", "any")

_REQUIRED = object()


@dataclass(frozen=True)
class Attr:
    """Schema of one op attribute: its kind, default (missing = required) and meaning."""

    kind: str
    default: Any = _REQUIRED
    doc: str = ""

    def __post_init__(self) -> None:
        if self.kind not in ATTR_KINDS:
            raise IRError(f"unknown attribute kind {self.kind!r}; known: {', '.join(ATTR_KINDS)}")

    @property
    def required(self) -> bool:
        """True when the attribute has no default."""
        return self.default is _REQUIRED


def _normalize(kind: str, value: Any, where: str) -> Any:
    """Turn a user value into the canonical immutable value of an attribute kind."""
    try:
        if value is None:
            return None
        if kind == "int":
            if isinstance(value, float) and not value.is_integer():
                raise ValueError(value)
            return int(value)
        if kind == "float":
            return float(value)
        if kind == "bool":
            return bool(value)
        if kind in ("str", "dtype"):
            if not isinstance(value, str):
                raise ValueError(value)
            return value
        if kind == "ints":
            return tuple(int(v) for v in value)
        if kind == "floats":
            return tuple(float(v) for v in value)
        if kind == "strs":
            return tuple(str(v) for v in value)
        return value  # "any": caller promises immutability
    except (TypeError, ValueError) as err:
        raise IRError(f"{where}: expected {kind}, got {value!r}") from err


class Attrs(Mapping[str, Any]):
    """An immutable, hashable mapping of attribute names to normalised values."""

    __slots__ = ("_items", "_hash")

    def __init__(self, items: Mapping[str, Any] | None = None) -> None:
        self._items: dict[str, Any] = dict(sorted((items or {}).items()))
        self._hash: int | None = None

    def __getitem__(self, key: str) -> Any:
        try:
            return self._items[key]
        except KeyError:
            known = ", ".join(self._items) or "none"
            raise IRError(f"no attribute '{key}'; attributes: {known}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(tuple((k, _hashable(v)) for k, v in self._items.items()))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Attrs):
            return NotImplemented
        if self._items.keys() != other._items.keys():
            return False
        return all(_attr_equal(self._items[k], other._items[k]) for k in self._items)

    def replace(self, **changes: Any) -> Attrs:
        """A copy with some attributes changed."""
        items = dict(self._items)
        items.update(changes)
        return Attrs(items)

    def __repr__(self) -> str:
        return "Attrs(" + ", ".join(f"{k}={v!r}" for k, v in self._items.items()) + ")"


def _hashable(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tobytes())
    return value


def _attr_equal(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (
            isinstance(a, np.ndarray)
            and isinstance(b, np.ndarray)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and bool(np.array_equal(a, b))
        )
    return bool(a == b)


TypeRule = Callable[[Sequence[Type], Attrs], Type]
Reference = Callable[[Sequence[np.ndarray], Attrs], "np.ndarray | tuple[np.ndarray, ...]"]


@dataclass(frozen=True)
class OpDef:
    """An operator: name, arity, attribute schema, type rule, fusion pattern, numpy reference.

    ``num_inputs`` is an exact count, or ``(min, max)`` with ``max=None`` for variadic ops.
    """

    name: str
    num_inputs: int | tuple[int, int | None]
    infer_type: TypeRule
    reference: Reference
    pattern: OpPattern = OpPattern.OPAQUE
    attrs: Mapping[str, Attr] = field(default_factory=dict)
    doc: str = ""
    #: False for ops that must run at run time (seeded random generators): never folded.
    pure: bool = True

    def check_arity(self, n: int) -> None:
        """Raise IRError unless ``n`` inputs are acceptable."""
        lo: int
        hi: int | None
        if isinstance(self.num_inputs, int):
            lo, hi = self.num_inputs, self.num_inputs
        else:
            lo, hi = self.num_inputs
        if n < lo or (hi is not None and n > hi):
            want = str(lo) if lo == hi else f"{lo}..{'' if hi is None else hi}"
            raise IRError(f"op '{self.name}' takes {want} inputs, got {n}")

    def make_attrs(self, given: Mapping[str, Any]) -> Attrs:
        """Validate ``given`` against the schema, fill defaults and normalise values."""
        unknown = sorted(set(given) - set(self.attrs))
        if unknown:
            known = ", ".join(sorted(self.attrs)) or "none"
            raise IRError(f"op '{self.name}': unknown attributes {unknown}; known: {known}")
        out: dict[str, Any] = {}
        for name, spec in self.attrs.items():
            if name in given:
                out[name] = _normalize(spec.kind, given[name], f"op '{self.name}' attr '{name}'")
            elif spec.required:
                raise IRError(f"op '{self.name}': missing required attribute '{name}'")
            else:
                out[name] = spec.default
        return Attrs(out)

    def __repr__(self) -> str:
        return f"OpDef({self.name})"

    def __hash__(self) -> int:
        return hash(self.name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OpDef) and other.name == self.name


OPS: Registry[OpDef] = Registry("operator")


def register_op(op: OpDef, override: bool = False) -> OpDef:
    """Register an operator definition; duplicates raise unless ``override``."""
    return OPS.register(op.name, op, override=override)


def get_op(name: str) -> OpDef:
    """Look up an operator by name (the error lists close matches)."""
    _ensure_builtin_ops()
    return OPS.get(name)


def list_ops() -> list[str]:
    """Names of all registered operators."""
    _ensure_builtin_ops()
    return OPS.names()


def _ensure_builtin_ops() -> None:
    """Import the built-in op definitions once (they register through register_op)."""
    import ember.ir.ops  # noqa: F401  (registration happens in that package)
