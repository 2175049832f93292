"""A small, bounds-checked ELF reader: dynamic symbols of a shared library and their bytes.

Reads a library without loading it (no constructors run), so ``ember inspect`` and the
blob reader can look at an untrusted or corrupt file safely. Handles ELF32/ELF64 in both
byte orders; every offset is checked against the file size, and a malformed file raises
:class:`~ember.errors.SerializationError`.

Example::

    elf = ElfFile(Path("lib.so").read_bytes(), "lib.so")
    [s.name for s in elf.dynamic_symbols() if s.is_function]
    elf.symbol_bytes("__ember_dev_mblob")
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ember.errors import SerializationError

ELF_MAGIC = b"\x7fELF"
_SHT_NOBITS = 8
_SHT_DYNSYM = 11
_STT_OBJECT = 1
_STT_FUNC = 2
_SHN_UNDEF = 0
_SHN_LORESERVE = 0xFF00
_MAX_SECTIONS = 1 << 16
_MAX_SYMBOLS = 1 << 22


@dataclass(frozen=True)
class ElfSymbol:
    """One entry of the dynamic symbol table."""

    name: str
    value: int
    size: int
    kind: int
    section: int

    @property
    def is_function(self) -> bool:
        """True for a defined function symbol."""
        return self.kind == _STT_FUNC and self.section != _SHN_UNDEF

    @property
    def is_defined(self) -> bool:
        """True when the library defines (rather than imports) the symbol."""
        return self.section != _SHN_UNDEF


@dataclass(frozen=True)
class _Section:
    kind: int
    addr: int
    offset: int
    size: int
    link: int
    entsize: int


def is_elf(data: bytes) -> bool:
    """True when ``data`` starts with the ELF magic bytes."""
    return data[:4] == ELF_MAGIC


class ElfFile:
    """A parsed view of an ELF file's section headers and dynamic symbol table."""

    def __init__(self, data: bytes, where: str) -> None:
        self.data = data
        self.where = where
        if len(data) < 64 or not is_elf(data):
            raise self._fail("not an ELF file (bad magic or too short)")
        elf_class, byte_order = data[4], data[5]
        if elf_class not in (1, 2) or byte_order not in (1, 2):
            raise self._fail(f"unknown ELF class {elf_class} / data encoding {byte_order}")
        self.is64 = elf_class == 2
        self.endian = "<" if byte_order == 1 else ">"
        if self.is64:
            shoff, shentsize, shnum = self._unpack("Q", 0x28)[0], *self._unpack("HH", 0x3A)
        else:
            shoff, shentsize, shnum = self._unpack("I", 0x20)[0], *self._unpack("HH", 0x2E)
        if shnum > _MAX_SECTIONS or shentsize < (64 if self.is64 else 40):
            raise self._fail(f"implausible section header table ({shnum} x {shentsize})")
        self._check_range(shoff, shnum * shentsize, "the section header table")
        self.sections = [self._section(shoff + i * shentsize) for i in range(shnum)]

    def _fail(self, what: str) -> SerializationError:
        return SerializationError(f"cannot read {self.where} as a shared library: {what}")

    def _check_range(self, offset: int, size: int, what: str) -> None:
        if offset < 0 or size < 0 or offset + size > len(self.data):
            raise self._fail(
                f"{what} ({size} bytes at offset {offset}) lies outside the file "
                f"({len(self.data)} bytes); the file is truncated or corrupt"
            )

    def _unpack(self, fmt: str, offset: int) -> tuple[int, ...]:
        spec = struct.Struct(self.endian + fmt)
        self._check_range(offset, spec.size, "a header field")
        return spec.unpack_from(self.data, offset)

    def _section(self, at: int) -> _Section:
        if self.is64:
            _, kind, _, addr, off, size, link, _, _, ent = self._unpack("IIQQQQIIQQ", at)
        else:
            _, kind, _, addr, off, size, link, _, _, ent = self._unpack("IIIIIIIIII", at)
        return _Section(kind, addr, off, size, link, ent)

    def _string(self, table: _Section, index: int) -> str:
        if index >= table.size:
            raise self._fail(f"symbol name index {index} is outside its string table")
        start = table.offset + index
        end = self.data.find(b"\0", start, table.offset + table.size)
        if end < 0:
            raise self._fail("unterminated symbol name")
        return self.data[start:end].decode("utf-8", errors="replace")

    def dynamic_symbols(self) -> list[ElfSymbol]:
        """Every entry of ``.dynsym`` (empty for a file without one), in table order."""
        out: list[ElfSymbol] = []
        for sec in self.sections:
            if sec.kind != _SHT_DYNSYM:
                continue
            if sec.link >= len(self.sections):
                raise self._fail("the dynamic symbol table links to a missing string table")
            strtab = self.sections[sec.link]
            self._check_range(sec.offset, sec.size, "the dynamic symbol table")
            self._check_range(strtab.offset, strtab.size, "the dynamic string table")
            entsize = 24 if self.is64 else 16
            count = sec.size // entsize
            if count > _MAX_SYMBOLS:
                raise self._fail(f"implausible symbol count {count}")
            for i in range(1, count):
                at = sec.offset + i * entsize
                if self.is64:
                    name, info, _, shndx, value, size = self._unpack("IBBHQQ", at)
                else:
                    name, value, size, info, _, shndx = self._unpack("IIIBBH", at)
                out.append(ElfSymbol(self._string(strtab, name), value, size, info & 0xF, shndx))
        return out

    def find_symbol(self, name: str) -> ElfSymbol | None:
        """The defined dynamic symbol called ``name``, or None."""
        for sym in self.dynamic_symbols():
            if sym.name == name and sym.is_defined:
                return sym
        return None

    def symbol_bytes(self, name: str) -> bytes | None:
        """The file bytes a defined data symbol covers, or None when there is no such symbol."""
        sym = self.find_symbol(name)
        if sym is None:
            return None
        if sym.section >= _SHN_LORESERVE or sym.section >= len(self.sections):
            raise self._fail(f"symbol {name} points at section {sym.section}, which is absent")
        sec = self.sections[sym.section]
        start = sym.value - sec.addr
        if sec.kind == _SHT_NOBITS or start < 0 or start + sym.size > sec.size:
            raise self._fail(f"symbol {name} ({sym.size} bytes) lies outside its section")
        self._check_range(sec.offset + start, sym.size, f"the bytes of {name}")
        return self.data[sec.offset + start : sec.offset + start + sym.size]
