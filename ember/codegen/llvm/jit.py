"""llvmjit at run time: an in-memory artifact whose load() maps its JIT object code.

The build emitted object code for this process (the JIT code model); the first
``load()`` hands it to an MCJIT engine, which relocates it in memory (later loads share
the engine); the runtime API functions the kernels call are given to LLVM by address
from the already loaded runtime library, libc and libm come from the process. The
module's functions are the packed entry points, called like any library's.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import llvmlite.binding as llvm

from ember.codegen.llvm.machine import MachineSpec, new_machine
from ember.codegen.llvm.tiles import AVX512_KERNEL_NAMES, TILE_KERNEL_NAMES
from ember.runtime import c_api
from ember.runtime.artifact import InMemoryArtifact
from ember.runtime.module import Module
from ember.runtime.packed_func import CPackedFunc, PackedFunc

#: the runtime functions generated code calls (codegen.RUNTIME_DECLS, the wrapper, externs).
RUNTIME_SYMBOLS = (
    "EmberAPISetLastError",
    "EmberBackendAllocWorkspace",
    "EmberBackendFreeWorkspace",
    "EmberBackendParallelLaunch",
    # the seeded random kernels (ember/runtime/src/random_kernels.h), called by ember.ops.random
    "ember_rng_uniform",
    "ember_rng_normal",
    "ember_rng_bernoulli",
    "ember_rng_multinomial",
    # the string functions (ember/runtime/src/string_kernels.h), called by ember.ops.strings
    "ember_str_equal",
    "ember_str_concat",
    "ember_str_regex_full_match",
    "ember_str_change_case",
    "ember_str_label_encode",
    # the float32 tile kernels (ember/runtime/src/f32_tiles.h), called by ember.ops.nn_conv_f32
    *TILE_KERNEL_NAMES,
    *AVX512_KERNEL_NAMES,  # their AVX-512 copies (tiles.tile_symbol)
)


@dataclass(frozen=True, eq=False)
class LLVMJitArtifact(InMemoryArtifact):
    """An ``llvmjit`` artifact: loads itself, keeps its bitcode for inspection."""

    bitcode: bytes = b""
    triple: str = ""
    cpu: str = ""


class JitModule(Module):
    """The packed functions of one MCJIT engine."""

    type_key = "llvmjit"

    def __init__(self, engine: Any, names: tuple[str, ...]) -> None:
        super().__init__()
        self._engine = engine
        self._names = names

    def _get_function(self, name: str) -> PackedFunc | None:
        if name not in self._names:
            return None
        address = self._engine.get_function_address(name)
        if not address:
            return None
        return CPackedFunc(address, owner=self, name=name)

    def function_names(self) -> list[str]:
        """The packed entry points this module exports."""
        return sorted(self._names)

    def __repr__(self) -> str:
        return f"JitModule({len(self._names)} functions)"


def _register_runtime_symbols() -> None:
    lib = c_api.lib()
    for name in RUNTIME_SYMBOLS:
        address = ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
        if address:
            llvm.add_symbol(name, address)


def jit_loader(obj: bytes, spec: MachineSpec, names: tuple[str, ...]) -> Callable[[], Module]:
    """A ``load()`` for the artifact: map the object code once, then a JitModule per call."""
    state: dict[str, Any] = {}
    lock = threading.Lock()

    def load() -> Module:
        with lock:
            engine = state.get("engine")
            if engine is None:
                _register_runtime_symbols()
                empty = llvm.parse_assembly("")
                empty.triple = spec.triple
                engine = llvm.create_mcjit_compiler(empty, new_machine(spec))
                engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
                engine.finalize_object()
                engine.run_static_constructors()
                state["engine"] = engine
        return JitModule(engine, names)

    return load
