"""A C kernel source compiled into a loadable library, for the kernel tests that run the
generated C with and without AVX2 against a Python reference."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest


def build_c_library(tmp_path: Path, source: str, march: str) -> ctypes.CDLL:
    """``source`` (after the standard integer and math headers) built with ``-march``."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    src = tmp_path / "k.c"
    src.write_text("#include <stdint.h>\n#include <math.h>\n" + source)
    lib = tmp_path / f"k_{march}.so"
    cmd = [cc, "-O2", f"-march={march}", "-shared", "-fPIC", str(src), "-o", str(lib), "-lm"]
    subprocess.run(cmd, check=True, capture_output=True)
    return ctypes.CDLL(str(lib))


def host_libraries(
    factory: pytest.TempPathFactory, source: str, builds: dict[str, set[str]]
) -> dict[str, ctypes.CDLL]:
    """``source`` built once per ``-march`` of ``builds`` (march -> the CPU features it
    needs) that the host can run, by march."""
    from ember.runtime.cpu_features import host_features

    have = host_features()
    return {
        march: build_c_library(Path(factory.mktemp(march)), source, march)
        for march, needs in builds.items()
        if needs <= have
    }


def call_tile(fn: Any, acc: np.ndarray, x: np.ndarray, w: np.ndarray, args: list[int]) -> None:
    """Call a wrapper ``int32_t fn(float* acc, const float* x, const float* w, const int32_t*
    a)`` of a tile kernel (its integer arguments from ``args``) and check it returned 0."""
    ptr = ctypes.POINTER(ctypes.c_float)
    a32 = np.array(args, np.int32)
    rc = fn(
        acc.ctypes.data_as(ptr),
        x.ctypes.data_as(ptr),
        w.ctypes.data_as(ptr),
        a32.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
    )
    assert rc == 0
