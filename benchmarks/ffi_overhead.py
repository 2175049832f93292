"""Per-call overhead of the Python -> C packed call, next to raw ctypes and tvm_ffi.

Run: ``.venv/bin/python benchmarks/ffi_overhead.py``. It compiles one no-op C file three
ways (ember packed, plain C parameters for ctypes, TVM-FFI safe call when ``tvm_ffi`` is
importable) into a temporary directory and prints nanoseconds per call (best of several
repeats) for 0 args, 3 ints and 3 NDArrays, plus the ratio ember / raw ctypes.
"""

from __future__ import annotations

import ctypes
import importlib.util
import sys
import tempfile
import timeit
from pathlib import Path

import numpy as np

import ember
import ember.runtime as rt
from ember.support.toolchain import compile_shared

EMBER_SOURCE = r"""
#include <ember/runtime_api.h>
EMBER_DLL int32_t noop(EmberValue* args, int32_t* codes, int32_t n, EmberValue* ret,
                       int32_t* ret_code, void* resource) { return 0; }
"""

RAW_SOURCE = r"""
#include <stdint.h>
void noop0(void) {}
void noop_ints(int64_t a, int64_t b, int64_t c) {}
void noop_ptrs(void* a, void* b, void* c) {}
"""

TVM_FFI_SOURCE = r"""
#include <tvm/ffi/c_api.h>
__attribute__((visibility("default")))
int __tvm_ffi_noop(void* self, const TVMFFIAny* args, int32_t num_args, TVMFFIAny* result) {
  return 0;
}
"""


def measure(stmts: list[str], env: dict, number: int = 20_000, rounds: int = 25) -> list[float]:
    """Best nanoseconds per call of each statement; rounds interleave all statements so that
    load from other processes hits every case alike."""
    timers = [timeit.Timer(stmt, globals=env) for stmt in stmts]
    for timer in timers:
        timer.timeit(number)  # warm-up
    best = [float("inf")] * len(stmts)
    for _ in range(rounds):
        for k, timer in enumerate(timers):
            best[k] = min(best[k], timer.timeit(number) / number * 1e9)
    return best


def build(tmp: Path) -> dict:
    """Compile the three no-op libraries; return what the timed statements need."""
    (tmp / "ember_noop.c").write_text(EMBER_SOURCE)
    (tmp / "raw_noop.c").write_text(RAW_SOURCE)
    ember_lib = compile_shared(
        [tmp / "ember_noop.c"], tmp / "ember_noop.so", include_dirs=[rt.include_dir()]
    )
    raw_lib = compile_shared([tmp / "raw_noop.c"], tmp / "raw_noop.so", openmp=False)
    env: dict = {}
    env["ef"] = ember.load_module(ember_lib)["noop"]
    raw = ctypes.CDLL(str(raw_lib))
    raw.noop0.argtypes, raw.noop0.restype = [], None
    raw.noop_ints.argtypes = [ctypes.c_int64] * 3
    raw.noop_ints.restype = None
    raw.noop_ptrs.argtypes = [ctypes.c_void_p] * 3
    raw.noop_ptrs.restype = None
    env["r0"], env["ri"], env["rp"] = raw.noop0, raw.noop_ints, raw.noop_ptrs
    arrays = [ember.nd.array(np.zeros(16, "float32")) for _ in range(3)]
    env["a"], env["b"], env["c"] = arrays
    env["pa"], env["pb"], env["pc"] = (x.data_ptr for x in arrays)
    if importlib.util.find_spec("tvm_ffi") is not None:
        import tvm_ffi
        from tvm_ffi import libinfo

        (tmp / "tvm_noop.c").write_text(TVM_FFI_SOURCE)
        inc = [libinfo.find_include_path(), libinfo.find_dlpack_include_path()]
        tvm_lib = compile_shared(
            [tmp / "tvm_noop.c"], tmp / "tvm_noop.so", include_dirs=inc, openmp=False
        )
        env["tf"] = tvm_ffi.load_module(str(tvm_lib))["noop"]
        tensors = [tvm_ffi.from_dlpack(np.zeros(16, "float32")) for _ in range(3)]
        env["ta"], env["tb"], env["tc"] = tensors
    return env


CASES = [
    ("0 args", "ef()", "r0()", "tf()"),
    ("3 ints", "ef(1, 2, 3)", "ri(1, 2, 3)", "tf(1, 2, 3)"),
    ("3 NDArrays", "ef(a, b, c)", "rp(pa, pb, pc)", "tf(ta, tb, tc)"),
]


def main() -> int:
    """Print the table (the exit code is 0 either way: this measures, it does not gate)."""
    with tempfile.TemporaryDirectory() as tmp:
        env = build(Path(tmp))
        has_tvm = "tf" in env
        print(f"{'case':<12} {'ember ns':>10} {'ctypes ns':>10} {'ratio':>7} {'tvm_ffi ns':>11}")
        worst = 0.0
        for name, ours, raw, tvm in CASES:
            stmts = [ours, raw] + ([tvm] if has_tvm else [])
            times = measure(stmts, env)
            t_tvm = f"{times[2]:11.0f}" if has_tvm else f"{'n/a':>11}"
            ratio = times[0] / times[1]
            worst = max(worst, ratio)
            print(f"{name:<12} {times[0]:10.0f} {times[1]:10.0f} {ratio:7.2f} {t_tvm}")
        verdict = "met" if worst <= 2.0 else "NOT met"
        print(f"worst ratio ember / raw ctypes: {worst:.2f} (target <= 2.0: {verdict})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
