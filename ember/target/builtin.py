"""The built-in target kinds; importing this module registers them with register_target_kind."""

from __future__ import annotations

from ember.target.kind import DEVICE_CPU, TargetKind, TargetOption, register_target_kind

C_OPTIONS = {
    "mcpu": TargetOption(str, "native", "CPU to tune for: passed as -march= to the C compiler"),
    "opt-level": TargetOption(int, 3, "C compiler optimisation level (-O<n>)"),
    "openmp": TargetOption(bool, True, "parallel loops use OpenMP"),
    "num-threads": TargetOption(int, 0, "threads for parallel loops (0: all cores)"),
    "vector-math": TargetOption(
        bool, True, "vectorised libm calls through glibc's libmvec when a probe says it works"
    ),
}

register_target_kind(
    TargetKind(
        "c",
        device_type=DEVICE_CPU,
        options=C_OPTIONS,
        doc="C source for the host CPU, compiled and linked by the system C compiler.",
    )
)
