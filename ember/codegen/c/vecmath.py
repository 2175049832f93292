"""Vector math: libm calls in vectorized loops reach glibc's SIMD variants (libmvec).

A C file that declares ``#pragma omp declare simd notinbranch`` before ``float expf(float);``
lets gcc vectorize a loop calling ``expf`` by calling ``_ZGVdN8v_expf`` (8 lanes with AVX2)
from libmvec, instead of one scalar ``expf`` per element: 5-10x faster sigmoid, tanh,
gelu and softmax. No ``simdlen`` is given: gcc then picks the variants libmvec ships for
the target ISA (an explicit ``simdlen(8)`` asks for ones it does not have).

Whether this works depends on the compiler, the libc and the flags, so it is decided by a
probe at first use: a tiny program that calls every candidate function in ``omp simd``
loops is compiled with the target's flags and ``-lmvec``, linked, run and its results
checked. The answer (the functions that may be declared SIMD, possibly none) is cached in
memory and under ``<cache_dir>/probes`` keyed by the compiler, the flags, the probe
source, the machine and the libc, so the generated C and its flags are the same on every
build on one machine. Any failure falls back silently to plain scalar calls.

Example::

    vector_math_functions("-O3 -march=native -fopenmp-simd")   # ("acos", ..., "tanh") or ()
"""

from __future__ import annotations

import json
import math
import os
import platform
import shlex
import subprocess
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from ember.config import config
from ember.errors import EmberError
from ember.support.hashing import hash_strings
from ember.support.toolchain import compile_executable

#: The linker flag that brings in the SIMD variants.
LIBMVEC_FLAG = "-lmvec"
#: Bumped whenever the probe or its verdict changes meaning (it keys the cache).
PROBE_VERSION = 2

_DOMAIN_01 = (0.25, 0.5, 0.75)

#: Candidates with a test input each: glibc >= 2.35 ships all of them in libmvec.
FULL_SET: dict[str, tuple[int, Callable[..., float], tuple[float, ...]]] = {
    "exp": (1, math.exp, _DOMAIN_01),
    "log": (1, math.log, _DOMAIN_01),
    "pow": (2, math.pow, _DOMAIN_01),
    "sin": (1, math.sin, _DOMAIN_01),
    "cos": (1, math.cos, _DOMAIN_01),
    "tan": (1, math.tan, _DOMAIN_01),
    "asin": (1, math.asin, _DOMAIN_01),
    "acos": (1, math.acos, _DOMAIN_01),
    "atan": (1, math.atan, _DOMAIN_01),
    "sinh": (1, math.sinh, _DOMAIN_01),
    "cosh": (1, math.cosh, _DOMAIN_01),
    "tanh": (1, math.tanh, _DOMAIN_01),
    "asinh": (1, math.asinh, _DOMAIN_01),
    "acosh": (1, math.acosh, (1.25, 1.5, 1.75)),
    "atanh": (1, math.atanh, _DOMAIN_01),
    "erf": (1, math.erf, _DOMAIN_01),
    "expm1": (1, math.expm1, _DOMAIN_01),
    "log1p": (1, math.log1p, _DOMAIN_01),
}
#: glibc 2.22-2.34 ship only these.
BASE_SET: tuple[str, ...] = ("cos", "exp", "log", "pow", "sin")

_LANES = 64
_MEMO: dict[tuple[str, str], tuple[str, ...]] = {}
_LOCK = threading.Lock()


def simd_prototype(name: str, dtype_c: str) -> str:
    """The prelude lines declaring libm's ``name`` (C spelling) as having SIMD variants."""
    base = name[:-1] if dtype_c == "float" else name
    arity = FULL_SET[base][0]
    params = ", ".join([dtype_c] * arity)
    return f"#pragma omp declare simd notinbranch\nextern {dtype_c} {name}({params});"


#: float32 exp: arguments below ``_EXP_LOW`` (bits ``_EXP_LOW_BITS``) have results below
#: FLT_MIN; ``_EXP_FLUSH`` lies between exp(_EXP_LOW) and exp of the next float up.
_EXP_LOW = "-87.33654022216797f"
_EXP_LOW_BITS = "0xc2aeac4fu"
_EXP_FLUSH = "1.1755040e-38f"
EXP_HELPER = "ember_vexp_f32"


def exp_helper() -> str:
    """The definition of the float32 exp used with libmvec (``ember_vexp_f32``).

    libmvec's expf takes a slow scalar path for every lane whose result is subnormal or
    zero: masked attention logits (-1e4, -inf) or saturated sigmoids in 10% of the lanes
    made a vectorized exp 4-7x slower. The helper moves such arguments to the edge of the
    fast range with integer operations (a select there would be folded back through the
    call by gcc) and flushes results at or below that edge to 0: results under 1.2e-38
    become 0, everything else, NaN included, is libmvec's. Overflowing lanes (x > 88.7)
    still take the slow path.
    """
    return (
        f"static inline float {EXP_HELPER}(float x) {{\n"
        "  uint32_t u;\n"
        "  memcpy(&u, &x, sizeof(u));\n"
        f"  const uint32_t low = -(uint32_t)(x < {_EXP_LOW});\n"
        f"  u = u ^ ((u ^ {_EXP_LOW_BITS}) & low);\n"
        "  float c;\n"
        "  memcpy(&c, &u, sizeof(c));\n"
        "  const float r = expf(c);\n"
        f"  return r <= {_EXP_FLUSH} ? 0.0f : r;\n"
        "}"
    )


#: float32 exp of a non-positive argument, inline (the sigmoid's ``exp(-|x|)``).
EXP_NONPOS_HELPER = "ember_exp_nonpos_f32"


def exp_nonpos_helper() -> str:
    """The definition of ``ember_exp_nonpos_f32(x)``, exp(x) for x <= 0 (NaN stays NaN),
    straight code that gcc vectorizes without a call: x clamped to -87 (exp(-87) = 1.6e-38,
    below which a sigmoid's ``t / (1 + t)`` is 0 to float32 anyway), n = round(x / ln 2) by
    adding 1.5 * 2^23, r = x - n ln 2 in two parts, exp(r) by Cephes' degree-6 polynomial
    for expf, times 2^n built in the exponent bits. A sigmoid through it is within 6e-7
    relative of the exact one (libmvec's expf: 2e-7), and 1.4-1.6x faster than through
    libmvec in an epilogue (EfficientNet's 112x112x96 SiLU: 330 -> 230 us, a C harness,
    one thread; the ReLU there takes 80); without libmvec it replaces a scalar call per
    element."""
    return _EXP_FMA_MACRO + (
        f"static inline float {EXP_NONPOS_HELPER}(float x) {{\n"
        "  x = x < -87.0f ? -87.0f : x;\n"
        f"{_exp_core(127)}"
        "  return v;\n"
        "}"
    )


_EXP_FMA_MACRO = (
    "#ifndef EMBER_EXPN_FMA\n"
    "#if defined(__FMA__) || defined(__aarch64__) || defined(__ARM_FEATURE_FMA)\n"
    "#define EMBER_EXPN_FMA(a, b, c) fmaf((a), (b), (c))\n"
    "#else\n"
    "#define EMBER_EXPN_FMA(a, b, c) ((a) * (b) + (c))\n"
    "#endif\n"
    "#endif\n"
)


#: exp(x) as ``v`` (NaN stays NaN): n = round(x / ln 2) by adding 1.5 * 2^23, r = x - n ln
#: 2 in two parts, exp(r) by Cephes' degree-6 polynomial for expf, times 2^n built in the
#: exponent bits as ``(2^(n + bias - 127) * 2^(1 - bias + 127)``: ``bias`` 127 is exact for x
#: in [-87.34, 88.03], 126 for [-86.64, 88.72] (2^128 does not fit the exponent bits; below
#: -86.64 the result, under 1.9e-38, is 0).
def _exp_core(bias: int) -> str:
    scaled = "* scale" if bias == 127 else "* scale * 2.0f"
    return (
        "  const float shifted = x * 1.44269504088896341f + 12582912.0f;\n"
        "  const float n = shifted - 12582912.0f;\n"
        "  uint32_t k;\n"
        "  memcpy(&k, &shifted, sizeof(k));\n"
        f"  k = (k - 0x4b400000u + {bias}u) << 23;\n"
        "  float scale;\n"
        "  memcpy(&scale, &k, sizeof(scale));\n"
        "  const float r0 = EMBER_EXPN_FMA(n, -0.693359375f, x);\n"
        "  const float r = EMBER_EXPN_FMA(n, 2.12194440e-4f, r0);\n"
        "  float p = 1.9875691500e-4f;\n"
        "  p = EMBER_EXPN_FMA(p, r, 1.3981999507e-3f);\n"
        "  p = EMBER_EXPN_FMA(p, r, 8.3334519073e-3f);\n"
        "  p = EMBER_EXPN_FMA(p, r, 4.1665795894e-2f);\n"
        "  p = EMBER_EXPN_FMA(p, r, 1.6666665459e-1f);\n"
        "  p = EMBER_EXPN_FMA(p, r, 5.0000001201e-1f);\n"
        f"  const float v = (EMBER_EXPN_FMA(p * r, r, r) + 1.0f) {scaled};\n"
    )


#: float32 exp over the whole range, inline.
EXP_INLINE_HELPER = "ember_exp_f32"


def exp_inline_helper() -> str:
    """The definition of ``ember_exp_f32(x)``: exp(x) as straight code that gcc vectorizes
    without a call (the core of :func:`exp_nonpos_helper`, 2^n built one below and
    doubled): results under 1.9e-38 (x < -86.64) are 0, like :func:`exp_helper`'s under
    1.2e-38; x > 88.72 gives +inf; NaN stays NaN. Within 1.8 ulp of exp (float32, every
    97th bit pattern checked). 1.4x faster than libmvec's expf through :func:`exp_helper`
    (in the L1: 44.5 -> 32 us for 196K values; an Exp of 128 x 1536, one thread: 48 -> 36
    us, onnxruntime 22), and no scalar call per element where libmvec is missing (Arm
    toolchains). The clamps are integer selects: float ones made gcc specialize the whole
    computation per clamped lane class (twice the instructions)."""
    return _EXP_FMA_MACRO + (
        f"static inline float {EXP_INLINE_HELPER}(float x0) {{\n"
        "  uint32_t u;\n"
        "  memcpy(&u, &x0, sizeof(u));\n"
        "  u = u ^ ((u ^ 0xc2ae0000u) & -(uint32_t)(x0 < -87.0f));\n"
        "  u = u ^ ((u ^ 0x42b20000u) & -(uint32_t)(x0 > 89.0f));\n"
        "  float x;\n"
        "  memcpy(&x, &u, sizeof(x));\n"
        f"{_exp_core(126)}"
        "  return v;\n"
        "}"
    )


#: float32 erf, inline.
ERF_HELPER = "ember_erf_f32"

#: the rational approximation's coefficients (x clamped to [-4, 4]): erf(x) = x * P(x^2) /
#: Q(x^2), P of degree 6 and Q of degree 4 in x^2, highest first (Eigen's float erf).
_ERF_P = (
    "-2.72614225801306e-10f",
    "2.77068142495902e-08f",
    "-2.10102402082508e-06f",
    "-5.69250639462346e-05f",
    "-7.34990630326855e-04f",
    "-2.95459980854025e-03f",
    "-1.60960333262415e-02f",
)
_ERF_Q = (
    "-1.45660718464996e-05f",
    "-2.13374055278905e-04f",
    "-1.68282697438203e-03f",
    "-7.37332916720468e-03f",
    "-1.42647390514189e-02f",
)


def erf_helper() -> str:
    """The definition of ``ember_erf_f32(x)``: straight code that gcc vectorizes without a
    call, x clamped to [-4, 4] (erf(4) rounds to 1 in float32; NaN stays NaN) and a
    rational function of x^2. Within 2.7e-7 of erf (absolute and relative), 2.2x faster
    than libmvec's erff in an Erf GELU (ViT-Tiny's 197 x 768 x 4: 240 -> 110 us, a C
    harness, one thread); without libmvec it replaces a scalar call per element."""
    lines = [
        f"static inline float {ERF_HELPER}(float x) {{",
        "  x = x < -4.0f ? -4.0f : (x > 4.0f ? 4.0f : x);",
        "  const float x2 = x * x;",
        f"  float p = {_ERF_P[0]};",
        *(f"  p = p * x2 + {c};" for c in _ERF_P[1:]),
        f"  float q = {_ERF_Q[0]};",
        *(f"  q = q * x2 + {c};" for c in _ERF_Q[1:]),
        "  return x * p / q;",
        "}",
    ]
    return "\n".join(lines)


def probe_source(names: Sequence[str]) -> str:
    """A C program calling the float and double versions of ``names`` in ``omp simd`` loops.

    It prints one line per function: the name, then the float and double results of
    every test input.
    """
    lines = ["#include <math.h>", "#include <stdio.h>"]
    for name in names:
        lines.append(simd_prototype(name + "f", "float"))
        lines.append(simd_prototype(name, "double"))
    lines += [
        f"static float xf[{_LANES}], yf[{_LANES}];",
        f"static double xd[{_LANES}], yd[{_LANES}];",
        "int main(void) {",
    ]
    for name in names:
        arity, _, inputs = FULL_SET[name]
        argsf = ", ".join(["xf[i]"] * arity)
        argsd = ", ".join(["xd[i]"] * arity)
        lines += [
            f"  for (int i = 0; i < {_LANES}; ++i) {{",
            f"    xd[i] = {inputs[0]!r} + (i % 3) * {inputs[1] - inputs[0]!r};",
            "    xf[i] = (float)xd[i];",
            "  }",
            "  #pragma omp simd",
            f"  for (int i = 0; i < {_LANES}; ++i) yf[i] = {name}f({argsf});",
            "  #pragma omp simd",
            f"  for (int i = 0; i < {_LANES}; ++i) yd[i] = {name}({argsd});",
            f'  printf("{name}");',
            '  for (int i = 0; i < 3; ++i) printf(" %.9g %.17g", yf[i], yd[i]);',
            '  printf("\\n");',
        ]
    if "pow" in names:  # gcc 12.2 crashes on this one with errno-setting math
        lines += [
            "  #pragma omp simd",
            f"  for (int i = 0; i < {_LANES}; ++i) yf[i] = powf(xf[i], 0.5f);",
            '  printf("pow_half");',
            '  for (int i = 0; i < 3; ++i) printf(" %.9g", yf[i]);',
            '  printf("\\n");',
        ]
    lines += ["  return 0;", "}", ""]
    return "\n".join(lines)


def _check_output(names: Sequence[str], output: str) -> bool:
    rows = {line.split()[0]: line.split()[1:] for line in output.splitlines() if line.split()}
    if "pow" in names:
        roots = [math.sqrt(x) for x in FULL_SET["pow"][2]]
        half = rows.get("pow_half", [])
        if len(half) != len(roots) or not all(
            math.isclose(float(g), w, rel_tol=1e-5) for g, w in zip(half, roots, strict=True)
        ):
            return False
    for name in names:
        arity, fn, inputs = FULL_SET[name]
        values = rows.get(name)
        if values is None or len(values) != 2 * len(inputs):
            return False
        for k, x in enumerate(inputs):
            want = fn(*([x] * arity))
            got_f, got_d = float(values[2 * k]), float(values[2 * k + 1])
            if not math.isclose(got_f, want, rel_tol=1e-5) or not math.isclose(
                got_d, want, rel_tol=1e-12
            ):
                return False
    return True


def _try(names: Sequence[str], cflags: str, cc: str) -> bool:
    """Whether ``names`` link, vectorize and compute correctly with these flags."""

    with tempfile.TemporaryDirectory(prefix="ember-vecmath-") as tmp:
        src = Path(tmp) / "probe.c"
        src.write_text(probe_source(names))
        exe = Path(tmp) / "probe"
        flags = [*shlex.split(cflags), LIBMVEC_FLAG]
        try:
            compile_executable([src], exe, flags=flags, openmp=False, cc=cc)
            if b"_ZGV" not in exe.read_bytes():  # the compiler ignored the declarations
                return False
            proc = subprocess.run(
                [str(exe)], capture_output=True, text=True, timeout=30, check=False
            )
        except (EmberError, OSError, subprocess.SubprocessError):
            return False
        return proc.returncode == 0 and _check_output(names, proc.stdout)


def _cache_path(cflags: str, cc: str) -> Path:
    parts = [
        f"vecmath-v{PROBE_VERSION}",
        cc,
        cflags,
        probe_source(tuple(FULL_SET)),
        platform.machine(),
        " ".join(platform.libc_ver()),
    ]
    return config().cache_dir / "probes" / f"vecmath-{hash_strings(parts, length=24)}.json"


def _read_cache(path: Path) -> tuple[str, ...] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    funcs = data.get("functions") if isinstance(data, dict) else None
    if not isinstance(funcs, list) or not all(f in FULL_SET for f in funcs):
        return None
    return tuple(funcs)


def _write_cache(path: Path, funcs: tuple[str, ...]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".vecmath-", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "w") as fh:
            json.dump({"functions": list(funcs), "version": PROBE_VERSION}, fh, sort_keys=True)
        os.replace(tmp, path)
    except OSError:  # a read-only cache only costs a probe per process
        return


def probe(cflags: str, cc: str) -> tuple[str, ...]:
    """Run the probe (no caching): the full set, else the glibc 2.22 set, else nothing."""
    for names in (tuple(sorted(FULL_SET)), BASE_SET):
        if _try(names, cflags, cc):
            return names
    return ()


def vector_math_functions(cflags: str, cc: str | None = None) -> tuple[str, ...]:
    """The libm functions (double names, sorted) that may be declared SIMD with these flags.

    Empty when the compiler, the libc or the flags do not support libmvec (or the flags
    lack ``-fopenmp-simd`` or ``-fopenmp``). Probed once per compiler and flags, then cached.
    """
    if not {"-fopenmp", "-fopenmp-simd"} & set(shlex.split(cflags)):
        return ()
    compiler = cc or config().cc
    key = (compiler, cflags)
    found = _MEMO.get(key)
    if found is not None:
        return found
    with _LOCK:
        found = _MEMO.get(key)
        if found is None:
            path = _cache_path(cflags, compiler)
            found = _read_cache(path)
            if found is None:
                found = probe(cflags, compiler)
                _write_cache(path, found)
            _MEMO[key] = found
    return found
