"""A known LLVM bug, kept as a check: the loop vectorizer misreads ``base | (i & 3)``.

``data/lv_disjoint_or_mask.ll`` is the reduced reproducer (ONNX Tile), run through the
back end's own pass pipeline (``worker.run_pipeline``: -O3, LLVM's unroller off) and
MCJIT. The plain loop computes wrong values on LLVM 22.1.0 (xfail: an XPASS means this
LLVM is fixed); the same loop with ``llvm.loop.vectorize.enable false``, which the back
end puts on such loops (``loop_hints.unsafe_to_vectorize``), must be right. The upstream
report is in docs/llvm.md, "Known LLVM bug".
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

llvm = pytest.importorskip("llvmlite.binding")

from ember.codegen.llvm import worker  # noqa: E402
from ember.codegen.llvm.machine import MachineSpec  # noqa: E402

REPRO = Path(__file__).parent / "data" / "lv_disjoint_or_mask.ll"
_KERNEL = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)


@pytest.fixture(scope="module")
def engine() -> Iterator[llvm.ExecutionEngine]:
    """The reproducer optimised by the back end's pipeline and JIT-compiled here."""
    spec = MachineSpec.create("", "native", "", 3, jit=True)
    mod = worker.parse_text(REPRO.read_text(encoding="utf-8"))
    worker.run_pipeline(mod, spec.as_tuple())
    ee = llvm.create_mcjit_compiler(mod, worker.new_machine(spec.as_tuple()))
    ee.finalize_object()
    yield ee


def _wrong_rows(ee: llvm.ExecutionEngine, name: str) -> list[int]:
    fn = _KERNEL(ee.get_function_address(name))
    src = np.arange(64, dtype=np.float32)
    wrong = []
    for k in range(8):
        dst = np.zeros(16, np.float32)
        fn(src.ctypes.data, dst.ctypes.data, k)
        if not np.array_equal(dst, np.tile(src[4 * k : 4 * k + 4], 4)):
            wrong.append(k)
    return wrong


@pytest.mark.xfail(reason="LLVM 22 loop vectorizer miscompile (docs/llvm.md)", strict=False)
def test_plain_loop_is_compiled_right(engine: llvm.ExecutionEngine) -> None:
    """Fails while the bug is in this LLVM (x86-64 with AVX2)."""
    assert _wrong_rows(engine, "tile") == []


def test_loop_with_vectorize_disabled_is_right(engine: llvm.ExecutionEngine) -> None:
    """The workaround the back end applies: the same loop, vectorizer off."""
    assert _wrong_rows(engine, "tile_novec") == []
