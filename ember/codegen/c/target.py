"""The ``c`` target kind: its options (declared here, once) and its ``tir_to_runtime`` hook.

Importing this module registers the kind through the same public calls an external back
end uses (``register_func`` for the hook, ``register_target_kind`` for the kind); the
package's ``ember.target_kinds`` entry point names this module, so ``Target.create("c")``
finds it without anyone importing the code generator first.
"""

from __future__ import annotations

from typing import Any

from ember.codegen.c.build import DEFAULT_MAX_FILE_BYTES, build_c
from ember.codegen.c.metadata import metadata_sources
from ember.runtime.registry import register_func
from ember.target import TargetKind, TargetOption, register_target_kind
from ember.target.kind import DEVICE_CPU

#: the registered name of the C back end's tir_to_runtime hook (TVM's name).
BUILD_FUNC = "target.build.c"


def _cpu_name(value: Any) -> str | None:
    ok = all(ch.isalnum() or ch in "-_." for ch in value)
    return None if ok else "is not a CPU name (letters, digits, '-', '_' and '.')"


def _at_least(low: int, high: int | None = None) -> Any:
    def check(value: Any) -> str | None:
        if value < low or (high is not None and value > high):
            return f"must be {low}-{high}" if high is not None else f"must be at least {low}"
        return None

    return check


def _float_abi(value: Any) -> str | None:
    return (
        None
        if value in FLOAT_ABIS
        else "must be 'hard', 'softfp', 'soft' or '' (the core's default)"
    )


#: -float-abi values: '' picks hard on a microcontroller with an FPU, soft on one without.
FLOAT_ABIS = ("", "hard", "softfp", "soft")

C_OPTIONS = {
    "mcpu": TargetOption(
        str,
        "native",
        "CPU to tune for: passed as -march= (-mcpu= on Arm). An M-profile core "
        "(cortex-m0 ... cortex-m85) makes the target portable C for a microcontroller: "
        "-mthumb, no OpenMP pragmas, no libmvec, one thread (ignoring -openmp, -vector-math "
        "and -num-threads), the vector width from ember.target.cpu",
        _cpu_name,
    ),
    "float-abi": TargetOption(
        str,
        "",
        "microcontrollers only: floating-point ABI, passed as -mfloat-abi= ('hard', "
        "'softfp', 'soft'; default hard when the core has an FPU, else soft)",
        _float_abi,
    ),
    "opt-level": TargetOption(int, 3, "C compiler optimisation level (-O<n>)", _at_least(0, 3)),
    "openmp": TargetOption(bool, True, "parallel loops use OpenMP"),
    "num-threads": TargetOption(int, 0, "threads for parallel loops (0: all cores)", _at_least(0)),
    "vector-math": TargetOption(
        bool, True, "vectorised libm calls through glibc's libmvec when a probe says it works"
    ),
    "max-file-bytes": TargetOption(
        int,
        DEFAULT_MAX_FILE_BYTES,
        "start a new C file past this size, so large models compile on every core",
        _at_least(1),
    ),
    "executor": TargetOption(
        str,
        "graph",
        "executor of builds that name none: 'graph', 'aot' or a quoted spec such as "
        "'aot -interface-api=c' (ember.Executor)",
    ),
    "export-unpacked": TargetOption(
        bool, False, "export each kernel's unpacked C function too (not only its wrapper)"
    ),
}

register_func(BUILD_FUNC, build_c)
register_func(BUILD_FUNC + ".metadata", metadata_sources)
register_target_kind(
    TargetKind(
        "c",
        device_type=DEVICE_CPU,
        options=C_OPTIONS,
        hooks={"tir_to_runtime": BUILD_FUNC},
        doc="C source for the host CPU, compiled and linked by the system C compiler.",
    )
)
