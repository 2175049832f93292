"""Shared helpers of the built-in op families: broadcasting, axis normalisation, dtype
checks, spatial attributes and padding, and the precision policy of the numpy references.

Type rules use these to raise :class:`ember.errors.IRError` with precise messages;
references use :func:`compute_dtype` so half-precision inputs are computed in float32 and
rounded once, as onnxruntime does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import ml_dtypes
import numpy as np

from ember.errors import IRError
from ember.ir.op import Attrs
from ember.ir.types import TensorType, Type, as_tensor_type
from ember.support import dtypes

FLOAT_DTYPES: frozenset[str] = frozenset(dtypes.names_of("float"))
SIGNED_DTYPES: frozenset[str] = frozenset(dtypes.names_of("int"))
UNSIGNED_DTYPES: frozenset[str] = frozenset(dtypes.names_of("uint"))
INT_DTYPES: frozenset[str] = SIGNED_DTYPES | UNSIGNED_DTYPES
NUMERIC_DTYPES: frozenset[str] = FLOAT_DTYPES | INT_DTYPES
ALL_DTYPES: frozenset[str] = frozenset(dtypes.names_of())
INDEX_DTYPES: frozenset[str] = frozenset({"int32", "int64"})


def broadcast_shapes(*shapes: Sequence[int], what: str = "") -> tuple[int, ...]:
    """The numpy/ONNX multidirectional broadcast of ``shapes``; IRError (naming ``what``, when
    given) if they are incompatible."""
    ndim = max((len(s) for s in shapes), default=0)
    out: list[int] = []
    for i in range(ndim):
        dims = {s[len(s) - ndim + i] for s in shapes if len(s) - ndim + i >= 0}
        dims.discard(1)
        if len(dims) > 1:
            listed = " and ".join(str(tuple(s)) for s in shapes)
            raise IRError(
                f"{what + ': ' if what else ''}cannot broadcast shapes {listed}: sizes "
                f"{sorted(dims)} of output dimension {i} do not broadcast; each dimension "
                "must match or be 1"
            )
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def normalize_axis(axis: int, ndim: int, what: str = "axis") -> int:
    """``axis`` in ``[-ndim, ndim)`` mapped to ``[0, ndim)``; IRError otherwise."""
    if not -ndim <= axis < ndim:
        raise IRError(f"{what} {axis} is out of range for a tensor of rank {ndim}")
    return axis + ndim if axis < 0 else axis


def normalize_axes(axes: Iterable[int], ndim: int, what: str = "axes") -> tuple[int, ...]:
    """Axes mapped to ``[0, ndim)`` and sorted; IRError on out-of-range or repeated axes."""
    out = [normalize_axis(a, ndim, what) for a in axes]
    if len(set(out)) != len(out):
        raise IRError(f"{what} {tuple(axes)} repeat an axis")
    return tuple(sorted(out))


def check_normalized_axes(axes: Sequence[int], ndim: int, op: str) -> None:
    """IRError unless ``axes`` are sorted, unique and within ``[0, ndim)``."""
    if list(axes) != sorted(set(axes)) or any(not 0 <= a < ndim for a in axes):
        raise IRError(
            f"axes {tuple(axes)} must be sorted, unique and in [0, {ndim}) for a rank-{ndim} "
            f"input of '{op}'; normalise them with ember.ir.ops.common.normalize_axes"
        )


def check_dtype(ty: Type, allowed: frozenset[str], what: str) -> TensorType:
    """The tensor type ``ty`` if its dtype is in ``allowed``; IRError naming ``what``."""
    tt = as_tensor_type(ty, what)
    if tt.dtype not in allowed:
        raise IRError(f"{what} has dtype {tt.dtype}; expected one of {', '.join(sorted(allowed))}")
    return tt


def check_same_dtype(types: Sequence[TensorType], what: str) -> str:
    """The common dtype of ``types``; IRError if they differ."""
    dtypes = [t.dtype for t in types]
    if len(set(dtypes)) > 1:
        raise IRError(f"{what} must have the same dtype, got {', '.join(dtypes)}; insert a cast")
    return dtypes[0]


def compute_dtype(dtype: str) -> np.dtype:
    """The numpy dtype a reference computes in: float32 for 16-bit floats, else ``dtype``."""
    if dtypes.is_half(dtype):
        return np.dtype("float32")
    return np.dtype(dtype)


def np_dtype(dtype: str) -> np.dtype:
    """The numpy dtype of a canonical dtype name (bfloat16 through ml_dtypes)."""
    return dtypes.numpy_dtype(dtype)


def float_map(fn: Callable[[np.ndarray], np.ndarray], x: np.ndarray) -> np.ndarray:
    """Apply ``fn`` to ``x`` computed in :func:`compute_dtype` precision; keep x's dtype."""
    dtype = x.dtype
    with np.errstate(all="ignore"):
        out = fn(np.asarray(x, dtype=compute_dtype(dtype.name)))
    return np.asarray(out).astype(dtype, copy=False)


def trunc_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division rounding toward zero; division by zero yields 0 (it is UB in ONNX)."""
    safe = np.where(b == 0, np.ones_like(b), b)
    q = a // safe
    r = a - q * safe
    fix = (r != 0) & ((a < 0) != (safe < 0))
    q = q + fix.astype(q.dtype)
    return np.where(b == 0, np.zeros_like(q), q)


def tensor_arg(types: Sequence[Type], index: int, what: str) -> TensorType:
    """The ``index``-th input type, which must be a tensor (``what`` names it in errors)."""
    return as_tensor_type(types[index], what)


def check_data_dtype(ref: TensorType, other: TensorType, what: str) -> None:
    """Raise IRError unless ``other`` has the dtype of ``ref``."""
    if other.dtype != ref.dtype:
        raise IRError(f"{what} has dtype {other.dtype} but data has dtype {ref.dtype}")


def check_float(ty: TensorType, what: str) -> None:
    """Raise IRError unless ``ty`` is a floating point tensor."""
    if not dtypes.is_float(ty.dtype):
        raise IRError(f"{what} must be a floating point tensor, got {ty.dtype}")


def spatial(attrs: Attrs, name: str, nsp: int, default: int) -> tuple[int, ...]:
    """Attribute ``name`` as one value per spatial axis; an empty value means ``default``."""
    value = tuple(attrs[name])
    if not value:
        return (default,) * nsp
    if len(value) != nsp:
        raise IRError(f"attribute '{name}' has {len(value)} values, expected {nsp} (one per axis)")
    if name in ("strides", "dilation") and any(v < 1 for v in value):
        raise IRError(f"attribute '{name}' must be positive, got {list(value)}")
    return value


def padding(attrs: Attrs, nsp: int, name: str = "padding") -> tuple[tuple[int, int], ...]:
    """The ``(begin, end)`` padding of each spatial axis from ``begin..., end...``."""
    value = tuple(attrs[name])
    if not value:
        return ((0, 0),) * nsp
    if len(value) != 2 * nsp:
        raise IRError(
            f"attribute '{name}' has {len(value)} values, expected {2 * nsp} "
            f"(begin then end for each of {nsp} spatial axes)"
        )
    return tuple((value[i], value[i + nsp]) for i in range(nsp))


def widen(x: np.ndarray) -> np.ndarray:
    """``x`` in its :func:`compute_dtype` (float32 for half types; no copy when it already is)."""
    return x.astype(compute_dtype(x.dtype.name), copy=False)


def pad_or_crop(
    x: np.ndarray, pads: Sequence[tuple[int, int]], value: float | int = 0
) -> np.ndarray:
    """Pad the trailing ``len(pads)`` axes of ``x`` (negative amounts crop instead)."""
    lead = x.ndim - len(pads)
    crop = [slice(None)] * lead
    grow = [(0, 0)] * lead
    for size, (b, e) in zip(x.shape[lead:], pads, strict=True):
        crop.append(slice(max(-b, 0), size - max(-e, 0)))
        grow.append((max(b, 0), max(e, 0)))
    x = x[tuple(crop)]
    if any(g != (0, 0) for g in grow):
        x = np.pad(x, grow, mode="constant", constant_values=value)
    return x


# --- data layouts of the convolutions (attribute ``data_layout``) ---------------------------

#: ONNX's channels-first layout and the channels-last one the convert_layout pass plans.
DATA_LAYOUTS: tuple[str, ...] = ("NCHW", "NHWC")


def channels_last_axes(ndim: int) -> tuple[int, ...]:
    """The transpose axes (N, C, *sp) -> (N, *sp, C)."""
    return (0, *range(2, ndim), 1)


def channels_first_axes(ndim: int) -> tuple[int, ...]:
    """The transpose axes (N, *sp, C) -> (N, C, *sp)."""
    return (0, ndim - 1, *range(1, ndim - 1))


def data_layout(attrs: Attrs) -> str:
    """An op's ``data_layout`` attribute ("NCHW" when it has none); IRError if unknown."""
    layout = str(dict(attrs).get("data_layout", "NCHW"))
    if layout not in DATA_LAYOUTS:
        raise IRError(f"unknown data_layout {layout!r}; known: {', '.join(DATA_LAYOUTS)}")
    return layout


def layout_rule(rule: Callable[[Sequence[Type], Attrs], Type]) -> Callable[..., Type]:
    """The type rule ``rule`` of channels-first data (operand 0) extended to data_layout
    "NHWC": the data and the result channels last."""

    def infer(types: Sequence[Type], attrs: Attrs) -> Type:
        if data_layout(attrs) == "NCHW":
            return rule(types, attrs)
        data = tensor_arg(types, 0, "data")
        axes = channels_first_axes(data.ndim)
        first = TensorType(tuple(data.shape[a] for a in axes), data.dtype)
        out = as_tensor_type(rule([first, *types[1:]], attrs), "convolution")
        back = channels_last_axes(out.ndim)
        return TensorType(tuple(out.shape[a] for a in back), out.dtype)

    return infer


def layout_reference(
    ref: Callable[[Sequence[np.ndarray], Attrs], np.ndarray],
) -> Callable[[Sequence[np.ndarray], Attrs], np.ndarray]:
    """The numpy reference ``ref`` of channels-first data extended to data_layout "NHWC"."""

    def run(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        if data_layout(attrs) == "NCHW":
            return ref(xs, attrs)
        x = np.transpose(xs[0], channels_first_axes(xs[0].ndim))
        out = ref([x, *xs[1:]], attrs)
        return np.ascontiguousarray(np.transpose(out, channels_last_axes(out.ndim)))

    return run


def quant_range(dtype: str) -> tuple[int, int]:
    """The smallest and largest value of the integer ``dtype`` (int4: -8 and 7)."""
    info = ml_dtypes.iinfo(np_dtype(dtype))
    return int(info.min), int(info.max)
