"""Seeded random generators (pattern OPAQUE): ``random.uniform``, ``random.normal``,
``random.bernoulli`` and ``random.multinomial``.

Every op is numpy's legacy generator: ``numpy.random.RandomState(seed)`` (MT19937 seeded
by ``init_genrand(seed)``, doubles of 53 bits from two 32-bit outputs), created afresh at
each evaluation, so an op gives the same numbers on every run and the numbers numpy gives:

* ``random.uniform``: ``RandomState(seed).uniform(low, high, shape)``;
* ``random.normal``: ``RandomState(seed).normal(mean, scale, shape)`` (the polar
  Box-Muller method, each pair's second value kept for the next element);
* ``random.bernoulli``: ``RandomState(seed).binomial(1, p)`` (numpy's inversion
  algorithm, run on ``1 - p`` when ``p > 0.5``);
* ``random.multinomial``: per row of unnormalised log-probabilities, ``cdf =
  cumsum(exp(x - max(x)))``, ``cdf /= cdf[-1]``, then ``searchsorted(cdf,
  random_sample(sample_size), side="right")``; the rows draw from one stream in order.

Results are float64 (indices of ``random.multinomial`` int64); the importer casts. The ops
are deterministic, but ``OpDef.pure`` is False: constant folding leaves them to run time,
so a random tensor is drawn by its kernel instead of becoming a (possibly large) parameter.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ember.errors import IRError
from ember.ir.op import Attr, Attrs, OpDef, OpPattern, TypeRule, register_op
from ember.ir.ops.common import check_dtype
from ember.ir.types import TensorType, Type

#: the seeds numpy's legacy RandomState takes (an unsigned 32-bit integer).
SEED_LIMIT = 1 << 32


def check_seed(seed: int, what: str) -> int:
    """``seed`` when numpy's RandomState takes it, else IRError."""
    if not 0 <= seed < SEED_LIMIT:
        raise IRError(
            f"{what}: seed {seed} is out of range; ember's generator is numpy's "
            f"RandomState(seed), which takes seeds 0..{SEED_LIMIT - 1}"
        )
    return seed


def _shape(attrs: Attrs, op: str) -> tuple[int, ...]:
    shape = tuple(int(d) for d in attrs["shape"])
    if any(d < 0 for d in shape):
        raise IRError(f"'{op}': the shape {shape} has a negative dim")
    return shape


def _fill_type(op: str) -> TypeRule:
    def rule(types: Sequence[Type], attrs: Attrs) -> Type:
        check_seed(int(attrs["seed"]), f"'{op}'")
        return TensorType(_shape(attrs, op), "float64")

    return rule


def _state(attrs: Attrs) -> np.random.RandomState:
    return np.random.RandomState(int(attrs["seed"]))


def _uniform_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    shape = _shape(attrs, "random.uniform")
    return _state(attrs).uniform(float(attrs["low"]), float(attrs["high"]), shape)


def _normal_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    shape = _shape(attrs, "random.normal")
    return _state(attrs).normal(float(attrs["mean"]), float(attrs["scale"]), shape)


def _bernoulli_type(types: Sequence[Type], attrs: Attrs) -> Type:
    p = check_dtype(types[0], frozenset({"float64"}), "probabilities of 'random.bernoulli'")
    check_seed(int(attrs["seed"]), "'random.bernoulli'")
    return TensorType(p.shape, "float64")


def _bernoulli_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    p = np.asarray(xs[0], dtype=np.float64)
    return _state(attrs).binomial(1, p, p.shape).astype(np.float64).reshape(p.shape)


def _multinomial_type(types: Sequence[Type], attrs: Attrs) -> Type:
    x = check_dtype(types[0], frozenset({"float64"}), "input of 'random.multinomial'")
    if len(x.shape) != 2 or x.shape[1] < 1:
        raise IRError(
            f"'random.multinomial' takes [batch, classes] log-probabilities with at least one "
            f"class, got shape {x.shape}"
        )
    check_seed(int(attrs["seed"]), "'random.multinomial'")
    samples = int(attrs["sample_size"])
    if samples < 0:
        raise IRError(f"'random.multinomial': sample_size {samples} is negative")
    return TensorType((x.shape[0], samples), "int64")


def multinomial_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    """Per row: the softmax's cdf searched with ``sample_size`` uniform doubles."""
    x = np.asarray(xs[0], dtype=np.float64)
    samples = int(attrs["sample_size"])
    state = _state(attrs)
    out = np.empty((x.shape[0], samples), dtype=np.int64)
    for b in range(x.shape[0]):
        cdf = np.cumsum(np.exp(x[b] - np.max(x[b])))
        cdf /= cdf[-1]
        out[b] = np.searchsorted(cdf, state.random_sample(samples), side="right")
    return out


_SEED = Attr("int", doc="numpy RandomState seed, 0..2**32-1")
_SHAPE = Attr("ints", doc="output shape")

register_op(
    OpDef(
        "random.uniform",
        0,
        _fill_type("random.uniform"),
        _uniform_ref,
        OpPattern.OPAQUE,
        {"shape": _SHAPE, "seed": _SEED, "low": Attr("float", 0.0), "high": Attr("float", 1.0)},
        doc="RandomState(seed).uniform(low, high, shape), float64",
        pure=False,
    )
)
register_op(
    OpDef(
        "random.normal",
        0,
        _fill_type("random.normal"),
        _normal_ref,
        OpPattern.OPAQUE,
        {"shape": _SHAPE, "seed": _SEED, "mean": Attr("float", 0.0), "scale": Attr("float", 1.0)},
        doc="RandomState(seed).normal(mean, scale, shape), float64",
        pure=False,
    )
)
register_op(
    OpDef(
        "random.bernoulli",
        1,
        _bernoulli_type,
        _bernoulli_ref,
        OpPattern.OPAQUE,
        {"seed": _SEED},
        doc="RandomState(seed).binomial(1, p) as float64 zeros and ones",
        pure=False,
    )
)
register_op(
    OpDef(
        "random.multinomial",
        1,
        _multinomial_type,
        multinomial_ref,
        OpPattern.OPAQUE,
        {"seed": _SEED, "sample_size": Attr("int", 1)},
        doc="class indices drawn per row of log-probabilities (int64 [batch, sample_size])",
        pure=False,
    )
)
