"""The host CPU's feature flags as the kernel reports them (``/proc/cpuinfo``)."""

from __future__ import annotations

import functools
from pathlib import Path


@functools.lru_cache(maxsize=1)
def host_cpu_flags() -> frozenset[str]:
    """This CPU's feature flags (x86 ``flags``, Arm ``Features``); empty when unknown."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key = line.partition(":")[0].strip()
        if key in ("flags", "Features"):
            return frozenset(line.partition(":")[2].split())
    return frozenset()
