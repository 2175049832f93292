"""export_library: an ArtifactSet -> ONE deployable shared library, and the way back.

The library holds the linked ``native`` artifacts plus every other artifact (``metadata``
ones included) packed into one blob (see :mod:`ember.runtime.blob`) under the symbol
``__ember_dev_mblob``. The blob is written to a file next to the sources and pulled in
with an assembler ``.incbin``, so a large blob costs no C compile time::

    build/<codegen_id>/<file_name>   native sources/objects   --+
    build/__ember_dev_mblob.bin      the blob                  |   cc -shared
    build/__ember_dev_mblob.s        .incbin of the blob      --+-> lib.so

``load_exported_library(path)`` reverses it: the library itself is the host module, and
steps 3-4 of the loading process (:mod:`ember.runtime.loading`) rebuild the module tree
through the same registered loaders. Output is byte-identical for equal sets: sorted
inputs, fixed flags, no timestamps, no temporary paths in the output.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ember.errors import ArtifactError, ModuleLoadError
from ember.runtime.artifact_set import ArtifactSet
from ember.runtime.blob import BLOB_SYMBOL, pack_artifacts, read_library_blob
from ember.runtime.elf import is_elf
from ember.runtime.hooks import EXPORT_LIBRARY, register_hook
from ember.runtime.library_module import LibraryModule
from ember.runtime.libruntime import source_path
from ember.runtime.loading import SOURCE_ATTR, check_loaders, link_native, load_groups
from ember.runtime.module import Module
from ember.runtime.registry import register_func

#: The runtime source linked into every exported library (one thread, no heap).
STANDALONE_RUNTIME = "standalone.c"
#: The global function load_module uses for shared libraries.
LOADFILE_SO = "runtime.module.loadfile_so"


def _asm_string(path: Path) -> str:
    text = str(path).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def blob_assembly(blob_path: Path) -> str:
    """Assembler source defining ``__ember_dev_mblob`` as the bytes of ``blob_path``."""
    return "\n".join(
        [
            '\t.section .rodata.ember_blob,"a"',
            f"\t.globl {BLOB_SYMBOL}",
            f"\t.type {BLOB_SYMBOL}, @object",
            "\t.balign 16",
            f"{BLOB_SYMBOL}:",
            f"\t.incbin {_asm_string(blob_path)}",
            f"\t.size {BLOB_SYMBOL}, . - {BLOB_SYMBOL}",
            '\t.section .note.GNU-stack,"",@progbits',
            "",
        ]
    )


def export_library(source: ArtifactSet | Module, path: str | os.PathLike[str]) -> Path:
    """Write ``source`` (an ArtifactSet or a module loaded from one) as the shared library ``path``.

    Refuses a set holding an InMemoryArtifact, naming it and its exportable alternative.
    """
    artifact_set = source if isinstance(source, ArtifactSet) else artifact_set_of(source)
    artifact_set.check_exportable("export the library")
    output = Path(path)
    with tempfile.TemporaryDirectory(prefix="ember-export-") as tmp:
        build_dir = Path(tmp)
        blob_path = build_dir / f"{BLOB_SYMBOL}.bin"
        blob_path.write_bytes(pack_artifacts(artifact_set.non_native()))
        asm_path = build_dir / f"{BLOB_SYMBOL}.s"
        asm_path.write_text(blob_assembly(blob_path))
        # the standalone runtime makes the library self-contained for C programs; loaded
        # from Python, the process's runtime (RTLD_GLOBAL, opened first) interposes it
        runtime = build_dir / STANDALONE_RUNTIME  # a copy: objects land next to sources
        runtime.write_bytes(source_path().with_name(STANDALONE_RUNTIME).read_bytes())
        extra = [asm_path, runtime]
        link_native(artifact_set.native(), build_dir, output, extra_inputs=extra)
    return output


def artifact_set_of(module: object) -> ArtifactSet:
    """The ArtifactSet a module was loaded from, or an ArtifactError saying how to get one."""
    found = getattr(module, SOURCE_ATTR, None)
    if not isinstance(found, ArtifactSet):
        raise ArtifactError(
            f"{type(module).__name__} was not loaded from an ArtifactSet, so it cannot be "
            "exported; export the ArtifactSet returned by the build instead"
        )
    return found


def load_exported_library(path: str | os.PathLike[str]) -> Module:
    """``runtime.module.loadfile_so``: a shared library as the host, plus its embedded artifacts.

    The blob is read and verified, and every loader checked, before the library is
    opened, so a corrupt file runs none of its code. Without a blob (a plain shared
    library, or a non-ELF platform) the LibraryModule is returned as is.
    """
    if not Path(path).is_file():
        raise ModuleLoadError(
            f"cannot load {path}: not a regular file (a directory, FIFO or device is refused)"
        )
    data = Path(path).read_bytes()
    embedded = read_library_blob(data, str(path)) if is_elf(data) else None
    if embedded is None:
        return LibraryModule(path)
    groups = ArtifactSet(embedded).by_loader()
    check_loaders(groups)
    return load_groups(groups, LibraryModule(path))


def register_library_loader() -> None:
    """Make :func:`ember.runtime.load_module` rebuild exported libraries' module trees."""
    register_func(LOADFILE_SO, load_exported_library, override=True)


# ArtifactSet.export_library and Module.export_library delegate here (both sit below).
register_hook(EXPORT_LIBRARY, export_library, override=True)


# The runtime's plain shared-library loader (ember.runtime.library_module) is imported
# above, so this replaces it deterministically with the blob-aware one.
register_library_loader()
