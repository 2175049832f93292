"""The ``llvm`` and ``llvmjit`` target kinds: options (declared once) and hooks.

Importing this module registers both kinds through the public calls an external back
end uses; the package's ``ember.target_kinds`` entry points name this module.

Example::

    Target.create("llvm -mcpu=skylake-avx512 -opt-level=3")
    Target.create("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72")   # cross objects
    Target.create("llvmjit")                                            # in memory
"""

from __future__ import annotations

from typing import Any

from ember.codegen.c.metadata import metadata_sources
from ember.codegen.c.target import _at_least, _cpu_name
from ember.codegen.llvm.build import CODEGEN_ID, JIT_CODEGEN_ID, build_llvm, build_llvmjit
from ember.codegen.llvm.cpu import target_cpu
from ember.codegen.llvm.machine import check_triple
from ember.runtime.registry import register_func
from ember.target import TargetKind, TargetOption, register_target_kind
from ember.target.kind import DEVICE_CPU

BUILD_FUNC = "target.build.llvm"
JIT_BUILD_FUNC = "target.build.llvmjit"


def _triple(value: Any) -> str | None:
    return check_triple(value) if value else None


def _attrs(value: Any) -> str | None:
    for item in filter(None, (x.strip() for x in value.split(","))):
        if item[0] not in "+-":
            return f"needs '+' or '-' before each feature (e.g. +avx2,-fma); {item!r} has none"
    return None


LLVM_OPTIONS = {
    "mcpu": TargetOption(
        str, "native", "CPU to generate code for (LLVM's names; native: this one)", _cpu_name
    ),
    "mtriple": TargetOption(str, "", "target triple (empty: this process's)", _triple),
    "mattr": TargetOption(str, "", "CPU features to add or remove: +avx2,-fma", _attrs),
    "opt-level": TargetOption(int, 3, "LLVM optimisation level (0-3)", _at_least(0, 3)),
    "num-threads": TargetOption(
        int, 0, "threads for parallel loops (0: the runtime's)", _at_least(0)
    ),
    "jobs": TargetOption(
        int,
        0,
        "processes compiling a big build's modules (0: one per core; 1: only this one)",
        _at_least(0),
    ),
    "export-unpacked": TargetOption(
        bool, False, "export each kernel's unpacked function too (not only its wrapper)"
    ),
}

register_func(BUILD_FUNC, build_llvm)
register_func(BUILD_FUNC + ".metadata", metadata_sources)
register_func(JIT_BUILD_FUNC, build_llvmjit)
for _kind, _hook, _doc in (
    (CODEGEN_ID, BUILD_FUNC, "LLVM object files for any triple LLVM knows, linked like C."),
    (JIT_CODEGEN_ID, JIT_BUILD_FUNC, "LLVM JIT in this process: no file, linker or C compiler."),
):
    register_target_kind(
        TargetKind(
            _kind,
            device_type=DEVICE_CPU,
            options=LLVM_OPTIONS,
            hooks={"tir_to_runtime": _hook},
            keys=("llvm",),  # its own register tiles (ops/nn_schedule_tiles.TILES)
            cpu=target_cpu,  # -mcpu read with -mtriple and -mattr
            doc=_doc,
        )
    )
