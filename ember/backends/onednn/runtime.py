"""The ``onednn`` loader: primitive descriptions (+ their constants) -> registered kernels.

``runtime.module.loadbinary_onednn(artifacts)`` builds one oneDNN primitive per JSON
artifact, binds its constants (from the ``<kernel>.constants`` artifact) once, and
registers a global function under the artifact's ``symbol``; the host stub of the kernel
calls it with the kernel's tensors (inputs, then the output).
"""

from __future__ import annotations

import json
from ctypes import byref, c_void_p
from typing import Any

import numpy as np

from ember.backends.onednn import capi
from ember.errors import ModuleLoadError
from ember.formats.params import load_params
from ember.runtime.artifact import CONSTANTS_SUFFIX, SYMBOL_KEY, Artifact
from ember.runtime.module import Module, PythonModule
from ember.runtime.ndarray import NDArray
from ember.runtime.registry import register_func


class _Context:
    """One CPU engine and stream for the process."""

    def __init__(self) -> None:
        self.lib = capi.library()
        self.engine, self.stream = c_void_p(), c_void_p()
        capi.check(self.lib.dnnl_engine_create(byref(self.engine), capi.DNNL_CPU, 0), "engine")
        capi.check(
            self.lib.dnnl_stream_create(byref(self.stream), self.engine, capi.DNNL_STREAM_IN_ORDER),
            "stream",
        )


_CTX: list[_Context] = []


def _context() -> _Context:
    if not _CTX:
        _CTX.append(_Context())
    return _CTX[0]


class Primitive:
    """A oneDNN primitive built from one description, callable with the kernel's tensors."""

    def __init__(self, desc: dict[str, Any], consts: dict[str, np.ndarray]) -> None:
        self.ctx = ctx = _context()
        lib = ctx.lib
        self.keep: list[Any] = []  # constants and memory objects live as long as the kernel
        self.bound: list[tuple[int, c_void_p]] = []  # (param index, memory)
        args: list[tuple[int, c_void_p]] = []
        mds: dict[int, c_void_p] = {}
        dst_shape = desc["dst_shape"]
        shapes = {capi.ARG_SRC: desc["src_shape"], capi.ARG_WEIGHTS: desc["weights_shape"]}
        shapes[capi.ARG_DST] = dst_shape
        strides = {capi.ARG_WEIGHTS: desc.get("weights_strides")}
        if "bias" in desc:
            nd = len(dst_shape)
            shapes[capi.ARG_BIAS] = (
                [dst_shape[1]] if desc["op"] == "conv" else [1] * (nd - 1) + [dst_shape[-1]]
            )
        for arg, shape in shapes.items():
            md = c_void_p()
            st = strides.get(arg) or _strides(shape)
            capi.check(
                lib.dnnl_memory_desc_create_with_strides(
                    byref(md), len(shape), capi.dims(shape), capi.DNNL_F32, capi.dims(st)
                ),
                "memory desc",
            )
            mds[arg] = md
        attr = c_void_p()
        capi.check(lib.dnnl_primitive_attr_create(byref(attr)), "attr")
        if desc["relu"]:
            post = c_void_p()
            capi.check(lib.dnnl_post_ops_create(byref(post)), "post ops")
            capi.check(
                lib.dnnl_post_ops_append_eltwise(post, capi.DNNL_ELTWISE_RELU, 0.0, 0.0), "relu"
            )
            capi.check(lib.dnnl_primitive_attr_set_post_ops(attr, post), "set post ops")
        pd = c_void_p()
        bias_md = mds.get(capi.ARG_BIAS)
        src, wei, dst = mds[capi.ARG_SRC], mds[capi.ARG_WEIGHTS], mds[capi.ARG_DST]
        if desc["op"] == "conv":
            status = lib.dnnl_convolution_forward_primitive_desc_create(
                byref(pd), ctx.engine, capi.DNNL_FORWARD_INFERENCE, capi.DNNL_CONVOLUTION_DIRECT,
                src, wei, bias_md, dst, capi.dims(desc["strides"]), capi.dims(desc["dilates"]),
                capi.dims(desc["padding_l"]), capi.dims(desc["padding_r"]), attr,
            )  # fmt: skip
        else:
            status = lib.dnnl_matmul_primitive_desc_create(
                byref(pd), ctx.engine, src, wei, bias_md, dst, attr
            )
        capi.check(status, f"{desc['op']} primitive description")
        self.prim = c_void_p()
        capi.check(lib.dnnl_primitive_create(byref(self.prim), pd), "primitive")
        roles = {capi.ARG_SRC: "src", capi.ARG_WEIGHTS: "weights", capi.ARG_DST: "dst"}
        if "bias" in desc:
            roles[capi.ARG_BIAS] = "bias"
        for arg, role in roles.items():
            mem = c_void_p()
            capi.check(lib.dnnl_memory_create(byref(mem), mds[arg], ctx.engine, None), "memory")
            where = desc[role]
            if "const" in where:
                data = np.ascontiguousarray(consts[where["const"]], dtype="float32")
                self.keep.append(data)
                capi.check(lib.dnnl_memory_set_data_handle(mem, data.ctypes.data), "bind const")
            else:
                self.bound.append((int(where["param"]), mem))
            args.append((arg, mem))
        self.exec_args = (capi.ExecArg * len(args))(*(capi.ExecArg(a, m) for a, m in args))

    def __call__(self, *tensors: NDArray) -> None:
        lib = self.ctx.lib
        for index, mem in self.bound:
            capi.check(lib.dnnl_memory_set_data_handle(mem, tensors[index].data_ptr), "bind")
        n = len(self.exec_args)
        capi.check(
            lib.dnnl_primitive_execute(self.prim, self.ctx.stream, n, self.exec_args), "execute"
        )
        capi.check(lib.dnnl_stream_wait(self.ctx.stream), "stream wait")


def _strides(shape: list[int]) -> list[int]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= int(d)
    return list(reversed(out))


def loadbinary(artifacts: list[Artifact]) -> Module:
    """runtime.module.loadbinary_onednn: build and register every described kernel."""
    consts: dict[str, np.ndarray] = {}
    for art in artifacts:
        if art.file_name.endswith(CONSTANTS_SUFFIX):
            consts.update(load_params(art.content))
    funcs: dict[str, Primitive] = {}
    for art in artifacts:
        if not art.file_name.endswith(".json"):
            continue
        symbol = art.metadata.get(SYMBOL_KEY)
        if not isinstance(symbol, str):
            raise ModuleLoadError(
                f"onednn artifact {art.file_name} has no '{SYMBOL_KEY}'; rebuild the model"
            )
        prim = Primitive(json.loads(art.content), consts)
        register_func(symbol, prim, override=True)
        funcs[symbol] = prim
    return PythonModule(funcs, type_key="onednn")
