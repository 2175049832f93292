"""Stage 6 for the regions of a composite target: each region goes through its kind's hooks.

A region (a function with attribute ``Compiler=<kind>``, made by
:mod:`ember.transform.partition`) is lowered by the first of these that applies:

* ``relay_to_runtime(region, name, target) -> Artifacts``: a complete external compiler
  makes the artifacts, loaded by the ``runtime.module.loadbinary_<loader>`` they name;
  ``constant_updater(region, name, target) -> {name: array}`` returns the constants that
  artifact owns, stored as its own artifact for that loader (not in ``params.bin``);
* ``relay_to_tir(region, name, target) -> PrimFunc`` (or ``(PrimFunc, artifacts)``: the
  support code its ``call_extern`` calls, e.g. a library shim, deduplicated by the driver):
  loop IR; without a ``tir_to_runtime`` of its own it joins the host module (the memory
  planner sees it);
* neither: ember's own lowering of the region;

then, with the kind's ``tir_to_runtime``, the PrimFunc becomes the kind's artifacts.

Artifacts that are not native code come with a **stub**: a host kernel with the region's
name that calls the global function ``art.metadata["symbol"]`` (set by the driver, unique
per content), which the kind's loader must register when it loads them. Both executors call
the stub like any kernel, so the graph and the AOT executor run external regions alike.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import numpy as np

from ember.driver.lowered import as_artifacts
from ember.errors import CompileError
from ember.formats.params import save_params
from ember.ir.expr import Function
from ember.ir.types import TensorType, TupleType, Type
from ember.lowering.lower_group import lower_group
from ember.runtime.artifact import (
    CONSTANTS_SUFFIX,
    KERNEL_KEY,
    NATIVE_LOADER,
    SYMBOL_KEY,
    Artifact,
)
from ember.runtime.libruntime import header_path, include_dir
from ember.runtime.registry import get_global_func
from ember.target import Target
from ember.tir import AssertStmt, Buffer, PrimFunc, call_cpacked, decl_buffer, eq, seq


def lower_region(
    group: Function, name: str, ext: Target, host: Target
) -> tuple[PrimFunc | None, list[Artifact]]:
    """One region -> (a PrimFunc for the host module or None, artifacts of the kind)."""
    to_runtime = ext.hook("relay_to_runtime")
    if to_runtime is not None:
        made = as_artifacts(get_global_func(to_runtime)(group, name, ext), to_runtime)
        made += _constants(group, name, ext, made)
        return _with_stub(group, name, made)
    to_tir = ext.hook("relay_to_tir")
    func = get_global_func(to_tir)(group, name, ext) if to_tir else lower_group(group, name, host)
    support: list[Artifact] = []
    if isinstance(func, tuple) and len(func) == 2:
        func, support = func[0], as_artifacts(func[1], str(to_tir))
    if not isinstance(func, PrimFunc):
        raise CompileError(f"relay_to_tir hook {to_tir!r} must return a PrimFunc, got {func!r}")
    build = ext.hook("tir_to_runtime")
    if build is None:
        return func, support  # joins the host module
    made = as_artifacts(get_global_func(build)([func], ext), build)
    if all(a.loader == NATIVE_LOADER for a in made):
        return None, made  # linked into the host library: the kernel symbol exists
    return _with_stub(group, name, made)


def _constants(group: Function, name: str, ext: Target, made: list[Artifact]) -> list[Artifact]:
    hook = ext.hook("constant_updater")
    if hook is None or not made:
        return []
    consts = get_global_func(hook)(group, name, ext)
    if not isinstance(consts, Mapping):
        raise CompileError(
            f"constant_updater hook {hook!r} must return a mapping name -> array for a region"
        )
    if not consts:
        return []
    blob = save_params({k: np.asarray(v) for k, v in consts.items()})
    first = made[0]
    return [Artifact(first.codegen_id, first.loader, name + CONSTANTS_SUFFIX, blob)]


def _with_stub(group: Function, name: str, made: list[Artifact]) -> tuple[PrimFunc, list[Artifact]]:
    """Tag the artifacts with the symbol their loader registers; the host stub calling it."""
    digest = hashlib.sha256(b"".join(a.sha256.encode() for a in made)).hexdigest()[:16]
    symbol = f"ember.ext.{name}.{digest}"
    tagged = [
        a
        if a.loader == NATIVE_LOADER
        else Artifact(
            a.codegen_id,
            a.loader,
            a.file_name,
            a.content,
            {**a.metadata, SYMBOL_KEY: symbol, KERNEL_KEY: name},
        )
        for a in made
    ]
    bufs = region_buffers(group, name, "a")
    trampoline = f"ember_ext_{name}"
    body = AssertStmt(eq(call_cpacked(trampoline, *(b.data for b in bufs)), 0), "", seq())
    stub = PrimFunc(name, tuple(bufs), body)
    loader = next(a.loader for a in made if a.loader != NATIVE_LOADER)
    header = header_path().relative_to(include_dir()).as_posix()
    source = _STUB_C.format(fn=trampoline, symbol=symbol, loader=loader, header=header)
    codegen_id = made[0].codegen_id
    c_file = Artifact(codegen_id, NATIVE_LOADER, f"{name}_stub.c", source.encode())
    return stub, [*tagged, c_file]


def region_buffers(group: Function, name: str, prefix: str = "arg") -> list[Buffer]:
    """One buffer per tensor of a region's kernel: its parameters, then its outputs
    (``<prefix>0``, ``<prefix>1``...), the order the executors pass them in."""
    types = [p.type for p in group.params] + _flat(group.ret_type)
    bufs = []
    for i, ty in enumerate(types):
        if not isinstance(ty, TensorType):
            raise CompileError(f"region '{name}': tensor {i} has type {ty}, not a tensor type")
        bufs.append(decl_buffer(ty.shape, ty.dtype, f"{prefix}{i}"))
    return bufs


def _flat(ty: Type) -> list[Type]:
    return [t for f in ty.fields for t in _flat(f)] if isinstance(ty, TupleType) else [ty]


_STUB_C = """#include <{header}>
/* calls the external kernel that loader '{loader}' registered as '{symbol}' */
int32_t {fn}(EmberValue* args, int32_t* codes, int32_t n, EmberValue* rv, int32_t* rc,
             void* resource) {{
  static EmberFunctionHandle f = NULL;
  (void)resource;
  if (f == NULL) {{
    if (EmberFuncGetGlobal("{symbol}", &f) != 0) return -1;
    if (f == NULL) {{
      EmberAPISetLastError("external kernel '{symbol}' is not registered: load the model "
                           "with ember.load_module after importing the back end that "
                           "registers runtime.module.loadbinary_{loader}");
      return -1;
    }}
  }}
  return EmberFuncCall(f, args, codes, n, rv, rc);
}}
"""
