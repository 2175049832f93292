"""A mixed-radix FFT as graph-IR ops, in float32, with the operation order of pocketfft.

numpy computes the float32 DFTs of the ONNX reference (and so of the official test data)
with pocketfft's mixed-radix passes in single precision. Their rounding is part of the
expected outputs: an inverse DFT whose exact value is 0 comes out as ~1e-7 times the
signal, which a more accurate float64 sum misses by more than onnx's atol of 1e-7. For
lengths whose pocketfft factors are 2, 3, 4 and 5, this module builds the same passes
(Cooley-Tukey, decimation in time, twiddles rounded from double, each butterfly's additions
in pocketfft's order) from elementwise ops, so the results agree bit for bit; other lengths
keep the matrix-product DFT of signal.py.

Data layout: the signal is ``(re, im)``, each (M, n) with the transform along axis 1. A
pass of radix ``ip`` over ``l1`` blocks of ``ido`` reads ``cc`` as (M, l1, ip, ido) and
writes ``ch`` as (M, ip, l1, ido), then the next pass reads ``ch``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ember.ir.expr import Constant, Expr, call

#: a complex value as (real part, imaginary part) expressions of the same shape.
Cx = tuple[Expr, Expr]
#: pocketfft's radix constants, spelled with its digits (rounded to float32 where used).
SIN60 = 0.8660254037844386467637231707529362
COS72, SIN72 = 0.3090169943749474241022934171828191, 0.9510565162951535721164393333793821
COS144, SIN144 = -0.8090169943749474241022934171828191, 0.5877852522924731291687059546390728


def factors(n: int) -> list[int] | None:
    """pocketfft's factorisation of ``n`` into passes, or None when it needs a radix this
    module does not build (8, 7, 11, or a larger prime)."""
    out: list[int] = []
    rest = n
    if rest % 8 == 0:
        return None
    while rest % 4 == 0:
        out.append(4)
        rest //= 4
    if rest % 2 == 0:
        rest //= 2
        out.append(2)
        out[0], out[-1] = out[-1], out[0]
    divisor = 3
    while divisor * divisor <= rest:
        while rest % divisor == 0:
            out.append(divisor)
            rest //= divisor
        divisor += 2
    if rest > 1:
        out.append(rest)
    return out if all(f in (2, 3, 4, 5) for f in out) else None


def _c(value: object) -> Constant:
    return Constant(np.asarray(value, np.float32))


def _add(a: Cx, b: Cx) -> Cx:
    return call("add", a[0], b[0]), call("add", a[1], b[1])


def _sub(a: Cx, b: Cx) -> Cx:
    return call("subtract", a[0], b[0]), call("subtract", a[1], b[1])


def _scale(a: Expr, s: object) -> Expr:
    return call("multiply", a, _c(np.float32(s)))  # type: ignore[arg-type]


class _Pass:
    """One radix pass: reads the parts of ``cc``, twiddles from a table of length n."""

    def __init__(self, cc: Cx, m: int, l1: int, ip: int, ido: int, n: int, fwd: bool) -> None:
        self.cc, self.m, self.l1, self.ip, self.ido, self.fwd = cc, m, l1, ip, ido, fwd
        angle = 2.0 * np.pi * np.arange(n, dtype=np.float64) / n
        self.table = np.cos(angle), np.sin(angle)

    def part(self, j: int) -> Cx:
        """CC(:, j, :) of every block: (M, l1, ido)."""
        shape = (self.m, self.l1, self.ip, self.ido)
        out = []
        for x in self.cc:
            four = call("reshape", x, newshape=shape)
            sliced = call(
                "strided_slice",
                four,
                begin=[0, 0, j, 0],
                end=[self.m, self.l1, j + 1, self.ido],
                strides=[1, 1, 1, 1],
            )
            out.append(call("reshape", sliced, newshape=(self.m, self.l1, self.ido)))
        return out[0], out[1]

    def twiddled(self, v: Cx, j: int) -> Cx:
        """``v`` times twiddle WA(j-1, i) per position i (1 at i = 0), as special_mul<fwd>."""
        idx = j * self.l1 * np.arange(self.ido)
        wr = _c(self.table[0][idx].astype(np.float32).reshape(1, 1, self.ido))
        wi = _c(self.table[1][idx].astype(np.float32).reshape(1, 1, self.ido))
        rr, ii = call("multiply", v[0], wr), call("multiply", v[1], wi)
        ri, ir = call("multiply", v[0], wi), call("multiply", v[1], wr)
        if self.fwd:
            return call("add", rr, ii), call("subtract", ir, ri)
        return call("subtract", rr, ii), call("add", ri, ir)

    def join(self, parts: list[Cx]) -> Cx:
        """CH from its parts: (M, ip, l1, ido) flattened to (M, n)."""
        out = []
        for k in (0, 1):
            pieces = [call("reshape", p[k], newshape=(self.m, 1, self.l1, self.ido)) for p in parts]
            joined = call("concatenate", *pieces, axis=1)
            flat = call("reshape", joined, newshape=(self.m, self.ip * self.l1 * self.ido, 1))
            # a one-element sum: a fusion boundary, so each pass is its own kernel (inlining
            # every pass into the next duplicates the butterflies exponentially)
            out.append(call("sum", flat, axes=[2]))
        return out[0], out[1]


def _pass2(p: _Pass) -> list[Cx]:
    a, b = p.part(0), p.part(1)
    return [_add(a, b), p.twiddled(_sub(a, b), 1)]


def _rot90(a: Cx, fwd: bool) -> Cx:
    """ROTX90<fwd>: multiply by -i (forward) or i (backward)."""
    if fwd:
        return a[1], call("negative", a[0])
    return call("negative", a[1]), a[0]


def _pass4(p: _Pass) -> list[Cx]:
    cc = [p.part(j) for j in range(4)]
    t2, t1 = _add(cc[0], cc[2]), _sub(cc[0], cc[2])
    t3, t4 = _add(cc[1], cc[3]), _sub(cc[1], cc[3])
    t4 = _rot90(t4, p.fwd)
    return [
        _add(t2, t3),
        p.twiddled(_add(t1, t4), 1),
        p.twiddled(_sub(t2, t3), 2),
        p.twiddled(_sub(t1, t4), 3),
    ]


def _pass3(p: _Pass) -> list[Cx]:
    sign = -1.0 if p.fwd else 1.0
    t0, c1, c2 = p.part(0), p.part(1), p.part(2)
    t1, t2 = _add(c1, c2), _sub(c1, c2)
    ca = call("add", t0[0], _scale(t1[0], -0.5)), call("add", t0[1], _scale(t1[1], -0.5))
    twi = sign * np.float32(SIN60)
    cb = call("negative", _scale(t2[1], twi)), _scale(t2[0], twi)
    return [_add(t0, t1), p.twiddled(_add(ca, cb), 1), p.twiddled(_sub(ca, cb), 2)]


def _pass5(p: _Pass) -> list[Cx]:
    sign = -1.0 if p.fwd else 1.0
    t0, c1, c2, c3, c4 = (p.part(j) for j in range(5))
    t1, t4 = _add(c1, c4), _sub(c1, c4)
    t2, t3 = _add(c2, c3), _sub(c2, c3)
    first = call("add", call("add", t0[0], t1[0]), t2[0])
    first_i = call("add", call("add", t0[1], t1[1]), t2[1])
    out: list[Cx | None] = [(first, first_i), None, None, None, None]
    tw1i, tw2i = sign * float(np.float32(SIN72)), sign * float(np.float32(SIN144))
    for u1, u2, twar, twbr, twai, twbi in (
        (1, 4, COS72, COS144, tw1i, tw2i),
        (2, 3, COS144, COS72, tw2i, -tw1i),
    ):
        ca = tuple(
            call("add", call("add", t0[k], _scale(t1[k], twar)), _scale(t2[k], twbr))
            for k in (0, 1)
        )
        cb_i = call("add", _scale(t4[0], twai), _scale(t3[0], twbi))
        cb_r = call("negative", call("add", _scale(t4[1], twai), _scale(t3[1], twbi)))
        cb = (cb_r, cb_i)
        out[u1] = p.twiddled(_add((ca[0], ca[1]), cb), u1)
        out[u2] = p.twiddled(_sub((ca[0], ca[1]), cb), u2)
    return [o for o in out if o is not None]


PASSES: dict[int, Callable[[_Pass], list[Cx]]] = {2: _pass2, 3: _pass3, 4: _pass4, 5: _pass5}


def fft(re: Expr, im: Expr, m: int, n: int, inverse: bool) -> Cx:
    """The unnormalised (forward) or 1/n-scaled (inverse) DFT of (re, im), each (M, n)
    float32, along axis 1; ``n`` must have :func:`factors`."""
    plan = factors(n)
    if plan is None:
        raise ValueError(f"length {n} has no radix-2/3/4/5 pocketfft plan")
    cur: Cx = (re, im)
    l1 = 1
    for ip in plan:
        ido = n // (l1 * ip)
        step = _Pass(cur, m, l1, ip, ido, n, not inverse)
        cur = step.join(PASSES[ip](step))
        l1 *= ip
    if inverse:
        fct = float(np.float32(1.0 / n))
        cur = _scale(cur[0], fct), _scale(cur[1], fct)
    return cur
