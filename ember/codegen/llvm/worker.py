"""One LLVM module's trip from IR text to object code, here or in a helper process.

``compile_text(text, machine)`` parses and verifies LLVM IR text, runs the optimisation
pipeline (``run_pipeline``), optionally embeds the optimised bitcode in a ``.llvmbc``
section, and emits object code; it returns ``(bitcode, object)``. This file imports only
the standard library and llvmlite, so it also runs as a helper process (``python -P -c
<this file's text>``, see ``ember.codegen.llvm.parallel``): it reads frames (an
8-byte length, then a pickle) from stdin, first ``{"machine": MachineTuple, "embed":
bool}``, then one IR text per module, and answers each text with a frame holding
``[bitcode, object]`` (or ``("error", message)``) on stdout, until stdin ends. The same
function in either place gives the same bytes.

A ``MachineTuple`` is ``(triple, cpu, features, opt_level, jit)``: objects for linking
(PIC) or, with ``jit``, for MCJIT in this process (the JIT code model).
"""

from __future__ import annotations

import pickle
import struct
import sys
import threading
from typing import IO, Any

import llvmlite.binding as llvm

#: (triple, cpu, features, opt_level, jit)
MachineTuple = tuple[str, str, str, int, bool]
#: the section (and global) holding a module's bitcode inside its object file.
BITCODE_SECTION = ".llvmbc"
BITCODE_GLOBAL = "llvm.embedded.module"

_LOCK = threading.Lock()
_READY: list[bool] = []
_MACHINES: dict[MachineTuple, llvm.TargetMachine] = {}


def init_llvm() -> None:
    """Initialise every LLVM target and assembly printer once per process."""
    with _LOCK:
        if not _READY:
            llvm.initialize_all_targets()
            llvm.initialize_all_asmprinters()
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            _READY.append(True)


def new_machine(m: MachineTuple) -> llvm.TargetMachine:
    """A fresh TargetMachine: PIC objects, or JIT code for this process (an execution
    engine takes ownership of its machine, so it never gets a cached one)."""
    init_llvm()
    triple, cpu, features, opt_level, jit = m
    return llvm.Target.from_triple(triple).create_target_machine(
        cpu=cpu,
        features=features,
        opt=opt_level,
        reloc="default" if jit else "pic",
        codemodel="jitdefault" if jit else "default",
        jit=jit,
    )


def machine(m: MachineTuple) -> llvm.TargetMachine:
    """The (cached) TargetMachine of ``m`` for optimising and emitting code."""
    with _LOCK:
        tm = _MACHINES.get(m)
    if tm is None:
        tm = new_machine(m)
        with _LOCK:
            tm = _MACHINES.setdefault(m, tm)
    return tm


def run_pipeline(mod: llvm.ModuleRef, m: MachineTuple) -> None:
    """The new pass manager's default pipeline at the opt level, loop and SLP vectorizers
    on from level 2, LLVM's unroller off (it took 40% of ResNet-50's optimisation; loops
    that should be unrolled carry ``llvm.loop.unroll.full``). Loops LLVM 22's vectorizer
    would miscompile carry ``llvm.loop.vectorize.enable false``
    (ember.codegen.llvm.loop_hints.unsafe_to_vectorize)."""
    tm = machine(m)
    mod.triple = m[0]
    mod.data_layout = str(tm.target_data)
    pto = llvm.create_pipeline_tuning_options(speed_level=m[3])
    vectorize = m[3] >= 2
    pto.loop_vectorization = vectorize
    pto.slp_vectorization = vectorize
    pto.loop_interleaving = vectorize
    pto.loop_unrolling = False
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)


def embed_bitcode(mod: llvm.ModuleRef, context: llvm.ContextRef | None = None) -> bytes:
    """Add the module's own bitcode to it as ``.llvmbc`` (``context``: the module's, if not
    the global one); returns that bitcode."""
    code = bytes(mod.as_bitcode())
    escaped = "".join(f"\\{b:02X}" for b in code)
    holder = llvm.parse_assembly(
        f'@{BITCODE_GLOBAL} = private constant [{len(code)} x i8] c"{escaped}", '
        f'section "{BITCODE_SECTION}", align 1\n'
        f"@llvm.compiler.used = appending global [1 x ptr] [ptr @{BITCODE_GLOBAL}], "
        'section "llvm.metadata"\n',
        context,
    )
    holder.triple = mod.triple
    holder.data_layout = mod.data_layout
    mod.link_in(holder)
    return code


def parse_text(text: str, context: llvm.ContextRef | None = None) -> llvm.ModuleRef:
    """Parse and verify LLVM IR text (RuntimeError with LLVM's complaint if invalid)."""
    init_llvm()
    mod = llvm.parse_assembly(text, context)
    mod.verify()
    return mod


def compile_text(text: str, m: MachineTuple, embed: bool) -> tuple[bytes, bytes]:
    """IR text -> (optimised bitcode, object code), the bitcode embedded when ``embed``.

    Each module gets a context of its own: in the process-wide one, what earlier modules
    had left there changed the machine code, so the bytes depended on the process's
    history (after a build with a parallel loop, this process's object differed from a
    fresh helper's)."""
    context = llvm.create_context()
    mod = parse_text(text, context)
    run_pipeline(mod, m)
    code = embed_bitcode(mod, context) if embed else bytes(mod.as_bitcode())
    obj = bytes(machine(m).emit_object(mod))
    del mod  # before its context
    return code, obj


def write_frame(out: IO[bytes], value: object) -> None:
    """Write ``value`` as one frame: its pickle's length (8 bytes) and the pickle."""
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(struct.pack("<Q", len(data)) + data)
    out.flush()


def _read_exactly(inp: IO[bytes], size: int) -> bytes:
    parts: list[bytes] = []
    while size:
        chunk = inp.read(size)
        if not chunk:
            raise EOFError("the pipe ended inside a frame")
        parts.append(chunk)
        size -= len(chunk)
    return b"".join(parts)


def read_frame(inp: IO[bytes]) -> Any:
    """The value of the next frame (EOFError when the pipe has ended)."""
    head = _read_exactly(inp, 8)
    return pickle.loads(_read_exactly(inp, struct.unpack("<Q", head)[0]))


def main() -> None:
    """The helper process: a machine frame, then one answer frame per text frame."""
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    try:
        request = read_frame(inp)
    except EOFError:
        return
    m: MachineTuple = tuple(request["machine"])  # type: ignore[assignment]
    init_llvm()
    while True:
        try:
            text = read_frame(inp)
        except EOFError:
            return
        try:
            answer: object = list(compile_text(text, m, request["embed"]))
        except Exception as err:  # reported to the parent, which compiles the module itself
            answer = ("error", f"{type(err).__name__}: {err}")
        write_frame(out, answer)


if __name__ == "__main__":
    main()
