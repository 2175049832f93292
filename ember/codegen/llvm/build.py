"""build_llvm / build_llvmjit: PrimFuncs -> one LLVM module -> artifacts.

``llvm``: the optimised module becomes ``lib0.o`` (codegen_id ``llvm``, loader
``native``), which the ordinary loading process links with any C artifacts. The
optimised bitcode is embedded in the object's ``.llvmbc`` section (the section
``-fembed-bitcode`` uses; not allocated, so never mapped at run time), so ``inspect``
shows its IR and assembly.
``llvmjit``: the same module compiled in this process by MCJIT into an
``InMemoryArtifact`` that loads itself (no file, no linker, no C compiler); the bitcode
stays in the artifact for inspection. Equal inputs give byte-identical objects.

Example::

    arts = build_llvm([func], Target.create("llvm -mcpu=native"))
    arts[0].file_name            # "lib0.o"
"""

from __future__ import annotations

from collections.abc import Sequence

import llvmlite.binding as llvm

from ember.codegen.c.abi import symbol_name, symbolic_extents
from ember.codegen.llvm.codegen import FuncGen, Options, Scope
from ember.codegen.llvm.ir_text import ModuleContext, Val, value_type
from ember.codegen.llvm.jit import LLVMJitArtifact, jit_loader
from ember.codegen.llvm.machine import (
    MachineSpec,
    emit_object,
    optimize,
    parse,
    pointer_bits,
)
from ember.codegen.llvm.wrapper import packed_wrapper
from ember.errors import CompileError
from ember.runtime.artifact import Artifact
from ember.target import Target
from ember.tir.buffer import Buffer
from ember.tir.expr import Var
from ember.tir.simplify import NON_NEGATIVE_MAX
from ember.tir.stmt import PrimFunc
from ember.tir.transform import unroll_loops, vectorize_loops
from ember.tir.verify import verify

CODEGEN_ID = "llvm"
JIT_CODEGEN_ID = "llvmjit"
CODEGEN_VERSION = 1
#: the section (and global) holding a module's bitcode inside its object file.
BITCODE_SECTION = ".llvmbc"
BITCODE_GLOBAL = "llvm.embedded.module"


class LLVMOptions:
    """The LLVM back end's reading of a parsed ``llvm`` or ``llvmjit`` Target."""

    def __init__(self, target: Target) -> None:
        if target.kind.name not in (CODEGEN_ID, JIT_CODEGEN_ID):
            raise CompileError(
                f"build_llvm: target '{target}' is not of kind 'llvm' or 'llvmjit'; pass "
                "Target.create('llvm ...')"
            )
        self.target = target
        self.jit = target.kind.name == JIT_CODEGEN_ID
        self.mcpu: str = target["mcpu"]
        self.mtriple: str = target["mtriple"]
        self.mattr: str = target["mattr"]
        self.opt_level: int = target["opt-level"]
        self.codegen = Options(target["num-threads"], bool(target["export-unpacked"]))

    def spec(self) -> MachineSpec:
        """The checked target machine description."""
        return MachineSpec.create(self.mtriple, self.mcpu, self.mattr, self.opt_level, self.jit)


def _signature(func: PrimFunc) -> tuple[list[str], list[tuple[Buffer | Var, str]]]:
    """The unpacked parameter types and (param, LLVM name) pairs, extents last."""
    where = f" of '{func.name}'"
    types: list[str] = []
    names: list[tuple[Buffer | Var, str]] = []
    for k, p in enumerate(func.params):
        types.append("ptr" if isinstance(p, Buffer) else value_type(p.dtype, where))
        names.append((p, f"%p{k}"))
    for k, v in enumerate(symbolic_extents(func)):
        types.append(value_type(v.dtype, where))
        names.append((v, f"%e{k}"))
    return types, names


def unpacked_function(func: PrimFunc, ctx: ModuleContext, opts: Options) -> list[str]:
    """The unpacked function of ``func`` and the lambdas of its parallel loops."""
    verify(func)
    sym = symbol_name(func)
    func = unroll_loops(vectorize_loops(func))
    scope = Scope()
    gen = FuncGen(ctx, func, opts, scope)
    gen.func_symbol = sym
    types, names = _signature(func)
    params = []
    for ty, (p, name) in zip(types, names, strict=True):
        if isinstance(p, Buffer):
            params.append(f"ptr noalias {name}")
            gen.env[p.data] = Val("ptr", name)
            gen.noalias.add(name)
            for e in p.shape:
                if isinstance(e, Var):
                    gen.bounds.ranges[e] = (0, NON_NEGATIVE_MAX)
        else:
            params.append(f"{ty} {name}")
            gen.env[p] = Val(ty, name)
    gen.stmt(func.body)
    gen.w.op("ret i32 0")
    linkage = "" if opts.export_unpacked else "internal "
    text = (
        f"define {linkage}i32 @{sym}_unpacked({', '.join(params)}) nounwind {{\n{gen.w.body()}\n}}"
    )
    return [text, *scope.functions]


def generate_ir(funcs: Sequence[PrimFunc], opts: Options, size_t: str = "i64") -> str:
    """The LLVM IR text of one module holding every function and its packed wrapper."""
    ctx = ModuleContext(size_t=size_t)
    seen: dict[str, str] = {}
    for f in funcs:
        if not isinstance(f, PrimFunc):
            raise CompileError(f"build_llvm: expected PrimFuncs, got {type(f).__name__}")
        sym = symbol_name(f)
        if sym in seen:
            raise CompileError(
                f"build_llvm: two kernels map to the symbol '{sym}' ('{seen[sym]}' and "
                f"'{f.name}'); give them distinct names"
            )
        seen[sym] = f.name
        types, _ = _signature(f)
        ctx.defined[f"{sym}_unpacked"] = f"i32 ({', '.join(types)})"
    functions: list[str] = []
    for f in funcs:
        functions += unpacked_function(f, ctx, opts)
        functions.append(packed_wrapper(ctx, f))
    head = f"; generated by ember.codegen.llvm (codegen version {CODEGEN_VERSION}); do not edit\n"
    return head + 'source_filename = "ember"\n' + ctx.text(functions)


def compile_module(
    funcs: Sequence[PrimFunc], opts: LLVMOptions
) -> tuple[llvm.ModuleRef, MachineSpec]:
    """Generate, parse, verify and optimise the module of ``funcs``."""
    spec = opts.spec()
    size_t = f"i{pointer_bits(spec)}"
    text = generate_ir(list(funcs), opts.codegen, size_t)
    mod = parse(text, "")
    optimize(mod, spec)
    return mod, spec


def embed_bitcode(mod: llvm.ModuleRef) -> bytes:
    """Add the module's own bitcode to it as ``.llvmbc``; returns that bitcode."""
    code = bytes(mod.as_bitcode())
    escaped = "".join(f"\\{b:02X}" for b in code)
    holder = llvm.parse_assembly(
        f'@{BITCODE_GLOBAL} = private constant [{len(code)} x i8] c"{escaped}", '
        f'section "{BITCODE_SECTION}", align 1\n'
        f"@llvm.compiler.used = appending global [1 x ptr] [ptr @{BITCODE_GLOBAL}], "
        'section "llvm.metadata"\n'
    )
    holder.triple = mod.triple
    holder.data_layout = mod.data_layout
    mod.link_in(holder)
    return code


def build_llvm(funcs: Sequence[PrimFunc], target: Target) -> list[Artifact]:
    """``target.build.llvm``: one object file ``lib0.o`` for the native loader."""
    opts = LLVMOptions(target)
    mod, spec = compile_module(funcs, opts)
    embed_bitcode(mod)
    content = emit_object(mod, spec)
    meta: dict[str, str | int | float | bool] = {
        "format": "o",
        "codegen_version": CODEGEN_VERSION,
        "num_functions": len(funcs),
        "triple": spec.triple,
        "mcpu": spec.cpu,
        "opt_level": spec.opt_level,
    }
    if len(spec.features) <= 4000:
        meta["mattr"] = spec.features
    listed = ",".join(symbol_name(f) for f in funcs)
    if len(listed) <= 4000:
        meta["functions"] = listed
    return [Artifact(CODEGEN_ID, "native", "lib0.o", content, meta)]


def build_llvmjit(funcs: Sequence[PrimFunc], target: Target) -> list[LLVMJitArtifact]:
    """``target.build.llvmjit``: an in-memory artifact that JIT-compiles on load."""
    opts = LLVMOptions(target)
    mod, spec = compile_module(funcs, opts)
    if not spec.is_host:
        raise CompileError(
            f"llvmjit: code for {spec.triple} cannot run in this process "
            f"({llvm.get_process_triple()}); use target 'llvm -mtriple={spec.triple}' for "
            "an object file"
        )
    code = bytes(mod.as_bitcode())
    names = tuple(symbol_name(f) for f in funcs)
    return [
        LLVMJitArtifact(
            JIT_CODEGEN_ID,
            "lib0.bc",
            jit_loader(code, spec, names),
            f"{len(names)} kernels JIT-compiled by LLVM for {spec.cpu}",
            "target 'llvm' instead of 'llvmjit'",
            bitcode=code,
            triple=spec.triple,
            cpu=spec.cpu,
        )
    ]
