"""The C runtime library: built lazily from src/runtime.c into the cache, loaded RTLD_GLOBAL.

Nothing here runs at import time. The first :func:`load` compiles ``runtime.c`` with the
system compiler into ``<cache_dir>/runtime/libember_runtime-<hash>.so`` (the hash covers the
C source, the header, the compiler and the flags), then loads it with ``RTLD_GLOBAL`` so that
shared libraries produced by ember resolve ``EmberBackend*`` symbols at dlopen time.
"""

from __future__ import annotations

import ctypes
import hashlib
import sys
import threading
from pathlib import Path

from ember.config import config
from ember.errors import ModuleLoadError
from ember.runtime.cache_entry import cache_subdir, cached_build
from ember.support.hashing import hash_bytes
from ember.support.toolchain import compile_shared

_HERE = Path(__file__).resolve().parent
_FLAGS = ("-fvisibility=hidden",)
_LOCK = threading.Lock()
_LOADED: list[ctypes.CDLL] = []

#: the files of src/ that runtime.c includes (their text is part of the build's hash);
#: f32_tiles.h is generated from the C back end's kernels (ember.codegen.llvm.tiles).
INCLUDED_SOURCES = (
    "thread_pool.h",
    "pool_job.h",
    "pool_workers.h",
    "pool_adapt.h",
    "pool_learn.h",
    "pool_govern.h",
    "pool_runs.h",
    "random_kernels.h",
    "string_arena.h",
    "string_kernels.h",
    "f32_tiles.h",
)


#: artifact metadata naming the runtime kernels a native object calls (see tiles_digest)
TILES_KEY = "runtime_tiles"


def tiles_digest() -> str:
    """A short hash of ``src/f32_tiles.h``: the contract of the tile kernels the runtime
    exports for llvm builds. An object calling them records it (``TILES_KEY``); loading one
    recorded against other kernels is refused, since a kernel whose arguments or scratch
    layout changed would write past the memory the old object planned for it."""
    return hashlib.sha256((_HERE / "src" / "f32_tiles.h").read_bytes()).hexdigest()[:16]


def include_dir() -> Path:
    """The directory to pass with -I so that ``#include <ember/runtime_api.h>`` works."""
    return _HERE / "include"


def header_path() -> Path:
    """The path of the runtime C header ``ember/runtime_api.h``."""
    return include_dir() / "ember" / "runtime_api.h"


def source_path() -> Path:
    """The path of the C runtime source ``runtime.c``."""
    return _HERE / "src" / "runtime.c"


def library_suffix() -> str:
    """The shared-library suffix of this platform."""
    if sys.platform == "darwin":
        return ".dylib"
    if sys.platform == "win32":
        return ".dll"
    return ".so"


def library_path() -> Path:
    """Where the C runtime for the current sources and compiler lives in the cache."""
    src = source_path().parent
    key = hash_bytes(
        source_path().read_bytes(),
        *((src / name).read_bytes() for name in INCLUDED_SOURCES),
        header_path().read_bytes(),
        config().cc.encode(),
        " ".join(_FLAGS).encode(),
    )
    return cache_subdir("runtime") / f"libember_runtime-{key}{library_suffix()}"


def build() -> Path:
    """Compile the C runtime into the cache unless an identical build is already there.

    With EMBER_RUNTIME_LIB set, return that prebuilt library instead (nothing is compiled).
    """
    prebuilt = config().runtime_lib
    if prebuilt is not None:
        if not prebuilt.is_file():
            raise ModuleLoadError(
                f"EMBER_RUNTIME_LIB points to {prebuilt}, which is not a file; build one with "
                "ember.runtime.libruntime.build() on a host with a C compiler"
            )
        return prebuilt

    def compile_runtime(path: Path) -> Path:
        return compile_shared(
            [source_path()], path, include_dirs=[include_dir()], flags=_FLAGS, openmp=False
        )

    # a cached build is loaded only while it matches the hash recorded when it was built
    return cached_build(library_path(), compile_runtime)


def is_loaded() -> bool:
    """Whether the C runtime has been loaded into this process."""
    return bool(_LOADED)


def load() -> ctypes.CDLL:
    """Build (if needed) and load the C runtime once per process; return the raw CDLL."""
    if _LOADED:
        return _LOADED[0]
    with _LOCK:
        if not _LOADED:
            path = build()
            try:
                lib = ctypes.CDLL(str(path.absolute()), mode=ctypes.RTLD_GLOBAL)
            except (OSError, UnicodeError) as err:  # dlerror() text may not be UTF-8
                raise ModuleLoadError(
                    f"could not load the ember C runtime {path}: {err!s:.500}; "
                    "delete the file to force a rebuild"
                ) from err
            _LOADED.append(lib)
    return _LOADED[0]
