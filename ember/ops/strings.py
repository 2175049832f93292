"""Computes of the string ops (docs/strings.md): one call per element of a C function of
ember's hosted runtime (``ember/runtime/src/string_kernels.h``), which the compiled library
resolves from the runtime when it is loaded.

Strings a kernel makes come from the executor's per-run string arena. The pattern of
``regex_full_match`` is compiled with the C library's ``regcomp`` (POSIX extended syntax)
here, at build time, so a pattern the C library rejects fails the build, not the run.
"""

from __future__ import annotations

from typing import Any

from ember.ir.op import Attrs
from ember.ir.types import Type
from ember.ops.common import load_broadcast, out_tensor_type
from ember.ops.registry import register_compute
from ember.support import posix_regex
from ember.tir import PrimExpr, call_extern, const, te


def _pair(name: str, c_func: str, out_dtype: str) -> None:
    def compute(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
        a, b = inputs
        ty = out_tensor_type(out_type)

        def fn(*i: Any) -> PrimExpr:
            return call_extern(out_dtype, c_func, load_broadcast(a, i), load_broadcast(b, i))

        return te.compute(ty.shape, fn, name)

    compute.__module__ = __name__
    register_compute(name)(compute)


_pair("string_equal", "ember_str_equal", "bool")
_pair("string_concat", "ember_str_concat", "string")


@register_compute("regex_full_match")
def regex_full_match(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """out[i] = whether the whole of x[i] matches the pattern (regexec)."""
    (x,) = inputs
    pattern = str(attrs["pattern"])
    posix_regex.check(pattern)  # a pattern regcomp rejects fails the build
    ty = out_tensor_type(out_type)
    return te.compute(
        ty.shape,
        lambda *i: call_extern("bool", "ember_str_regex_full_match", x[i] if i else x[()], pattern),
        "regex_full_match",
    )


@register_compute("string_change_case")
def string_change_case(inputs: list[te.Tensor], attrs: Attrs, out_type: Type) -> te.Tensor:
    """out[i] = x[i] upper- or lower-cased (the C library's towupper_l/towlower_l)."""
    (x,) = inputs
    upper = const(int(bool(attrs["upper"])), "int32")
    ty = out_tensor_type(out_type)
    return te.compute(
        ty.shape,
        lambda *i: call_extern("string", "ember_str_change_case", x[i] if i else x[()], upper),
        "string_change_case",
    )
