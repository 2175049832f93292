"""``.text``/``.data``/``.bss`` of a board program, by part: runtime glue, kernels, model.

``size_report(dir)`` builds the board's objects and program in an unpacked MLF tar (``make
board``) and reads ``arm-none-eabi-size`` (Berkeley format) of each object group the
Makefile names (:data:`ember.tools.cortexm.rules.BOARD_GROUPS`) and of the linked program.

Example::

    sizes = size_report("model")                 # the directory holding the unpacked tar
    sizes["kernels"]                             # SectionSizes(text=..., data=0, bss=0)
    sizes["program"].bss                         # the arena, the buffers, the stack is not in it
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ember.errors import ToolchainError
from ember.tools.cortexm.rules import BOARD_GROUPS

__all__ = ["SectionSizes", "size_report"]

SIZE_TOOL = "arm-none-eabi-size"


@dataclass(frozen=True)
class SectionSizes:
    """Bytes in ``.text`` (code and constants), ``.data`` and ``.bss``."""

    text: int
    data: int
    bss: int


def _run(cmd: list[str], cwd: Path) -> str:
    if shutil.which(cmd[0]) is None:
        raise ToolchainError(
            f"{cmd[0]} is not installed; install gcc-arm-none-eabi and libnewlib-arm-none-eabi "
            "(Debian/Ubuntu: apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi)"
        )
    out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise ToolchainError(f"`{' '.join(cmd)}` in {cwd} failed:\n{out.stdout}{out.stderr}")
    return out.stdout


def _sizes(objects: list[str], cwd: Path) -> SectionSizes:
    if not objects:
        return SectionSizes(0, 0, 0)
    text = data = bss = 0
    for line in _run([SIZE_TOOL, *objects], cwd).splitlines()[1:]:
        fields = line.split()
        text, data, bss = text + int(fields[0]), data + int(fields[1]), bss + int(fields[2])
    return SectionSizes(text, data, bss)


def size_report(directory: str | os.PathLike[str], board: str = "") -> dict[str, SectionSizes]:
    """Sizes of the board program in an unpacked MLF tar: one entry per part
    (``runtime glue``, ``kernels``, ``model``, ``test vectors``) and ``program`` (linked,
    with the parts of libc and libm it uses)."""
    cwd = Path(directory)
    args = [f"BOARD={board}"] if board else []
    _run(["make", "-s", "board", *args], cwd)
    names = _run(["make", "-s", "--no-print-directory", "board-print-objects", *args], cwd)
    groups = dict(line.split("=", 1) for line in names.splitlines() if "=" in line)
    report = {}
    for var, label in BOARD_GROUPS.items():
        report[label.split(" (")[0]] = _sizes(groups.get(var, "").split(), cwd)
    report["program"] = _sizes([groups["ELF"].strip()], cwd)
    return report
