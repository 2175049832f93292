"""Types of the graph IR: tensors with static shapes and dtypes, and tuples of types."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ember.errors import IRError
from ember.support import dtypes

#: dtypes the IR knows, by their canonical (numpy-style) names: the tensor rows of the
#: one dtype table, :mod:`ember.support.dtypes`.
DTYPES: tuple[str, ...] = dtypes.TENSOR_DTYPES


def canonical_dtype(dtype: object) -> str:
    """Return the canonical dtype name for a numpy dtype, type or string; raise if unknown."""
    if isinstance(dtype, str) and (dtype in DTYPES or dtype == "string"):
        return dtype  # string: 16-byte records of UTF-8 text (docs/strings.md)
    try:
        npdt = np.dtype(dtype)  # type: ignore[call-overload]
    except TypeError as err:
        raise IRError(f"unknown dtype {dtype!r}; known: {', '.join(DTYPES)}") from err
    info = dtypes.from_numpy(npdt)
    if info is None:
        raise IRError(f"unsupported dtype {npdt.name!r}; known: {', '.join(DTYPES)}")
    return info.name


def value_dtype(arr: np.ndarray) -> str:
    """The IR dtype of a numpy value: object/``U``/``S`` arrays hold strings (docs/strings.md)."""
    return "string" if arr.dtype.kind in "OUS" else arr.dtype.name


class Type:
    """Base class of IR types."""


@dataclass(frozen=True)
class TensorType(Type):
    """A tensor with a static shape and a dtype, e.g. ``TensorType((1, 3), "float32")``."""

    shape: tuple[int, ...]
    dtype: str

    def __post_init__(self) -> None:
        shape = tuple(int(d) for d in self.shape)
        if any(d < 0 for d in shape):
            raise IRError(f"negative dimension in shape {shape}")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", canonical_dtype(self.dtype))

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __str__(self) -> str:
        dims = ", ".join(str(d) for d in self.shape)
        return f"Tensor[({dims}), {self.dtype}]"


@dataclass(frozen=True)
class TupleType(Type):
    """A tuple of types (the result of an op with several outputs)."""

    fields: tuple[Type, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(self.fields))

    def __str__(self) -> str:
        return "(" + ", ".join(str(f) for f in self.fields) + ")"


def tensor_type_of(array: np.ndarray) -> TensorType:
    """The TensorType describing a numpy array."""
    return TensorType(tuple(array.shape), canonical_dtype(array.dtype))


def as_tensor_type(ty: Type, what: str) -> TensorType:
    """Return ``ty`` if it is a TensorType, else raise an IRError mentioning ``what``."""
    if not isinstance(ty, TensorType):
        raise IRError(f"{what}: expected a tensor, got {ty}")
    return ty
