"""What a CPU target offers to schedules: vector width, vector registers and its target key.

Schedules are chosen by (target key, op) and size their register tiles from this record, so
an AVX-512 tile (32 registers of 16 floats) and an AVX2 or NEON tile live side by side.
``-mcpu=native`` reads the host's features once; a named CPU is looked up in a small table
of families (unknown names get the conservative generic record).

Example::

    info = cpu_info("native")     # CpuInfo(key='x86-avx512', arch='x86', vector_bits=512, ...)
    info.lanes(32)                # 16 float32 lanes
"""

from __future__ import annotations

import functools
import platform
from dataclasses import dataclass

from ember.support.cpuinfo import host_cpu_flags


@dataclass(frozen=True)
class CpuInfo:
    """Vector resources of one CPU, as schedules see them."""

    key: str
    arch: str
    vector_bits: int
    vector_registers: int

    def lanes(self, element_bits: int = 32) -> int:
        """Vector lanes for elements of ``element_bits`` bits."""
        return max(1, self.vector_bits // element_bits)

    @property
    def keys(self) -> tuple[str, ...]:
        """Target keys from most to least specific, ending in ``cpu``."""
        return tuple(dict.fromkeys((self.key, self.arch, "cpu")))


X86_AVX512 = CpuInfo("x86-avx512", "x86", 512, 32)
X86_AVX2 = CpuInfo("x86-avx2", "x86", 256, 16)
X86_SSE = CpuInfo("x86-sse", "x86", 128, 16)
ARM_NEON = CpuInfo("arm-neon", "arm", 128, 32)
GENERIC = CpuInfo("cpu", "cpu", 128, 16)
#: microcontrollers: a scalar FPU (DSP SIMD is 32 bits wide); cortex-m55/m85 (Helium,
#: 128-bit vectors) keep the 128-bit "cortex-" record
ARM_M = CpuInfo("arm-m", "arm-m", 32, 16)

#: named -mcpu values by family prefix (gcc's names); checked longest prefix first.
_NAMED: dict[str, CpuInfo] = {
    "x86-64-v4": X86_AVX512,
    "skylake-avx512": X86_AVX512,
    "cascadelake": X86_AVX512,
    "cooperlake": X86_AVX512,
    "icelake": X86_AVX512,
    "tigerlake": X86_AVX512,
    "sapphirerapids": X86_AVX512,
    "graniterapids": X86_AVX512,
    "emeraldrapids": X86_AVX512,
    "znver4": X86_AVX512,
    "znver5": X86_AVX512,
    "x86-64-v3": X86_AVX2,
    "haswell": X86_AVX2,
    "broadwell": X86_AVX2,
    "skylake": X86_AVX2,
    "alderlake": X86_AVX2,
    "raptorlake": X86_AVX2,
    "znver1": X86_AVX2,
    "znver2": X86_AVX2,
    "znver3": X86_AVX2,
    "x86-64-v2": X86_SSE,
    "x86-64": X86_SSE,
    "cortex-": ARM_NEON,
    "cortex-m": ARM_M,
    "cortex-m55": ARM_NEON,
    "cortex-m85": ARM_NEON,
    "neoverse-": ARM_NEON,
    "apple-": ARM_NEON,
    "armv8": ARM_NEON,
}


def is_microcontroller(mcpu: str) -> bool:
    """Whether ``mcpu`` names an M-profile Arm core (no OS, no threads, no libmvec)."""
    return mcpu.startswith("cortex-m") and mcpu[len("cortex-m") :][:1].isdigit()


def cpu_info(mcpu: str = "native") -> CpuInfo:
    """The vector resources of ``mcpu`` (``native``: this machine's)."""
    if mcpu in ("", "native"):
        return host_cpu_info()
    if mcpu in _NAMED:
        return _NAMED[mcpu]
    for prefix in sorted(_NAMED, key=len, reverse=True):
        rest = mcpu[len(prefix) :]
        ok = (
            prefix.endswith("-")
            or rest[:1] in ("-", ".")
            or (prefix == "cortex-m" and rest[:1].isdigit())
        )
        if mcpu.startswith(prefix) and ok:
            return _NAMED[prefix]
    return GENERIC


@functools.lru_cache(maxsize=1)
def host_cpu_info() -> CpuInfo:
    """This machine's vector resources, read once from the processor's feature flags."""
    machine = platform.machine().lower()
    if machine in ("aarch64", "arm64"):
        return ARM_NEON
    if machine not in ("x86_64", "amd64"):
        return GENERIC
    flags = host_cpu_flags()
    if "avx512f" in flags:
        return X86_AVX512
    if "avx2" in flags and "fma" in flags:
        return X86_AVX2
    return X86_SSE
