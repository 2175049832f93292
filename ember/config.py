"""Settings: every flag ember reads from the environment, declared once with its help text.

The environment is read on the first call to :func:`config` and never again, so a setting
cannot change behind a running program. Example::

    from ember.config import config
    config().cc           # "cc" unless CC is set
    config().cache_dir    # Path("~/.cache/ember") unless EMBER_CACHE_DIR is set
"""

from __future__ import annotations

import dataclasses
import os
import pwd
import threading
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from ember.errors import EmberValueError


class ThreadCountWarning(UserWarning):
    """More threads were asked for than this process has cores."""


@dataclass(frozen=True)
class Setting:
    """One flag: the environment variable it comes from, its default and what it does."""

    env: str
    default: str
    help: str


SETTINGS: dict[str, Setting] = {
    "cache_dir": Setting(
        "EMBER_CACHE_DIR",
        "~/.cache/ember",
        "directory for build products that are safe to share (the compiled C runtime)",
    ),
    "cc": Setting("CC", "cc", "the system C compiler used to build shared libraries"),
    "runtime_lib": Setting(
        "EMBER_RUNTIME_LIB",
        "",
        "a prebuilt C runtime library to load instead of compiling runtime.c (hosts with no cc)",
    ),
    "ffi_accel": Setting(
        "EMBER_FFI_ACCEL",
        "1",
        "1: build the optional CPython extension for fast packed calls; 0: ctypes only",
    ),
    "num_threads": Setting(
        "EMBER_NUM_THREADS",
        "0",
        "threads of ember's thread pool (parallel loops, EmberBackendParallelLaunch), the "
        "caller's included; 0 means one per core",
    ),
}


@dataclass(frozen=True)
class Config:
    """The typed values of every setting in :data:`SETTINGS`."""

    cache_dir: Path = field(default_factory=lambda: Path("~/.cache/ember").expanduser())
    cc: str = "cc"
    runtime_lib: Path | None = None
    num_threads: int = 0
    ffi_accel: bool = True


def _parse(env: dict[str, str]) -> Config:
    raw = {name: env.get(s.env, s.default) for name, s in SETTINGS.items()}
    try:
        num_threads = int(raw["num_threads"])
    except ValueError:
        raise EmberValueError(
            f"EMBER_NUM_THREADS must be an integer, got {raw['num_threads']!r}; "
            "unset it or set a number like 4"
        ) from None
    if num_threads < 0:
        raise EmberValueError(f"EMBER_NUM_THREADS must be >= 0, got {num_threads}")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if cores and num_threads > cores:
        warnings.warn(
            f"EMBER_NUM_THREADS={num_threads} is more than the {cores} cores of this process: "
            f"threads will wait for each other; set it to at most {cores}",
            ThreadCountWarning,
            stacklevel=2,
        )
    return Config(
        cache_dir=_cache_dir(raw["cache_dir"], env),
        cc=raw["cc"] or "cc",
        runtime_lib=Path(raw["runtime_lib"]).expanduser() if raw["runtime_lib"] else None,
        num_threads=num_threads,
        ffi_accel=raw["ffi_accel"].strip().lower() not in ("0", "false", "no", "off"),
    )


def _cache_dir(value: str, env: dict[str, str]) -> Path:
    """EMBER_CACHE_DIR expanded; empty means the default, and an empty HOME is refused."""
    text = value.strip() or SETTINGS["cache_dir"].default
    if text == "~" or text.startswith("~/"):
        home = env.get("HOME", "").strip() or _account_home()
        if not home or Path(home) == Path("/"):
            raise EmberValueError(
                "HOME is empty and the account has no home directory, so the ember cache has "
                "no place; set EMBER_CACHE_DIR to an absolute directory"
            )
        text = home + text[1:]
    path = Path(text).expanduser()
    if not path.is_absolute():
        raise EmberValueError(
            f"EMBER_CACHE_DIR={value!r} is not an absolute path (the cache would follow the "
            "current directory); set it to an absolute directory such as ~/.cache/ember"
        )
    return path


def _account_home() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_dir
    except (KeyError, AttributeError):
        return ""


_LOCK = threading.Lock()
_CONFIG: list[Config] = []


def config() -> Config:
    """Return the settings, reading the environment on the first call only."""
    if not _CONFIG:
        with _LOCK:
            if not _CONFIG:
                _CONFIG.append(_parse(dict(os.environ)))
    return _CONFIG[0]


def config_from(env: dict[str, str]) -> Config:
    """Parse settings from an explicit mapping (for tests and tools); does not cache."""
    return _parse(env)


def describe() -> str:
    """A human-readable table of every setting, its variable, default and current value."""
    current = config()
    lines = []
    for name, s in SETTINGS.items():
        value = dataclasses.asdict(current)[name]
        lines.append(f"{s.env:<20} {str(value):<30} {s.help} (default {s.default!r})")
    return "\n".join(lines)
