"""FileContext: what the functions of one C file need from its prelude (helpers, extern and
SIMD prototypes, static pools), shared by the expression and statement generators."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ember.codegen.c.vecmath import (
    ERF_HELPER,
    EXP_HELPER,
    EXP_INLINE_HELPER,
    EXP_NONPOS_HELPER,
    erf_helper,
    exp_helper,
    exp_inline_helper,
    exp_nonpos_helper,
    simd_prototype,
)

#: whether float32 sigmoids take their exp inline (vecmath.exp_nonpos_helper) rather than
#: libm's or libmvec's expf (exp_function).
INLINE_SIGMOID_EXP = True

#: whether float32 exp is computed inline (vecmath.exp_inline_helper) rather than by libm's
#: or libmvec's expf.
INLINE_EXP = True

#: whether float32 erf is computed inline (vecmath.erf_helper) rather than by libm's or
#: libmvec's erff.
INLINE_ERF = True


@dataclass
class FileContext:
    """What the functions of one C file need from its prelude."""

    helpers: dict[str, str] = field(default_factory=dict)
    externs: dict[str, str] = field(default_factory=dict)
    pools: dict[str, int] = field(default_factory=dict)
    #: call_cpacked helpers by callee and signature -> helper name
    cpacked: dict[str, str] = field(default_factory=dict)
    #: gives the libm functions (double names) that may be declared SIMD (``vecmath``);
    #: asked on the first math call only, so a file without math never runs the probe
    simd_provider: Callable[[], tuple[str, ...]] | None = None
    _simd: tuple[str, ...] | None = field(default=None, repr=False)
    #: the SIMD prototypes this file uses, by C function name
    simd_decls: dict[str, str] = field(default_factory=dict)

    @property
    def simd_math(self) -> tuple[str, ...]:
        """The libm functions this file may declare SIMD (empty without vector math)."""
        if self._simd is None:
            self._simd = self.simd_provider() if self.simd_provider is not None else ()
        return self._simd

    def use_math(self, base: str, c_name: str, ctype: str) -> None:
        """Note a call of libm's ``c_name`` (``base`` without the f suffix) of type ctype."""
        if base in self.simd_math:
            self.simd_decls.setdefault(c_name, simd_prototype(c_name, ctype))

    def exp_function(self, ctype: str) -> str:
        """The C function computing exp for ``ctype``: for float32 the inline helper
        (vecmath.exp_inline_helper, INLINE_EXP), else libm's; with INLINE_EXP off and
        libmvec, float32 uses the helper that keeps masked (very negative) lanes on the
        vector path (vecmath.exp_helper).
        """
        if ctype == "float" and INLINE_EXP:
            self.helpers.setdefault("0a_" + EXP_INLINE_HELPER, exp_inline_helper())
            return EXP_INLINE_HELPER
        sfx = "f" if ctype == "float" else ""
        self.use_math("exp", f"exp{sfx}", ctype)
        if "exp" not in self.simd_math or ctype != "float":
            return f"exp{sfx}"
        self.helpers.setdefault("0a_" + EXP_HELPER, exp_helper())  # before its users
        return EXP_HELPER

    def erf_function(self, ctype: str) -> str | None:
        """The inline float32 erf helper (vecmath.erf_helper), declared in this file's
        prelude; None for other types or with INLINE_ERF off (libm's erf then)."""
        if ctype != "float" or not INLINE_ERF:
            return None
        self.helpers.setdefault("0a_" + ERF_HELPER, erf_helper())
        return ERF_HELPER

    def sigmoid_function(self, ctype: str) -> str:
        """The C helper computing sigmoid for ``ctype`` (declared in this file's prelude).

        ``t = exp(-|x|)`` never overflows, so saturated lanes on either side stay on the
        vector path: ``x >= 0 ? 1 / (1 + t) : t / (1 + t)``; NaN stays NaN.
        """
        sfx = "f" if ctype == "float" else ""
        one, zero = ("1.0f", "0.0f") if sfx else ("1.0", "0.0")
        name = f"ember_sigmoid_{'f32' if sfx else 'f64'}"
        if sfx and INLINE_SIGMOID_EXP:  # exp inline, vectorized without libmvec
            self.helpers.setdefault("0a_" + EXP_NONPOS_HELPER, exp_nonpos_helper())
            exp = EXP_NONPOS_HELPER
        else:
            exp = self.exp_function(ctype)
        self.helpers.setdefault(
            "0b_" + name,
            f"static inline {ctype} {name}({ctype} x) {{ const {ctype} t = {exp}(-fabs{sfx}(x)); "
            f"return (x >= {zero} ? {one} : t) / ({one} + t); }}",
        )
        return name

    def prelude(self) -> str:
        """SIMD and extern prototypes, static pools and helpers, in a deterministic order."""
        parts: list[str] = [self.simd_decls[name] for name in sorted(self.simd_decls)]
        for name in sorted(self.externs):
            parts.append(self.externs[name])
        for name in sorted(self.pools):
            parts.append(
                f"static uint8_t ember_pool_{name}[{self.pools[name]}] "
                "__attribute__((aligned(64)));"
            )
        for name in sorted(self.helpers):
            parts.append(self.helpers[name])
        return "\n".join(parts) + ("\n" if parts else "")
