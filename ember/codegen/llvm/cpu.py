"""The CPU record (``ember.target.cpu``) of an llvm target: ``-mcpu`` read with ``-mtriple``
and ``-mattr``, as LLVM compiles for them.

Schedules size vectors and register tiles by the target's CPU record (``Target.cpu``), and
call the float32 micro-kernels only where it is ``x86-avx2`` (AVX2 and FMA:
``ember.ops.nn_conv_f32.use_tile_kernel``). For ``c`` the record follows ``-mcpu`` alone; the
llvm kinds name the triple and features too, so:

* ``-mcpu=native`` with a triple other than this process's is LLVM's ``generic`` CPU
  (``machine.MachineSpec``): the generic record, not the host's;
* ``-mattr`` adds or removes x86 features: ``-mattr=-fma`` leaves an AVX2 CPU without FMA
  (the 128-bit ``x86-sse`` record: no micro-kernels), ``-mattr=+avx2,+fma`` gives an SSE CPU
  the ``x86-avx2`` record. Only the features that choose a record are read (AVX, AVX2, FMA,
  AVX-512F) with LLVM's implications among them (AVX-512F implies AVX2 and FMA, which imply
  AVX; removing one removes what implies it).

Example::

    llvm_cpu("", "haswell", "-fma")                     # X86_SSE
    llvm_cpu("aarch64-linux-gnu", "native", "")         # GENERIC
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from ember.codegen.llvm.machine import host_triple
from ember.target.cpu import GENERIC, X86_AVX2, X86_AVX512, X86_SSE, CpuInfo, cpu_info

#: the x86 features each record stands for.
_RECORD_FEATURES: dict[str, frozenset[str]] = {
    X86_AVX512.key: frozenset({"avx", "avx2", "fma", "avx512f"}),
    X86_AVX2.key: frozenset({"avx", "avx2", "fma"}),
    X86_SSE.key: frozenset(),
}

#: what enabling a feature enables with it.
_ENABLES: dict[str, frozenset[str]] = {
    "avx": frozenset({"avx"}),
    "avx2": frozenset({"avx", "avx2"}),
    "fma": frozenset({"avx", "fma"}),
    "avx512f": frozenset({"avx", "avx2", "fma", "avx512f"}),
}

#: what disabling a feature disables with it.
_DISABLES: dict[str, frozenset[str]] = {
    "avx": frozenset({"avx", "avx2", "fma", "avx512f"}),
    "avx2": frozenset({"avx2", "avx512f"}),
    "fma": frozenset({"fma", "avx512f"}),
    "avx512f": frozenset({"avx512f"}),
}


def _record(features: frozenset[str]) -> CpuInfo:
    if "avx512f" in features:
        return X86_AVX512
    if {"avx2", "fma"} <= features:
        return X86_AVX2
    return X86_SSE


@functools.cache
def llvm_cpu(mtriple: str, mcpu: str, mattr: str) -> CpuInfo:
    """The CPU record LLVM compiles for with these option values (see the module text)."""
    foreign = bool(mtriple) and mtriple != host_triple()
    base = GENERIC if mcpu in ("", "native") and foreign else cpu_info(mcpu or "native")
    if base.key not in _RECORD_FEATURES or not mattr:
        return base
    features = set(_RECORD_FEATURES[base.key])
    for item in filter(None, (x.strip() for x in mattr.split(","))):
        name = item[1:]
        if item[0] == "+":
            features |= _ENABLES.get(name, frozenset())
        elif item[0] == "-":
            features -= _DISABLES.get(name, frozenset())
    return _record(frozenset(features))


def target_cpu(attrs: Mapping[str, Any]) -> CpuInfo:
    """``TargetKind.cpu`` of the llvm kinds: :func:`llvm_cpu` of a target's option values."""
    return llvm_cpu(
        str(attrs.get("mtriple", "")), str(attrs.get("mcpu", "native")), str(attrs.get("mattr", ""))
    )
