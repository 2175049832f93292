"""Registry: the one class behind every piece of global mutable state in ember.

Example::

    kinds = Registry("target kind")
    kinds.register("c", CTargetKind())
    kinds.get("c")          # -> CTargetKind()
    kinds.get("cuda")       # RegistryError: unknown target kind 'cuda'; known: c
"""

from __future__ import annotations

import difflib
import threading
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from ember.errors import RegistryError

T = TypeVar("T")


class Registry(Generic[T]):
    """A named, thread-safe mapping from string keys to values with helpful misses."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._items: dict[str, T] = {}
        self._lock = threading.RLock()

    def register(self, name: str, value: T, override: bool = False) -> T:
        """Add ``value`` under ``name``; a duplicate raises unless ``override`` is true."""
        if not isinstance(name, str) or not name:
            raise RegistryError(f"a {self.what} name must be a non-empty string, got {name!r}")
        with self._lock:
            if name in self._items and not override:
                raise RegistryError(
                    f"{self.what} '{name}' is already registered; pass override=True to replace it"
                )
            self._items[name] = value
        return value

    def decorator(self, name: str, override: bool = False) -> Callable[[T], T]:
        """Return a decorator that registers the decorated object under ``name``."""

        def wrap(value: T) -> T:
            return self.register(name, value, override=override)

        return wrap

    def unregister(self, name: str) -> None:
        """Remove ``name``; missing names raise."""
        with self._lock:
            if name not in self._items:
                raise RegistryError(self.miss_message(name))
            del self._items[name]

    def get(self, name: str) -> T:
        """Return the value registered under ``name`` or raise naming the known ones."""
        try:
            return self._items[name]
        except KeyError:
            raise RegistryError(self.miss_message(name)) from None

    def find(self, name: str) -> T | None:
        """Return the value under ``name`` or None."""
        return self._items.get(name)

    def miss_message(self, name: str) -> str:
        """The message for a miss: close matches first, then (a bounded list of) known names."""
        names = sorted(self._items)
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
        msg = f"unknown {self.what} '{name}'"
        if close:
            msg += f"; did you mean {', '.join(repr(c) for c in close)}?"
        if names:
            shown = ", ".join(names[:40]) + (", ..." if len(names) > 40 else "")
            msg += f"; known: {shown}"
        else:
            msg += f"; no {self.what} is registered"
        return msg

    def names(self) -> list[str]:
        """All registered names, sorted."""
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Registry({self.what!r}, {len(self)} entries)"
