"""Advice that fits the entry point: a message names the CLI flag or the Python argument.

Errors say what to do next, and what to do depends on where the user stands: ``ember
compile`` users pass ``--input-shape``, Python users pass ``from_onnx(shape=...)``. The
CLI runs its commands inside ``entry_point("cli")``; a message picks its advice with
:func:`advice`::

    raise FrontendError("unknown dims; " + advice(
        python="pass shape={'x': (1, 3, 224, 224)} to from_onnx",
        cli="pass --input-shape x:1,3,224,224",
    ))
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from ember.errors import EmberValueError

#: The entry points whose users get their own advice.
ENTRY_POINTS = ("python", "cli")

_CURRENT: ContextVar[str] = ContextVar("ember_entry_point", default="python")


def current_entry_point() -> str:
    """``"cli"`` inside an ``ember`` command, else ``"python"``."""
    return _CURRENT.get()


@contextmanager
def entry_point(name: str) -> Iterator[None]:
    """Give the messages raised inside the block the advice of entry point ``name``."""
    if name not in ENTRY_POINTS:
        raise EmberValueError(f"entry point {name!r}: expected one of {ENTRY_POINTS}")
    token = _CURRENT.set(name)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def advice(python: str, cli: str) -> str:
    """The advice for the current entry point: ``cli`` inside an ``ember`` command."""
    return cli if _CURRENT.get() == "cli" else python
