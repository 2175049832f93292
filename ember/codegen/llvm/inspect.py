"""Inspecting LLVM artifacts: the module's IR (``.ll``) and native assembly (``.s``).

An ``llvm`` object carries its optimised bitcode in the ``.llvmbc`` section, an
``llvmjit`` artifact in its ``bitcode`` field; both render as LLVM IR text, and as
assembly for the triple and CPU the build used. The views are registered in the
inspector registry under the artifact's codegen and the view's suffix, so
``ember inspect out/ --show lib0.ll`` (or ``lib0.s``) finds them next to ``lib0.o``.

Example::

    print(ir_text(art))      # "; ModuleID = ..." for llvm/lib0.o or llvmjit/lib0.bc
    print(asm_text(art))     # x86-64 (or the cross target's) assembly
"""

from __future__ import annotations

import llvmlite.binding as llvm

from ember.codegen.llvm.build import CODEGEN_ID, JIT_CODEGEN_ID
from ember.codegen.llvm.jit import LLVMJitArtifact
from ember.codegen.llvm.machine import MachineSpec, emit_assembly
from ember.codegen.llvm.worker import BITCODE_SECTION, init_llvm
from ember.errors import ArtifactError
from ember.runtime.artifact import AnyArtifact, Artifact
from ember.runtime.inspection import INSPECTORS, register_inspector


def object_bitcode(data: bytes) -> bytes | None:
    """The bitcode in the ``.llvmbc`` section of an object file, if it has one."""
    init_llvm()
    try:
        obj = llvm.ObjectFileRef.from_data(data)
    except RuntimeError:
        return None
    for section in obj.sections():
        name = section.name()
        if name is not None and bytes(name).decode(errors="replace") == BITCODE_SECTION:
            return bytes(section.data())
    return None


def artifact_bitcode(art: AnyArtifact) -> bytes:
    """The LLVM bitcode of an ``llvm`` object or ``llvmjit`` artifact."""
    if isinstance(art, LLVMJitArtifact):
        return art.bitcode
    code = object_bitcode(art.content) if isinstance(art, Artifact) else None
    if code is None:
        raise ArtifactError(
            f"artifact {art.codegen_id}/{art.file_name} holds no LLVM bitcode (no "
            f"{BITCODE_SECTION} section); only objects built by target 'llvm' do"
        )
    return code


def _spec(art: AnyArtifact) -> MachineSpec:
    if isinstance(art, LLVMJitArtifact):
        return MachineSpec(art.triple, art.cpu, "", 3)
    meta = art.metadata
    return MachineSpec(
        str(meta.get("triple", "")),
        str(meta.get("mcpu", "generic")),
        str(meta.get("mattr", "")),
        int(meta.get("opt_level", 3)),
    )


def ir_text(art: AnyArtifact) -> str:
    """The artifact's (optimised) LLVM IR as text."""
    init_llvm()
    return str(llvm.parse_bitcode(artifact_bitcode(art)))


def asm_text(art: AnyArtifact) -> str:
    """The artifact's native assembly for the triple and CPU it was built for."""
    init_llvm()
    mod = llvm.parse_bitcode(artifact_bitcode(art))
    return emit_assembly(mod, _spec(art))


def _header(art: AnyArtifact, what: str) -> str:
    spec = _spec(art)
    return f"; {what} of {art.codegen_id}/{art.file_name} ({spec.triple}, {spec.cpu})\n"


def show_ir(art: AnyArtifact) -> str:
    """Inspector: the LLVM IR with a header line."""
    return _header(art, "LLVM IR") + ir_text(art)


def show_asm(art: AnyArtifact) -> str:
    """Inspector: the native assembly with a header line."""
    return _header(art, "assembly") + asm_text(art)


def register_llvm_inspectors() -> None:
    """Register the IR and assembly views (where nothing else is registered yet)."""
    table = {
        (CODEGEN_ID, ".o"): show_ir,
        (JIT_CODEGEN_ID, ".bc"): show_ir,
    }
    for codegen in (CODEGEN_ID, JIT_CODEGEN_ID):
        table[(codegen, ".ll")] = show_ir
        table[(codegen, ".s")] = show_asm
    for (codegen, suffix), func in table.items():
        if INSPECTORS.find(f"{codegen}:{suffix}") is None:
            register_inspector(codegen, suffix, func)


register_llvm_inspectors()
