"""Toolchain: compile C sources into objects and shared libraries with the system compiler.

Every call builds into a temporary name next to the output and renames it into place, so
parallel builds of the same output never see a half-written file. Failures raise
:class:`ember.errors.ToolchainError` with the full command line and the first lines of the
compiler's output. Example::

    compile_shared(["kernel.c"], "libkernel.so", include_dirs=[ember.runtime.include_dir()])
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ember.config import config
from ember.errors import ToolchainError

PathLike = str | os.PathLike[str]

_MAX_OUTPUT_LINES = 30
_BASE_FLAGS = ("-std=c11", "-fPIC", "-Wall", "-Wno-unused-variable", "-Wno-unused-function")


def compiler(cc: str | None = None) -> list[str]:
    """The compiler command (possibly with arguments, as in CC="ccache cc") as a list."""
    text = cc or config().cc
    try:
        return shlex.split(text)
    except ValueError as err:
        raise ToolchainError(
            f"the C compiler command CC={text!r} cannot be split ({err}); fix its quoting, "
            "for example CC='ccache cc'"
        ) from None


def compiler_available(cc: str | None = None) -> bool:
    """Whether the C compiler can be found on PATH."""
    cmd = compiler(cc)
    return bool(cmd) and shutil.which(cmd[0]) is not None


def _run(cmd: list[str], what: str) -> None:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise ToolchainError(
            f"{what}: the C compiler '{cmd[0]}' was not found; install one or set CC. "
            f"command: {shlex.join(cmd)}"
        ) from None
    except OSError as err:
        raise ToolchainError(
            f"{what}: the C compiler '{cmd[0]}' could not be run ({err.strerror}); set CC to "
            f"an executable compiler. command: {shlex.join(cmd)}"
        ) from None
    if proc.returncode != 0:
        output = (proc.stderr + proc.stdout).splitlines()
        shown = "\n".join(output[:_MAX_OUTPUT_LINES])
        more = f"\n... ({len(output) - _MAX_OUTPUT_LINES} more lines)" if len(output) > 30 else ""
        raise ToolchainError(
            f"{what} failed with exit code {proc.returncode}\n"
            f"command: {shlex.join(cmd)}\n{shown}{more}"
        )


def _build(
    sources: Sequence[PathLike],
    output: PathLike,
    mode: list[str],
    include_dirs: Sequence[PathLike],
    flags: Sequence[str],
    openmp: bool,
    opt: str,
    cc: str | None,
    what: str,
) -> Path:
    out = Path(output)
    if not sources:
        raise ToolchainError(f"{what}: no source files given for {out}")
    missing = [str(s) for s in sources if not Path(s).exists()]
    if missing:
        raise ToolchainError(f"{what}: source files do not exist: {', '.join(missing)}")
    if out.is_dir():
        raise ToolchainError(f"{what}: the output {out} is a directory; pass a file path")
    cc_cmd = compiler(cc)
    if not cc_cmd:
        raise ToolchainError(f"{what}: the C compiler command is empty; set CC, e.g. CC=cc")
    cmd = [*cc_cmd, opt, *_BASE_FLAGS, *mode]
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        # an O_EXCL temporary in the output's directory, renamed over the output: a link
        # planted at a predictable name is never followed
        fd, tmp_name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    except OSError as err:
        raise ToolchainError(
            f"{what}: cannot write into {out.parent} ({err.strerror}); pick a writable "
            "output directory"
        ) from None
    os.close(fd)
    if openmp:
        cmd.append("-fopenmp")
    cmd += [f"-I{d}" for d in include_dirs]
    cmd += [str(s) for s in sources]
    cmd += ["-o", tmp_name, *flags]
    if sys.platform.startswith("linux") and "-shared" in mode:
        cmd.append("-lm")
    try:
        _run(cmd, what)
        try:
            os.replace(tmp_name, out)
        except OSError as err:
            raise ToolchainError(
                f"{what}: cannot move the result to {out} ({err.strerror}); pick a writable "
                "file path"
            ) from None
    finally:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)
    return out


def compile_shared(
    sources: Sequence[PathLike],
    output: PathLike,
    *,
    include_dirs: Sequence[PathLike] = (),
    flags: Sequence[str] = (),
    openmp: bool = True,
    opt: str = "-O2",
    cc: str | None = None,
) -> Path:
    """Compile and link C sources (or objects) into the shared library ``output``."""
    return _build(
        sources, output, ["-shared"], include_dirs, flags, openmp, opt, cc, "compile_shared"
    )


def compile_object(
    source: PathLike,
    output: PathLike,
    *,
    include_dirs: Sequence[PathLike] = (),
    flags: Sequence[str] = (),
    openmp: bool = True,
    opt: str = "-O2",
    cc: str | None = None,
) -> Path:
    """Compile one C source into the object file ``output``."""
    return _build([source], output, ["-c"], include_dirs, flags, openmp, opt, cc, "compile_object")


def compile_executable(
    sources: Sequence[PathLike],
    output: PathLike,
    *,
    include_dirs: Sequence[PathLike] = (),
    flags: Sequence[str] = (),
    openmp: bool = True,
    opt: str = "-O2",
    cc: str | None = None,
) -> Path:
    """Compile and link C sources (or objects) into the program ``output``."""
    return _build(
        sources, output, [], include_dirs, [*flags, "-lm"], openmp, opt, cc, "compile_executable"
    )
