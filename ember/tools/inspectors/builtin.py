"""The built-in inspectors: text as is, JSON pretty-printed, libraries and objects summarized.

Registered through :func:`ember.runtime.inspection.register_inspector`, like a user's,
and only where nothing is registered yet (a user's earlier registration wins).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

from ember.errors import EmberError
from ember.runtime.artifact import AnyArtifact, Artifact, InMemoryArtifact
from ember.runtime.elf import ElfFile, is_elf
from ember.runtime.inspection import ANY, INSPECTORS, Inspector, inspector_key, register_inspector

TEXT_SUFFIXES = (".c", ".cc", ".cpp", ".h", ".s", ".S", ".ll", ".txt", ".py", ".cl", ".tir")
HEX_DUMP_BYTES = 256
OBJDUMP_TIMEOUT_S = 60


def _in_memory(art: AnyArtifact) -> str | None:
    if isinstance(art, InMemoryArtifact):
        return (
            f"in-memory artifact {art.codegen_id}/{art.file_name}: {art.description}\n"
            "(exists only in this process; it cannot be saved or exported)\n"
        )
    return None


def _ensure_newline(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"


def hex_dump(data: bytes, limit: int = HEX_DUMP_BYTES) -> str:
    """A classic 16-bytes-per-line hex dump of the first ``limit`` bytes."""
    lines = []
    for start in range(0, min(len(data), limit), 16):
        chunk = data[start : start + 16]
        hexes = " ".join(f"{b:02x}" for b in chunk)
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{start:08x}  {hexes:<47}  |{text}|")
    if len(data) > limit:
        lines.append(f"... ({len(data) - limit} more bytes, {len(data)} in total)")
    return "\n".join(lines) + "\n"


def show_text(art: AnyArtifact) -> str:
    """Source code and other text: shown as is."""
    note = _in_memory(art)
    if note is not None or not isinstance(art, Artifact):
        return note or ""
    return _ensure_newline(art.content.decode("utf-8", errors="replace"))


def show_json(art: AnyArtifact) -> str:
    """JSON: pretty-printed with two-space indents (raw text if it does not parse)."""
    note = _in_memory(art)
    if note is not None or not isinstance(art, Artifact):
        return note or ""
    try:
        value = json.loads(art.content.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        return f"(not valid JSON: {err})\n" + show_default(art)
    return json.dumps(value, indent=2) + "\n"


def exported_functions(data: bytes, where: str) -> list[str]:
    """The names of the functions a shared library exports, from its dynamic symbol table."""
    elf = ElfFile(data, where)
    return sorted({s.name for s in elf.dynamic_symbols() if s.is_function})


def show_library(art: AnyArtifact) -> str:
    """A shared library: the functions it exports (read from the ELF dynamic symbol table)."""
    note = _in_memory(art)
    if note is not None or not isinstance(art, Artifact):
        return note or ""
    if not is_elf(art.content):
        return show_default(art)
    where = f"{art.codegen_id}/{art.file_name}"
    try:
        names = exported_functions(art.content, where)
    except EmberError as err:
        return f"({err})\n" + show_default(art)
    lines = [f"shared library {where}: {len(art.content)} bytes, {len(names)} exported functions"]
    lines += [f"  {name}" for name in names]
    return "\n".join(lines) + "\n"


def show_object(art: AnyArtifact) -> str:
    """An object file: its disassembly when ``objdump`` exists, else a hex dump."""
    note = _in_memory(art)
    if note is not None or not isinstance(art, Artifact):
        return note or ""
    objdump = shutil.which("objdump")
    if objdump is None:
        return "(objdump not found; install binutils for a disassembly)\n" + show_default(art)
    with tempfile.TemporaryDirectory(prefix="ember-inspect-") as tmp:
        path = Path(tmp) / "artifact.o"
        path.write_bytes(art.content)
        proc = subprocess.run(
            [objdump, "-d", "--no-show-raw-insn", str(path)],
            capture_output=True,
            text=True,
            timeout=OBJDUMP_TIMEOUT_S,
            check=False,
        )
    if proc.returncode != 0:
        return f"(objdump failed: {proc.stderr.strip()})\n" + show_default(art)
    # Drop objdump's first lines, which name the temporary file.
    body = proc.stdout.split("\n\n", 1)[-1].lstrip("\n")
    return f"disassembly of {art.codegen_id}/{art.file_name}:\n\n" + _ensure_newline(body)


def show_default(art: AnyArtifact) -> str:
    """Anything else: the text when it is UTF-8 without control bytes, otherwise a hex dump."""
    note = _in_memory(art)
    if note is not None or not isinstance(art, Artifact):
        return note or ""
    try:
        text = art.content.decode("utf-8")
    except UnicodeDecodeError:
        return hex_dump(art.content)
    if any(ord(ch) < 32 and ch not in "\n\r\t" for ch in text):
        return hex_dump(art.content)
    return _ensure_newline(text)


def _builtin_table() -> dict[tuple[str, str], Inspector]:
    table: dict[tuple[str, str], Inspector] = {(ANY, s): show_text for s in TEXT_SUFFIXES}
    table[(ANY, ".json")] = show_json
    table[(ANY, ".so")] = show_library
    table[(ANY, ".o")] = show_object
    table[(ANY, ANY)] = show_default
    return table


def register_builtin_inspectors() -> None:
    """Register every built-in inspector whose key is still free."""
    for (codegen_id, suffix), func in _builtin_table().items():
        if inspector_key(codegen_id, suffix) not in INSPECTORS:
            register_inspector(codegen_id, suffix, func)
