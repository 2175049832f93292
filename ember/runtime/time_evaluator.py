"""time_evaluator: TVM's timing loop, in C for C functions and in Python otherwise.

Semantics (TVM's): one discarded warm-up call; then ``repeat`` rounds; each round calls
the function ``number`` times, and while a round lasts less than ``min_repeat_ms`` the
round is redone with ``number`` grown (to at least 1.618x); ``number`` keeps its grown
value for later rounds. Each result is the round's mean seconds per call.
"""

from __future__ import annotations

import ctypes
import statistics
import time
from dataclasses import dataclass
from typing import Any

from ember.errors import EmberValueError
from ember.runtime import c_api
from ember.runtime.call_frame import CallBuffers
from ember.runtime.device import Device
from ember.runtime.packed_func import PackedFunc, _pack


@dataclass(frozen=True)
class BenchmarkResult:
    """Per-repeat mean seconds per call, with summary statistics."""

    results: tuple[float, ...]

    @property
    def mean(self) -> float:
        """Mean of the per-repeat results (seconds)."""
        return statistics.fmean(self.results)

    @property
    def median(self) -> float:
        """Median of the per-repeat results (seconds)."""
        return statistics.median(self.results)

    @property
    def std(self) -> float:
        """Population standard deviation of the per-repeat results (seconds)."""
        return statistics.pstdev(self.results) if len(self.results) > 1 else 0.0

    @property
    def min(self) -> float:
        """Fastest repeat (seconds)."""
        return min(self.results)

    @property
    def max(self) -> float:
        """Slowest repeat (seconds)."""
        return max(self.results)

    def __str__(self) -> str:
        return (
            f"mean {self.mean * 1e6:.3f} us, median {self.median * 1e6:.3f} us, "
            f"std {self.std * 1e6:.3f} us over {len(self.results)} repeats"
        )


#: Upper bounds of the timing arguments, checked before they reach C (its counters are int32).
MAX_NUMBER = MAX_REPEAT = 1 << 24
MAX_INTERVAL_MS = 3_600_000


def check_timing_args(number: int, repeat: int, min_repeat_ms: int, cooldown_ms: int) -> None:
    """Refuse timing arguments that are not integers in range (EmberValueError saying which)."""
    limits = {
        "number": (number, 1, MAX_NUMBER),
        "repeat": (repeat, 1, MAX_REPEAT),
        "min_repeat_ms": (min_repeat_ms, 0, MAX_INTERVAL_MS),
        "cooldown_interval_ms": (cooldown_ms, 0, MAX_INTERVAL_MS),
    }
    for name, (value, low, high) in limits.items():
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not ok or not low <= value <= high:
            raise EmberValueError(
                f"time_evaluator: {name}={value!r} must be a number in [{low}, {high}]; "
                "pass a smaller value"
            )


class TimeEvaluator:
    """Calling it with the function's arguments returns a :class:`BenchmarkResult`."""

    def __init__(
        self,
        func: PackedFunc,
        dev: Device,
        number: int = 10,
        repeat: int = 1,
        min_repeat_ms: int = 0,
        cooldown_interval_ms: int = 0,
    ) -> None:
        check_timing_args(number, repeat, min_repeat_ms, cooldown_interval_ms)
        self.func = func
        self.dev = dev
        self.number = number
        self.repeat = repeat
        self.min_repeat_ms = min_repeat_ms
        self.cooldown_interval_ms = cooldown_interval_ms

    @property
    def uses_c_loop(self) -> bool:
        """Whether the timing loop runs in C (the function body is C)."""
        return self.func.c_entry() is not None

    def __call__(self, *args: Any) -> BenchmarkResult:
        if self.uses_c_loop:
            return self._time_in_c(args)
        return self._time_in_python(args)

    def _time_in_c(self, args: tuple[Any, ...]) -> BenchmarkResult:
        buf = CallBuffers(max(len(args), 1))
        keep = _pack(args, buf)
        out = (ctypes.c_double * self.repeat)()
        ret = c_api.lib().EmberTimeEvaluate(
            self.func.handle,
            buf.values_addr,
            buf.codes_addr,
            len(args),
            self.number,
            self.repeat,
            self.min_repeat_ms,
            self.cooldown_interval_ms,
            out,
        )
        del keep
        c_api.check_call(ret)
        return BenchmarkResult(tuple(out))

    def _time_in_python(self, args: tuple[Any, ...]) -> BenchmarkResult:
        func = self.func
        func(*args)  # warm-up, not timed
        number = self.number
        results = []
        for r in range(self.repeat):
            duration_ms = 0.0
            while True:
                if duration_ms > 0.0:
                    number = int(
                        max(self.min_repeat_ms / (duration_ms / number) + 1, number * 1.618)
                    )
                begin = time.perf_counter()
                for _ in range(number):
                    func(*args)
                duration_ms = (time.perf_counter() - begin) * 1e3
                if duration_ms >= self.min_repeat_ms:
                    break
            results.append(duration_ms * 1e-3 / number)
            if self.cooldown_interval_ms and r + 1 < self.repeat:
                time.sleep(self.cooldown_interval_ms / 1e3)
        return BenchmarkResult(tuple(results))
