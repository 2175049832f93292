"""Run-time checks in generated C: integer division that never traps, data-dependent indices.

``CheckMixin`` is part of ``ExprCodegen``. Integer ``/`` and ``%`` whose divisor may be 0
or -1 go through helpers returning numpy's results (``x / 0 == 0``, ``INT_MIN / -1 ==
INT_MIN``); a ``tir.index_check`` the loop ranges do not prove becomes a call that wraps
the index once, and out of range records the error in a flag (the parallel loop's, or the
kernel's own, reported when the loop or the kernel ends) and reads position 0 instead. See
docs/security.md.
"""

from __future__ import annotations

from ember.codegen.c.abi import c_string, c_type, dtype_suffix
from ember.codegen.c.file_context import FileContext
from ember.tir import dtype as dt
from ember.tir.expr import Call, Div, FloorDiv, FloorMod, Mod, PrimExpr, StringImm
from ember.tir.simplify import Simplifier
from ember.tir.stmt import PrimFunc


def divisor_guard(dtype: str, quotient: bool) -> str:
    """C statements returning early where integer ``/`` or ``%`` would trap (see
    ``CheckMixin.checked_divmod``); the negation wraps through the unsigned type."""
    guard = "if (b == 0) return 0; "
    if dt.is_uint(dtype):
        return guard
    if not quotient:
        return guard + "if (b == -1) return 0; "
    ct = c_type(dtype, "")
    ut = c_type(f"uint{dt.bits_of(dtype)}", "")
    return guard + f"if (b == -1) return ({ct})(({ut})0 - ({ut})a); "


KERNEL_ERROR_FLAG = "ember_kerr"
INDEX_CHECK_HELPER = "ember_index_check"
#: the index check; the last bad index and its extent are kept for the error message (a
#: race between threads may only mix up the numbers the message shows)
INDEX_CHECK_C = """static int64_t ember_bad_index[2];
static inline int64_t ember_index_check(int64_t i, int64_t n, int32_t* flag, int32_t code) {
  if (i >= 0 && i < n) return i;
  if (i < 0 && i >= -n) return i + n;
  __atomic_store_n(&ember_bad_index[0], i, __ATOMIC_RELAXED);
  __atomic_store_n(&ember_bad_index[1], n, __ATOMIC_RELAXED);
  __atomic_store_n(flag, code, __ATOMIC_RELAXED);
  return 0;
}"""


class CheckMixin:
    """Checked integer division and index checks for CodeGenC."""

    func: PrimFunc
    ctx: FileContext
    where: str
    bounds: Simplifier
    #: the innermost parallel region's error flag and its messages (CodeGenC)
    perr: str | None
    perr_messages: list[str]
    #: messages of index checks outside parallel loops, reported at the kernel's end
    kernel_messages: list[str]
    #: the messages that are printf formats of the bad index and its extent
    formatted: set[str]

    def expr(self, e: PrimExpr, prec: int = 0) -> str:  # pragma: no cover - in CodeGenC
        """C text of an expression (provided by ExprCodegen)."""
        raise NotImplementedError

    def plain_div(self, e: Div | Mod | FloorDiv | FloorMod) -> bool:
        """Whether C's ``/`` or ``%`` cannot trap: the divisor's range excludes 0, and -1
        unless the dividend's range excludes the type's minimum (INT_MIN / -1 overflows)."""
        b_lo, b_hi = self.bounds.bound(e.b)
        if b_lo <= 0 <= b_hi:
            return False
        if dt.is_uint(e.dtype) or not b_lo <= -1 <= b_hi:
            return True
        return self.bounds.bound(e.a)[0] > -(1 << (dt.bits_of(e.dtype) - 1))

    def checked_divmod(self, e: Div | Mod) -> str:
        """C division or remainder through a helper that defines the trapping cases as
        numpy does: ``x / 0`` and ``x % 0`` give 0, ``INT_MIN / -1`` gives INT_MIN (wraps),
        ``INT_MIN % -1`` gives 0."""
        ct = c_type(e.dtype, self.where)
        div = isinstance(e, Div)
        name = f"ember_{'div' if div else 'mod'}_{dtype_suffix(e.dtype)}"
        sym = "/" if div else "%"
        body = f"{divisor_guard(e.dtype, div)}return a {sym} b;"
        self.ctx.helpers[name] = f"static inline {ct} {name}({ct} a, {ct} b) {{ {body} }}"
        return f"{name}({self.expr(e.a)}, {self.expr(e.b)})"

    def index_check(self, e: Call) -> tuple[str, int]:
        """A data-dependent index (``tir.index_check``): plain C where its range is proven
        inside the axis, else a call that wraps it once and, out of range, records the error
        (a flag the code after the parallel loop or at the function's end reports) and
        gives 0, so that no memory outside the tensor is read."""
        index, extent, what = e.args
        lo, hi = self.bounds.bound(index)
        n_lo = self.bounds.bound(extent)[0]
        if lo >= 0 and hi < n_lo:
            return self.expr(index, 16), 16
        if lo >= -n_lo and hi < 0:
            return f"{self.expr(index, 12)} + {self.expr(extent, 13)}", 12
        text = what.value if isinstance(what, StringImm) else "an index"
        message = (
            f"{self.func.name}: index %lld out of range [-%lld, %lld) in "
            f"{text.replace('%', '%%')}; pass indices inside the axis"
        )
        flag = self.perr if self.perr is not None else KERNEL_ERROR_FLAG
        messages = self.perr_messages if self.perr is not None else self.kernel_messages
        messages.append(message)
        self.formatted.add(message)
        self.ctx.helpers.setdefault("0c_" + INDEX_CHECK_HELPER, INDEX_CHECK_C)
        args = f"{self.expr(index)}, {self.expr(extent)}, &{flag}, {len(messages)}"
        return f"{INDEX_CHECK_HELPER}({args})", 16

    def set_error(self, message: str) -> str:
        """The C statement that reports ``message`` as the runtime's last error (formatted
        with the recorded bad index and extent if it is an index-check message)."""
        if message.split(" (in a ", 1)[0] not in self.formatted:
            return f"EmberAPISetLastError({c_string(message)});"
        return (
            f"{{ char ember_msg[512]; snprintf(ember_msg, sizeof(ember_msg), {c_string(message)}, "
            "(long long)ember_bad_index[0], (long long)ember_bad_index[1], "
            "(long long)ember_bad_index[1]); EmberAPISetLastError(ember_msg); }"
        )

    def kernel_error_prologue(self) -> list[str]:
        """Declares the kernel's error flag when an index check outside a parallel loop
        uses it."""
        return [f"  int32_t {KERNEL_ERROR_FLAG} = 0;"] if self.kernel_messages else []

    def kernel_error_epilogue(self) -> list[str]:
        """Reports a failed index check outside a parallel loop at the end of the kernel
        (every workspace is freed by then)."""
        if not self.kernel_messages:
            return []
        out = [f"  if ({KERNEL_ERROR_FLAG} != 0) {{"]
        for code, message in enumerate(self.kernel_messages, start=1):
            out.append(f"    if ({KERNEL_ERROR_FLAG} == {code}) {self.set_error(message)}")
        return [*out, "    return -1;", "  }"]
