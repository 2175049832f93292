"""ember.codegen.llvm: loop IR -> LLVM IR (llvmlite) -> object files or in-process JIT.

Importing the package registers the ``llvm`` and ``llvmjit`` target kinds
(``ember.codegen.llvm.target``). ``build_llvm(funcs, target)`` returns ``lib0.o`` for the
native loader; ``build_llvmjit`` an in-memory artifact; ``generate_ir(funcs, options)``
the IR text, handy for reading.
"""

from __future__ import annotations

from ember.codegen.llvm import inspect, target
from ember.codegen.llvm.build import (
    CODEGEN_ID,
    JIT_CODEGEN_ID,
    LLVMOptions,
    build_llvm,
    build_llvmjit,
    generate_ir,
)

__all__ = [
    "CODEGEN_ID",
    "JIT_CODEGEN_ID",
    "LLVMOptions",
    "build_llvm",
    "build_llvmjit",
    "generate_ir",
    "inspect",
    "target",
]
