"""The child process of the artifact-set mutation test: load and run each set named on stdin.

Each line is the path of a saved artifact set. The child loads it (``load_artifacts``, as
``ember run`` does), makes the model's executor (graph or AOT), sets every input to zeros,
runs it once and reads every output (an AOT build also profiles once: its kernels run
over its graph.json). Its address space is capped (``EMBER_FUZZ_AS_BYTES``,
RLIMIT_AS) so that an unbounded allocation fails instead of taking the machine, and every
array ember allocates ends at an inaccessible page (``EMBER_FUZZ_GUARD``, on by default)
so that a write past a buffer faults instead of passing silently.

For every set it prints ``START n`` before and ``DONE n ok`` or ``DONE n ember <type>``
after; any other exception prints ``NONEMBER n <type>: <message>`` and exits 3, so the
parent can tell which set did what, and a signal or a hang is attributed to the last
``START``.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import resource
import sys

import numpy as np

import ember.runtime.ndarray as nd_module
from ember.errors import EmberError
from ember.executor import AotExecutor, GraphExecutor
from ember.executor.aot_executor import AotExecutorModule
from ember.runtime.device import cpu
from ember.runtime.loading import load_artifacts

#: the address-space cap: a Python with ember, numpy and a loaded model maps about 1 GiB
#: (measured: resnet8, VmPeak 0.9 GiB), the C compiler at load less than that
DEFAULT_AS_BYTES = 4 << 30


PAGE = mmap.PAGESIZE
PROT_NONE = 0
_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)


def guarded_buffer(nbytes: int, zero: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """ndarray's ``_aligned_buffer`` with the window ending (64-byte aligned) right before
    an inaccessible page: a kernel or run function writing past the buffer it was given
    faults at once (a signal the parent sees) instead of corrupting memory silently."""
    del zero  # anonymous pages are zero
    align = nd_module.ALIGNMENT
    span = -(-(nbytes + align) // PAGE) * PAGE
    try:
        area = mmap.mmap(-1, span + PAGE)
    except (OSError, OverflowError) as err:
        raise MemoryError(str(err)) from None
    raw = np.frombuffer(area, dtype=np.uint8)
    base = raw.ctypes.data
    if _LIBC.mprotect(base + span, PAGE, PROT_NONE):
        raise MemoryError("mprotect failed")
    start = (span - nbytes) // align * align
    return raw, raw[start : start + nbytes]


def zeros_for(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """An input of ``shape`` and ``dtype``: zeros, or the string "ab" for string inputs."""
    if dtype == "string":
        return np.full(shape, "ab", dtype=object)
    return np.zeros(shape, dtype)


def handle(path: str) -> None:
    """Load the saved set at ``path``, run it once on zeros and read its outputs."""
    dev = cpu(0)
    factory = load_artifacts(path, dev, trust_native=True)  # the fuzz mutates data files only
    module = factory[factory["get_metadata"]().mod_name](dev)
    ex = AotExecutor(module) if isinstance(module, AotExecutorModule) else GraphExecutor(module)
    for name, shape in ex.get_input_info()["shape"].items():
        ex.set_input(name, zeros_for(tuple(shape), ex.get_input_info()["dtype"][name]))
    ex.run()
    for i in range(ex.get_num_outputs()):
        ex.get_output(i).numpy()
    if isinstance(module, AotExecutorModule):  # runs the kernels over the AOT's graph.json
        ex.profile(repeat=1)


def main() -> int:
    """Read set paths from stdin and report on each."""
    limit = int(os.environ.get("EMBER_FUZZ_AS_BYTES", DEFAULT_AS_BYTES))
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    if os.environ.get("EMBER_FUZZ_GUARD", "1") == "1":
        nd_module._aligned_buffer = guarded_buffer  # type: ignore[assignment]
    for n, line in enumerate(sys.stdin):
        print(f"START {n}", flush=True)
        try:
            handle(line.rstrip("\n"))
            verdict = "ok"
        except EmberError as err:
            verdict = f"ember {type(err).__name__}"
        except Exception as err:  # noqa: BLE001 - the point is to report it
            print(f"NONEMBER {n} {type(err).__name__}: {str(err)[:300]}", flush=True)
            return 3
        print(f"DONE {n} {verdict}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
