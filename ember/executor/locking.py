"""One lock per executor: its state-changing calls run one at a time (see docs/executor.md).

An executor owns one set of input, intermediate and output buffers, so two threads calling
``run`` on it at once would overwrite each other's values. :func:`synchronized` makes each
decorated method hold the executor's re-entrant lock ``_exec_lock`` for its whole call.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def new_lock() -> threading.RLock:
    """The lock an executor stores as ``_exec_lock`` in its ``__init__``."""
    return threading.RLock()


def synchronized(method: F) -> F:
    """Run ``method`` while holding ``self._exec_lock``."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self._exec_lock:
            return method(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]
