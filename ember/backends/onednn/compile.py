"""onednn relay_to_runtime and constant_updater: a region -> a primitive description.

The artifact is JSON (loader ``onednn``), not code: the operation (``matmul`` or ``conv``),
the operand shapes and strides, the post-ops, and for each operand where its data comes
from at run time (``{"param": i}``, the i-th tensor the kernel is called with, or
``{"const": key}``, a constant). The constants are not in the JSON nor in the model's
parameters: ``constant_updater`` returns them and the driver stores them as the
artifact's companion ``<kernel>.constants`` for the same loader.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from ember.errors import CompileError
from ember.ir.expr import Call, Constant, Expr, Function, Var, post_order
from ember.ir.op import OpDef
from ember.ir.types import TensorType
from ember.runtime.artifact import Artifact
from ember.target import Target

LOADER = "onednn"


def _f32(*types: object) -> bool:
    return all(isinstance(t, TensorType) and t.dtype == "float32" for t in types)


def _bias_ok(calls: Sequence[Call], shape: tuple[int, ...]) -> bool:
    """A second call must be ``add(prev, constant bias)`` broadcasting per channel."""
    if len(calls) < 2 or calls[1].op.name != "add":  # type: ignore[union-attr]
        return True
    add = calls[1]
    bias = add.args[1] if add.args[0] is calls[0] else add.args[0]
    return isinstance(bias, Constant) and _f32(bias.type) and tuple(bias.type.shape) == shape


def conv_ok(calls: Sequence[Call]) -> bool:
    """2-D float32 NCHW convolution, one group, optional (C, 1, 1) bias and relu."""
    conv = calls[0]
    x, w, y = conv.args[0].type, conv.args[1].type, conv.type
    if not (_f32(x, w, y) and isinstance(y, TensorType) and y.ndim == 4):
        return False
    if dict(conv.attrs).get("data_layout", "NCHW") != "NCHW":  # convert_layout's NHWC
        return False
    return conv.attrs["groups"] == 1 and _bias_ok(calls, (int(y.shape[1]), 1, 1))


def matmul_ok(calls: Sequence[Call]) -> bool:
    """float32 matmul/dense of >= 2-D operands, equal batch or 2-D weights, bias of N."""
    mm = calls[0]
    a, b, y = mm.args[0].type, mm.args[1].type, mm.type
    if not (_f32(a, b, y) and isinstance(a, TensorType) and isinstance(b, TensorType)):
        return False
    assert isinstance(y, TensorType)
    if a.ndim < 2 or b.ndim < 2 or (b.ndim > 2 and a.shape[:-2] != b.shape[:-2]):
        return False
    return _bias_ok(calls, (int(y.shape[-1]),))


def constants(group: Function, name: str, target: Target) -> dict[str, np.ndarray]:
    """constant_updater: the region's constants, under the keys its description uses."""
    return {_key(name, i): np.asarray(c.data) for i, c in enumerate(_consts(group))}


def relay_to_runtime(group: Function, name: str, target: Target) -> list[Artifact]:
    """The region's primitive description as a JSON artifact for the ``onednn`` loader."""
    calls = [n for n in post_order(group.body) if isinstance(n, Call)]
    ops = [c.op.name for c in calls if isinstance(c.op, OpDef)]
    consts = {id(c): _key(name, i) for i, c in enumerate(_consts(group))}
    params = {id(p): i for i, p in enumerate(group.params)}

    def source(e: Expr) -> dict[str, Any]:
        if isinstance(e, Var) and id(e) in params:
            return {"param": params[id(e)]}
        if id(e) in consts:
            return {"const": consts[id(e)]}
        raise CompileError(f"onednn region '{name}': operand {e!r} is neither input nor constant")

    first = calls[0]
    if ops[1:] not in ([], ["add"], ["relu"], ["add", "relu"]):
        raise CompileError(
            f"onednn region '{name}' holds {ops}; one primitive takes one op with an optional "
            "bias add and relu (its pattern table is registered with merge=False)"
        )
    desc: dict[str, Any] = {"relu": ops[-1] == "relu", "dst": {"param": len(group.params)}}
    bias = next((c for c in calls if isinstance(c.op, OpDef) and c.op.name == "add"), None)
    if bias is not None:
        desc["bias"] = source(bias.args[1] if bias.args[0] is first else bias.args[0])
    x, w = first.args[0].type, first.args[1].type
    assert isinstance(x, TensorType) and isinstance(w, TensorType)
    y = first.type
    assert isinstance(y, TensorType)
    desc.update(src=source(first.args[0]), weights=source(first.args[1]), dst_shape=y.shape)
    if ops[0] == "nn.conv":
        nsp = len(y.shape) - 2
        pads = list(first.attrs["padding"]) or [0] * (2 * nsp)
        desc.update(
            op="conv",
            src_shape=x.shape,
            weights_shape=w.shape,
            strides=list(first.attrs["strides"]) or [1] * nsp,
            dilates=[d - 1 for d in first.attrs["dilation"]] or [0] * nsp,
            padding_l=pads[:nsp],
            padding_r=pads[nsp:],
        )
    else:
        k, n = int(x.shape[-1]), int(y.shape[-1])
        batch = tuple(y.shape[:-2])
        wshape = (*((1,) * len(batch) if w.ndim == 2 else batch), k, n)
        # dense's (N, K) weight read as (K, N) through strides
        dense = ops[0] == "nn.dense"
        wstrides = (*_strides(wshape)[:-2], 1, k) if dense else _strides(wshape)
        desc.update(op="matmul", src_shape=x.shape, weights_shape=wshape)
        desc.update(weights_strides=wstrides)
    return [Artifact("onednn", LOADER, f"{name}.json", json.dumps(desc, indent=1).encode())]


def _strides(shape: Sequence[int]) -> tuple[int, ...]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= int(d)
    return tuple(reversed(out))


def _consts(group: Function) -> list[Constant]:
    return [n for n in post_order(group.body) if isinstance(n, Constant) and n.type.size > 1]


def _key(name: str, i: int) -> str:
    return f"{name}.c{i}"
