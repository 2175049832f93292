"""Layout and data-movement ops (pattern INJECTIVE): ``reshape transpose concatenate split
strided_slice broadcast_to tile nn.pad``.

Shapes are static, so every attribute is explicit and normalised: ``reshape`` takes the
full output shape (no 0 / -1), ``transpose`` a full permutation, axes are non-negative and
``strided_slice`` holds one clamped ``(begin, end, stride)`` per axis (see
:func:`normalize_slice`). ``split`` returns a tuple (pattern INJECTIVE, like TVM).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ember.errors import IRError
from ember.ir.op import Attr, Attrs, OpDef, OpPattern, register_op
from ember.ir.ops.common import (
    ALL_DTYPES,
    broadcast_shapes,
    check_dtype,
    check_normalized_axes,
    check_same_dtype,
)
from ember.ir.types import TensorType, TupleType, Type

PAD_MODES = ("constant", "edge", "reflect", "wrap")


def normalize_slice(begin: int, end: int, stride: int, dim: int) -> tuple[int, int]:
    """ONNX ``Slice`` clamping: the canonical ``(begin, end)`` of one axis of size ``dim``.

    Negative values count from the end; for ``stride > 0`` both land in ``[0, dim]``, for
    ``stride < 0`` in ``[-1, dim - 1]`` (``end == -1`` meaning "through index 0").
    """
    # not idempotent: a canonical end of -1 would be read as "the last element" again
    if stride == 0:
        raise IRError("slice step must not be 0")
    if begin < 0:
        begin += dim
    if end < 0:
        end += dim
    if stride > 0:
        return min(max(begin, 0), dim), min(max(end, 0), dim)
    return min(max(begin, 0), dim - 1), min(max(end, -1), dim - 1)


def slice_length(begin: int, end: int, stride: int) -> int:
    """Number of elements ``begin, begin + stride, ...`` strictly before ``end``."""
    return max(0, -((begin - end) // stride) if stride > 0 else -((end - begin) // -stride))


def _x(types: Sequence[Type], op: str) -> TensorType:
    return check_dtype(types[0], ALL_DTYPES, f"input of '{op}'")


def _reshape_type(types: Sequence[Type], attrs: Attrs) -> Type:
    x = _x(types, "reshape")
    shape = tuple(attrs["newshape"])
    if any(d < 0 for d in shape):
        raise IRError(f"newshape {shape} must be explicit (no -1 or 0 placeholders)")
    if math.prod(shape) != x.size:
        raise IRError(f"cannot reshape {x} ({x.size} elements) to {shape}")
    return TensorType(shape, x.dtype)


def _transpose_type(types: Sequence[Type], attrs: Attrs) -> Type:
    x = _x(types, "transpose")
    axes = tuple(attrs["axes"])
    if sorted(axes) != list(range(x.ndim)):
        raise IRError(f"axes {axes} is not a permutation of range({x.ndim}) for {x}")
    return TensorType(tuple(x.shape[a] for a in axes), x.dtype)


def _concat_type(types: Sequence[Type], attrs: Attrs) -> Type:
    xs = [check_dtype(t, ALL_DTYPES, f"input {i} of 'concatenate'") for i, t in enumerate(types)]
    dtype = check_same_dtype(xs, "inputs of 'concatenate'")
    axis = attrs["axis"]
    first = xs[0]
    check_normalized_axes((axis,), first.ndim, "concatenate")
    total = 0
    for i, t in enumerate(xs):
        other = [d for j, d in enumerate(t.shape) if j != axis]
        want = [d for j, d in enumerate(first.shape) if j != axis]
        if t.ndim != first.ndim or other != want:
            raise IRError(
                f"input {i} has shape {t.shape}, incompatible with {first.shape} "
                f"outside axis {axis}"
            )
        total += t.shape[axis]
    shape = tuple(total if j == axis else d for j, d in enumerate(first.shape))
    return TensorType(shape, dtype)


def _split_type(types: Sequence[Type], attrs: Attrs) -> Type:
    x = _x(types, "split")
    axis = attrs["axis"]
    check_normalized_axes((axis,), x.ndim, "split")
    sizes = tuple(attrs["sizes"])
    if any(s < 0 for s in sizes) or sum(sizes) != x.shape[axis]:
        raise IRError(f"split sizes {sizes} must be >= 0 and sum to {x.shape[axis]} (axis {axis})")
    fields = [
        TensorType(tuple(s if j == axis else d for j, d in enumerate(x.shape)), x.dtype)
        for s in sizes
    ]
    return TupleType(tuple(fields))


def _split_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> tuple[np.ndarray, ...]:
    bounds = np.cumsum(attrs["sizes"])[:-1]
    return tuple(np.split(xs[0], bounds, axis=attrs["axis"]))


def _slice_type(types: Sequence[Type], attrs: Attrs) -> Type:
    x = _x(types, "strided_slice")
    begin, end, strides = attrs["begin"], attrs["end"], attrs["strides"]
    if not len(begin) == len(end) == len(strides) == x.ndim:
        raise IRError(f"begin/end/strides need one entry per axis of {x}")
    shape = []
    for axis, (b, e, s, d) in enumerate(zip(begin, end, strides, x.shape, strict=True)):
        lo, hi = (0, d) if s > 0 else (-1, d - 1)
        if s == 0 or not (lo <= b <= hi and lo <= e <= hi):
            raise IRError(
                f"axis {axis}: ({b}, {e}, {s}) is not normalised for size {d}; "
                "use ember.ir.ops.transform.normalize_slice"
            )
        shape.append(slice_length(b, e, s))
    return TensorType(tuple(shape), x.dtype)


def _slice_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    out = xs[0]
    for axis, (b, e, s) in enumerate(zip(attrs["begin"], attrs["end"], attrs["strides"])):
        idx = b + s * np.arange(slice_length(b, e, s), dtype=np.int64)
        out = np.take(out, idx, axis=axis)
    return out


def _broadcast_type(types: Sequence[Type], attrs: Attrs) -> Type:
    x = _x(types, "broadcast_to")
    shape = tuple(attrs["shape"])
    if broadcast_shapes(x.shape, shape) != shape:
        raise IRError(f"cannot broadcast {x} to {shape}: the result would be bigger")
    return TensorType(shape, x.dtype)


def _tile_type(types: Sequence[Type], attrs: Attrs) -> Type:
    x = _x(types, "tile")
    reps = tuple(attrs["reps"])
    if len(reps) != x.ndim or any(r < 0 for r in reps):
        raise IRError(f"reps {reps} needs {x.ndim} non-negative entries for {x}")
    return TensorType(tuple(d * r for d, r in zip(x.shape, reps, strict=True)), x.dtype)


def _pad_type(types: Sequence[Type], attrs: Attrs) -> Type:
    x = _x(types, "nn.pad")
    width = tuple(attrs["pad_width"])
    mode = attrs["pad_mode"]
    if mode not in PAD_MODES:
        raise IRError(f"pad_mode {mode!r} is unknown; known: {', '.join(PAD_MODES)}")
    if len(width) != 2 * x.ndim or any(w < 0 for w in width):
        raise IRError(f"pad_width {width} needs {2 * x.ndim} non-negative entries for {x}")
    before, after = width[: x.ndim], width[x.ndim :]
    for axis, (b, a, d) in enumerate(zip(before, after, x.shape, strict=True)):
        if mode == "reflect" and (b or a) and max(b, a) >= d:
            raise IRError(f"reflect padding of {max(b, a)} needs axis {axis} longer than {d}")
        if mode in ("edge", "wrap") and (b or a) and d == 0:
            raise IRError(f"{mode} padding of the empty axis {axis} has nothing to copy")
    shape = tuple(d + b + a for d, b, a in zip(x.shape, before, after, strict=True))
    return TensorType(shape, x.dtype)


def _pad_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = xs[0]
    width = attrs["pad_width"]
    pairs = list(zip(width[: x.ndim], width[x.ndim :], strict=True))
    mode = attrs["pad_mode"]
    if mode == "constant":
        value = np.asarray(attrs["pad_value"]).astype(x.dtype)
        return np.pad(x, pairs, mode="constant", constant_values=value)
    return np.pad(x, pairs, mode=mode)


def _register_all() -> None:
    injective = OpPattern.INJECTIVE
    register_op(
        OpDef(
            "reshape",
            1,
            _reshape_type,
            lambda xs, attrs: np.reshape(xs[0], attrs["newshape"]),
            injective,
            {"newshape": Attr("ints", doc="the explicit output shape")},
            doc="same elements in row-major order, another shape",
        )
    )
    register_op(
        OpDef(
            "transpose",
            1,
            _transpose_type,
            lambda xs, attrs: np.transpose(xs[0], attrs["axes"]),
            injective,
            {"axes": Attr("ints", doc="output axis i is input axis axes[i]")},
            doc="permute the axes",
        )
    )
    register_op(
        OpDef(
            "concatenate",
            (1, None),
            _concat_type,
            lambda xs, attrs: np.concatenate(xs, axis=attrs["axis"]),
            injective,
            {"axis": Attr("int", doc="non-negative axis")},
            doc="join tensors along axis",
        )
    )
    register_op(
        OpDef(
            "split",
            1,
            _split_type,
            _split_ref,
            injective,
            {"sizes": Attr("ints", doc="length of each part"), "axis": Attr("int")},
            doc="a tuple of consecutive parts along axis",
        )
    )
    register_op(
        OpDef(
            "strided_slice",
            1,
            _slice_type,
            _slice_ref,
            injective,
            {"begin": Attr("ints"), "end": Attr("ints"), "strides": Attr("ints")},
            doc="out[i] = x[begin + i * stride] on every axis, bounds from normalize_slice",
        )
    )
    register_op(
        OpDef(
            "broadcast_to",
            1,
            _broadcast_type,
            lambda xs, attrs: np.broadcast_to(xs[0], attrs["shape"]).copy(),
            injective,
            {"shape": Attr("ints")},
            doc="repeat size-1 (or missing leading) axes up to shape",
        )
    )
    register_op(
        OpDef(
            "tile",
            1,
            _tile_type,
            lambda xs, attrs: np.tile(xs[0], attrs["reps"]),
            injective,
            {"reps": Attr("ints", doc="repetitions per axis")},
            doc="repeat the whole tensor reps[i] times along axis i",
        )
    )
    register_op(
        OpDef(
            "nn.pad",
            1,
            _pad_type,
            _pad_ref,
            injective,
            {
                "pad_width": Attr("ints", doc="(begin..., end...), non-negative"),
                "pad_value": Attr("float", 0.0),
                "pad_mode": Attr("str", "constant", "constant, edge, reflect or wrap"),
            },
            doc="pad each axis",
        )
    )


_register_all()
