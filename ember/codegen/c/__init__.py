"""ember.codegen.c: loop IR -> readable C99 with packed wrappers in the runtime ABI.

``build_c(funcs, target)`` returns ``Artifact``\\s for the native loader;
``generate_source(funcs)`` returns the C text of one file; ``symbol_name(func)`` is the
exported symbol a kernel gets; ``vector_math_functions(cflags)`` the libm functions that
vectorize through glibc's libmvec with those flags (probed once, cached).
"""

from __future__ import annotations

from ember.codegen.c.abi import SYMBOL_PREFIX, UNPACKED_SUFFIX, c_type, symbol_name
from ember.codegen.c.build import CODEGEN_ID, COptions, build_c, c_options, generate_source
from ember.codegen.c.vecmath import vector_math_functions

__all__ = [
    "CODEGEN_ID",
    "COptions",
    "SYMBOL_PREFIX",
    "UNPACKED_SUFFIX",
    "build_c",
    "c_options",
    "c_type",
    "generate_source",
    "symbol_name",
    "vector_math_functions",
]
