"""LibraryModule and load_module: shared libraries whose exported symbols are PackedFuncs.

Each exported ``EmberPackedCFunc`` is found by its symbol name. The C runtime is loaded
(RTLD_GLOBAL) before the library so its references to ``EmberBackend*`` resolve.
:func:`load_module` picks a loader by file format through the global functions
``runtime.module.loadfile_<format>``; this file registers the one for ``"so"``.
"""

from __future__ import annotations

import ctypes
import os
import struct
import weakref
from pathlib import Path

from ember.errors import ModuleLoadError
from ember.runtime import c_api
from ember.runtime.cpu_features import CPU_SYMBOL, FEATURES_SYMBOL, missing_features, refusal
from ember.runtime.module import Module
from ember.runtime.packed_func import CPackedFunc, PackedFunc, PyPackedFunc
from ember.runtime.registry import get_global_func, list_global_funcs, register_func

LOADER_PREFIX = "runtime.module.loadfile_"
_SUFFIX_FORMATS = {".so": "so", ".dylib": "so", ".dll": "so"}
#: a library's slot for its module context (``call_packed`` looks functions up through it).
MODULE_CTX_SYMBOL = "__ember_module_ctx"
#: the lookup function installed in each library file's slot, by real path: alive as long
#: as the slot may point at it (a library stays mapped; a newer module replaces the entry).
_CONTEXTS: dict[str, PackedFunc] = {}


class LibraryModule(Module):
    """A module over a shared library loaded with ctypes."""

    type_key = "library"

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__()
        # an absolute path, so that dlopen never searches LD_LIBRARY_PATH for a bare name
        self.path = Path(path).absolute()
        c_api.lib()  # the backend API must be global before the library is opened
        if not self.path.is_file():
            raise ModuleLoadError(
                f"could not load shared library {self.path}: not a regular file; pass the path "
                "of a library built by ember"
            )
        try:
            # RTLD_LOCAL: the library's symbols never resolve names of later libraries
            self._lib = ctypes.CDLL(str(self.path), mode=os.RTLD_LOCAL | os.RTLD_NOW)
        except (OSError, UnicodeError) as err:  # dlerror() text may not be UTF-8
            raise ModuleLoadError(
                f"could not load shared library {self.path}: {err!s:.500}; rebuild it with ember"
            ) from err
        self._names: list[str] | None = None
        self._real = os.path.realpath(self.path)
        self._check_cpu()
        self._install_context()

    def _string(self, name: str) -> str | None:
        """The NUL-terminated string the library exports as data symbol ``name``, if any."""
        try:
            address = ctypes.cast(self._lib[name], ctypes.c_void_p).value
        except (AttributeError, ValueError):
            return None
        if not address or not self._defines(address):
            return None
        return ctypes.string_at(address).decode("ascii", "replace")

    def _check_cpu(self) -> None:
        """Refuse a library that needs CPU features this machine lacks (before any call)."""
        required = self._string(FEATURES_SYMBOL)
        missing = missing_features(required.split()) if required else ()
        if missing:
            raise ModuleLoadError(refusal(str(self.path), self._string(CPU_SYMBOL) or "", missing))

    def _install_context(self) -> None:
        """Point the library's ``__ember_module_ctx`` (if it has one) at a lookup through
        this module and its imports, for the ``call_packed`` sites of its code."""
        try:
            slot = ctypes.c_void_p.in_dll(self._lib, MODULE_CTX_SYMBOL)
        except ValueError:
            return
        if not self._defines(ctypes.addressof(slot)):
            return
        ref, path = weakref.ref(self), self.path  # no strong reference: the module may go

        def lookup(name: str) -> PackedFunc:
            module = ref()
            if module is None:
                raise ModuleLoadError(
                    f"call_packed of '{name}': the module that loaded {path} is gone; "
                    "keep the module (or the executor using it) alive while it runs"
                )
            return module.get_function(name)

        func = PyPackedFunc(lookup)
        slot.value = func.handle
        _CONTEXTS[self._real] = func

    def _get_function(self, name: str) -> PackedFunc | None:
        try:
            symbol = self._lib[name]
        except (AttributeError, ValueError):  # ValueError: a name holding a NUL byte
            return None
        address = ctypes.cast(symbol, ctypes.c_void_p).value
        if not address or not self._defines(address):
            return None
        return CPackedFunc(address, owner=self, name=name)

    def _defines(self, address: int) -> bool:
        """Whether ``address`` lies in this library, not in one it depends on (libc's exit)."""
        found = object_file(address)
        return found is not None and os.path.realpath(found) == self._real

    def function_names(self) -> list[str]:
        """Exported function symbols of the library (ELF only; otherwise empty)."""
        if self._names is None:
            self._names = sorted(elf_exported_functions(self.path))
        return list(self._names)

    def __repr__(self) -> str:
        return f"LibraryModule({str(self.path)!r})"


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


_DLADDR = getattr(ctypes.CDLL(None), "dladdr", None)
if _DLADDR is not None:
    _DLADDR.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    _DLADDR.restype = ctypes.c_int


def object_file(address: int) -> str | None:
    """The file name of the shared object holding ``address`` (dladdr), or None."""
    if _DLADDR is None:
        return None
    info = _DlInfo()
    if not _DLADDR(address, ctypes.byref(info)) or not info.dli_fname:
        return None
    return os.fsdecode(info.dli_fname)


def elf_exported_functions(path: str | os.PathLike[str]) -> list[str]:
    """Names of the defined global function symbols in an ELF64 file's dynamic symbol table.

    A malformed or truncated file gives no names, never an error.
    """
    try:
        data = Path(path).read_bytes()
    except OSError:
        return []
    try:
        return _dynamic_function_names(data)
    except (struct.error, IndexError):
        return []


def _dynamic_function_names(data: bytes) -> list[str]:
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return []  # only little-endian ELF64 is read; other formats give no names
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = []
    for k in range(shnum):
        off = shoff + k * shentsize
        if off + 64 > len(data):
            return []
        (sh_type,) = struct.unpack_from("<I", data, off + 4)
        sh_offset, sh_size, sh_link = struct.unpack_from("<QQI", data, off + 0x18)
        (sh_entsize,) = struct.unpack_from("<Q", data, off + 0x38)
        sections.append((sh_type, sh_offset, sh_size, sh_link, sh_entsize))
    names = []
    for sh_type, offset, size, link, entsize in sections:
        if sh_type != 11 or entsize != 24 or link >= len(sections):  # SHT_DYNSYM
            continue
        str_off = sections[link][1]
        for pos in range(offset, offset + size, entsize):
            st_name, st_info, _other, st_shndx = struct.unpack_from("<IBBH", data, pos)
            if (st_info & 0xF) != 2 or (st_info >> 4) not in (1, 2) or st_shndx == 0:
                continue  # keep defined global/weak functions
            end = data.find(b"\0", str_off + st_name)
            names.append(data[str_off + st_name : end].decode("utf-8", "replace"))
    return names


def file_format(path: str | os.PathLike[str]) -> str:
    """The loader format of a module file, inferred from its suffix (.so/.dylib/.dll -> so)."""
    suffixes = Path(path).suffixes
    suffix = Path(path).suffix.lower()
    if suffix in _SUFFIX_FORMATS:
        return _SUFFIX_FORMATS[suffix]
    if len(suffixes) >= 2 and "".join(suffixes[-2:]).lower() == ".tar.gz":
        return "tar.gz"
    return suffix.lstrip(".")


def known_formats() -> list[str]:
    """Formats that have a registered loader."""
    return sorted(
        n[len(LOADER_PREFIX) :] for n in list_global_funcs() if n.startswith(LOADER_PREFIX)
    )


def load_module(path: str | os.PathLike[str], fmt: str | None = None) -> Module:
    """Load a module file through the loader registered for its format."""
    fmt = fmt or file_format(path)
    loader = get_global_func(f"{LOADER_PREFIX}{fmt}", allow_missing=True) if fmt else None
    if loader is None:
        raise ModuleLoadError(
            f"cannot load {str(path)!r}: no loader for format {fmt!r} (inferred from the file "
            f"suffix); known formats: {', '.join(known_formats()) or 'none'}; register one as "
            f"the global function '{LOADER_PREFIX}<format>' or pass fmt="
        )
    if not Path(path).exists():
        raise ModuleLoadError(f"cannot load {str(path)!r}: the file does not exist")
    module = loader(str(path))
    if not isinstance(module, Module):
        raise ModuleLoadError(
            f"the loader for format {fmt!r} returned {type(module).__name__}, not a Module"
        )
    return module


def _load_shared_library(path: str) -> Module:
    return LibraryModule(path)


register_func(f"{LOADER_PREFIX}so", _load_shared_library)
