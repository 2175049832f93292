"""Regular expressions through the C library's POSIX regex (``regcomp``/``regexec``).

ONNX's RegexFullMatch specifies RE2 syntax; ember matches with the C library's POSIX
extended regular expressions (glibc adds ``\\w \\W \\b \\B \\< \\>``), the engine its compiled
kernels call. :func:`from_re2` rewrites the RE2 spellings that have a POSIX equivalent
(class escapes inside brackets, ``\\d \\s`` and their negations, ``(?:``, lazy quantifiers,
which cannot change a *full* match) and refuses the rest with a message; docs/strings.md
lists the differences. This module never implements matching itself. Example::

    full_match(from_re2(r"www\\.[\\w.-]+\\.com"), ["www.a.com", "x"])   # [True, False]
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np

from ember.errors import OpNotSupportedError

#: ``regcomp`` flags (the same values in glibc, musl and the BSDs).
REG_EXTENDED = 1
REG_NOSUB = 8

_OUTSIDE = {"d": "[[:digit:]]", "D": "[^[:digit:]]", "s": "[[:space:]]", "S": "[^[:space:]]"}
_INSIDE = {"w": "[:alnum:]_", "d": "[:digit:]", "s": "[:space:]"}


def _refuse(pattern: str, what: str) -> OpNotSupportedError:
    return OpNotSupportedError(
        f"RegexFullMatch: the pattern {pattern!r} uses {what}, which POSIX regular expressions "
        "(what ember's kernels match with, docs/strings.md) cannot express; rewrite the pattern "
        "without it"
    )


def _bracket(pattern: str, start: int) -> tuple[str, int]:
    """The POSIX spelling of the RE2 bracket expression at ``pattern[start] == '['``."""
    i = start + 1
    negate = i < len(pattern) and pattern[i] == "^"
    i += negate
    items: list[str] = []
    dash = close = False
    first = True
    while i < len(pattern) and (pattern[i] != "]" or first):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            esc = pattern[i + 1]
            if esc in _INSIDE:
                items.append(_INSIDE[esc])
            elif esc.isalpha():
                raise _refuse(pattern, f"the class escape \\{esc} inside brackets")
            elif esc == "-":
                dash = True
            elif esc == "]":
                close = True
            else:
                items.append(esc)
            i += 2
        elif ch == "[" and pattern.startswith("[:", i):
            end = pattern.find(":]", i + 2)
            items.append(pattern[i : end + 2])
            i = end + 2
        else:
            close = close or (ch == "]" and first)
            items.append("" if ch == "]" else ch)
            i += 1
        first = False
    if i >= len(pattern):
        raise _refuse(pattern, "an unterminated bracket expression")
    body = ("^" if negate else "") + ("]" if close else "") + "".join(items) + ("-" if dash else "")
    return f"[{body}]", i + 1


def from_re2(pattern: str) -> str:
    """The POSIX extended spelling of the RE2 ``pattern`` (OpNotSupportedError if none)."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            esc = pattern[i + 1]
            if esc in _OUTSIDE:
                out.append(_OUTSIDE[esc])
            elif esc.isdigit():
                raise _refuse(pattern, f"the back reference \\{esc}")
            elif esc in "pPQEAzCx":
                raise _refuse(pattern, f"the RE2 escape \\{esc}")
            else:
                out.append(pattern[i : i + 2])
            i += 2
        elif ch == "[":
            text, i = _bracket(pattern, i)
            out.append(text)
        elif pattern.startswith("(?:", i):
            out.append("(")
            i += 3
        elif pattern.startswith("(?", i):
            raise _refuse(pattern, "a (?...) group or flag")
        elif ch == "?" and out and out[-1] in ("*", "+", "?", "}"):
            i += 1  # lazy quantifier: the same full matches as the greedy one
        else:
            out.append(ch)
            i += 1
    return "".join(out)


@cache
def _libc() -> Any:
    return ctypes.CDLL(ctypes.util.find_library("c") or None)


def _compile(pattern: str, flags: int) -> ctypes.Array[ctypes.c_char]:
    libc = _libc()
    compiled = ctypes.create_string_buffer(1024)  # larger than any C library's regex_t
    status = libc.regcomp(compiled, pattern.encode("utf-8"), flags)
    if status != 0:
        message = ctypes.create_string_buffer(256)
        libc.regerror(status, compiled, message, len(message))
        raise OpNotSupportedError(
            f"RegexFullMatch: the C library's regcomp (POSIX extended syntax) rejects the "
            f"pattern {pattern!r}: {message.value.decode(errors='replace')}; ember matches "
            "with POSIX regular expressions, not RE2 (docs/strings.md): rewrite the pattern"
        )
    return compiled


def check(pattern: str) -> None:
    """Compile the POSIX ``pattern`` once; OpNotSupportedError naming regcomp's complaint."""
    _libc().regfree(_compile(pattern, REG_EXTENDED))


def full_match(pattern: str, strings: Sequence[str]) -> np.ndarray:
    """Whether each string matches the POSIX extended ``pattern`` as a whole (regexec)."""
    compiled = _compile(f"^({pattern})$", REG_EXTENDED | REG_NOSUB)
    try:
        hits = [
            _libc().regexec(compiled, s.encode("utf-8", "surrogateescape"), 0, None, 0) == 0
            for s in strings
        ]
    finally:
        _libc().regfree(compiled)
    return np.array(hits, dtype=bool)
