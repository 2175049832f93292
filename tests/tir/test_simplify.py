"""Index simplification: folding, identities, div/mod by constants, bound-based decisions."""

from __future__ import annotations

import random

import numpy as np

from ember import tir


def s(e: tir.PrimExpr, **ranges: tuple[tir.Var, int, int]) -> str:
    return str(tir.simplify(e, {v: (lo, hi) for v, lo, hi in ranges.values()}))


def test_constant_folding_and_identities() -> None:
    i = tir.Var("i")
    assert s(tir.const(2) * 3 + 1) == "7"
    assert s(i * 1 + 0) == "i"
    assert s(i * 0 + 5) == "5"
    assert s(i // 1) == "i"
    assert s(i % 1) == "0"
    assert s(tir.const(-7) // 2) == "-4" and s(tir.const(-7) % 2) == "1"
    assert s(tir.truncdiv(tir.const(-7), tir.const(2))) == "-3"
    assert s(tir.const(1.5) * 2.0) == "3.0f"
    x = tir.Var("x", "float32")
    assert s(x * 1.0) == "x"


def test_like_terms_merge() -> None:
    i, j = tir.Var("i"), tir.Var("j")
    assert s(i * 4 + j - i * 4) == "j"
    assert s((i + 2) * 3 - 6) == "i * 3"
    assert s(j - i) == "j - i"


def test_div_mod_extract_multiples() -> None:
    i, j = tir.Var("i"), tir.Var("j")
    assert s((i * 4 + j) // 4) == "i + j // 4"
    assert s((i * 4 + j) % 4) == "j % 4"
    assert s((i * 8) // 4) == "i * 2"


def test_div_mod_with_ranges() -> None:
    i, j = tir.Var("i"), tir.Var("j")
    assert s((i * 4 + j) // 4, r=(j, 0, 3)) == "i"
    assert s((i * 4 + j) % 4, r=(j, 0, 3)) == "j"
    assert s(j // 8, r=(j, 0, 7)) == "0"


def test_comparisons_decided_by_bounds() -> None:
    i, j = tir.Var("i"), tir.Var("j")
    assert s(i * 4 + j < 16, a=(i, 0, 3), b=(j, 0, 3)) == "True"
    assert s(i * 4 + j < 10, a=(i, 0, 3), b=(j, 0, 3)) == "i * 4 + j < 10"
    assert s(tir.min(j, 10), b=(j, 0, 3)) == "j"
    assert s(tir.if_then_else(tir.const(3) > 2, i, j)) == "i"


def test_statement_simplification_uses_loop_ranges() -> None:
    a = tir.decl_buffer((16,), "float32", "A")
    io, ii = tir.Var("io"), tir.Var("ii")
    guard = tir.IfThenElse(io * 4 + ii < 16, tir.store(a, 0.0, io * 4 + ii))
    nest = tir.for_range(io, 4, tir.for_range(ii, 4, guard))
    text = str(tir.simplify(nest))
    assert "if" not in text
    one = tir.for_range(tir.Var("k"), 1, tir.store(a, 1.0, io))
    assert str(tir.simplify(one)).strip() == "A[io] = 1.0f"


def test_div_mod_pairs_recombine() -> None:
    i, j = tir.Var("i"), tir.Var("j")
    x = i * 16 + j
    assert s(x // 19 * 19 + x % 19) == "i * 16 + j"
    assert s(x // 19 * 38 + x % 19 * 2 + 1) == "i * 32 + j * 2 + 1"
    assert s(x // 19 * 19) == "(i * 16 + j) // 19 * 19"


def _random_expr(rng: random.Random, leaves: list[tir.PrimExpr], depth: int) -> tir.PrimExpr:
    if depth == 0 or rng.random() < 0.2:
        if rng.random() < 0.4:
            return tir.const(rng.randint(-9, 9))
        return rng.choice(leaves)
    a = _random_expr(rng, leaves, depth - 1)
    b = _random_expr(rng, leaves, depth - 1)
    pick = rng.randrange(8)
    if pick == 0:
        return a + b
    if pick == 1:
        return a - b
    if pick == 2:
        return a * tir.const(rng.randint(-4, 4))
    if pick == 3:
        return a // tir.const(rng.choice([1, 2, 3, 4, 8]))
    if pick == 4:
        return a % tir.const(rng.choice([1, 2, 3, 4, 8]))
    if pick == 5:
        return tir.min(a, b)
    if pick == 6:
        return tir.max(a, b)
    return tir.if_then_else(a < b, a, b)


def _evaluate(e: tir.PrimExpr, env: dict[tir.Var, int]) -> int:
    out = tir.decl_buffer((1,), "int32", "out")
    params = tuple(env)
    f = tir.PrimFunc("probe", (out, *params), tir.store(out, e, 0))
    arr = np.zeros(1, "int32")
    tir.interpret(f, [arr, *env.values()])
    return int(arr[0])


def test_simplify_preserves_values_on_random_expressions() -> None:
    rng = random.Random(1234)
    i, j, k = tir.Var("i"), tir.Var("j"), tir.Var("k")
    ranges = {i: (0, 7), j: (0, 3), k: (-5, 5)}
    for _ in range(150):
        e = _random_expr(rng, [i, j, k, i * 4 + j], 4)
        simple = tir.simplify(e, ranges)
        for _ in range(4):
            env = {v: rng.randint(lo, hi) for v, (lo, hi) in ranges.items()}
            assert _evaluate(e, env) == _evaluate(simple, env), (str(e), str(simple), env)


def test_lossless_cast_round_trips_disappear() -> None:
    i = tir.Var("i")
    assert s(tir.cast("int32", tir.cast("int64", i))) == "i"
    assert s(tir.cast("int32", tir.cast("int16", i))) == "int32(int16(i))"
    u = tir.Var("u", "uint8")
    assert s(tir.cast("uint8", tir.cast("int32", u))) == "u"
    assert s(tir.cast("uint8", tir.cast("int8", u))) == "uint8(int8(u))"


def test_repeated_conjuncts_collapse() -> None:
    i, j = tir.Var("i"), tir.Var("j")
    cond = tir.logical_and(i < j, j < 9, i < j)
    assert s(cond) == "i < j and j < 9"
    assert s(tir.logical_and(i < j, i < j)) == "i < j"


def test_small_constant_powers_become_products() -> None:
    x = tir.Var("x", "float32")
    assert s(tir.pow(x, 1.0)) == "x"
    assert s(tir.pow(x, 2.0)) == s(x * x)
    assert s(tir.pow(x, 3.0)) == s(x * x * x)
    assert s(tir.pow(x, 4.0)) == s((x * x) * (x * x))
    for n in (0.5, 2.5, 5.0, -1.0):  # left to libm
        assert "pow" in s(tir.pow(x, n))
    assert "pow" in s(tir.pow(x, tir.Var("n", "float32")))


def test_a_cast_to_an_integer_type_is_bounded_by_the_type() -> None:
    """A byte read through a float computation lands in the byte's range (a 256-entry
    table's index needs no run-time check); a narrowing cast wraps, so it gets the type's
    range, not its operand's."""
    from ember.tir.simplify import Simplifier

    x = tir.Var("x", "float32")
    i = tir.Var("i")
    bounds = Simplifier({i: (0, 1000)})
    byte = tir.Cast("int32", tir.Cast("uint8", x * 2.0))
    assert bounds.bound(byte) == (0, 255)
    assert bounds.bound(tir.Cast("int8", i)) == (-128, 127)
    assert bounds.bound(tir.Cast("int16", i)) == (0, 1000)
    assert s(byte < 256) == "True"
