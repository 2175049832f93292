"""Structural equality and hashing up to renaming."""

from __future__ import annotations

from ember import tir


def _copy_kernel(name_a: str, name_i: str, factor: float) -> tir.PrimFunc:
    a = tir.decl_buffer((8,), "float32", name_a)
    b = tir.decl_buffer((8,), "float32", "B")
    i = tir.Var(name_i)
    return tir.PrimFunc("k", (a, b), tir.for_range(i, 8, tir.store(b, a[i] * factor, i)))


def test_equal_up_to_renaming() -> None:
    f1 = _copy_kernel("A", "i", 2.0)
    f2 = _copy_kernel("X", "j", 2.0)
    assert tir.structural_equal(f1, f2)
    assert tir.structural_hash(f1) == tir.structural_hash(f2)
    assert not tir.structural_equal(f1, f2, map_free_vars=False)


def test_different_structure_differs() -> None:
    f1 = _copy_kernel("A", "i", 2.0)
    f3 = _copy_kernel("A", "i", 3.0)
    assert not tir.structural_equal(f1, f3)
    assert tir.structural_hash(f1) != tir.structural_hash(f3)


def test_variable_binding_pattern_matters() -> None:
    i, j = tir.Var("i"), tir.Var("j")
    assert tir.structural_equal(i + i, j + j)
    assert not tir.structural_equal(i + j, i + i)


def test_hash_is_stable_across_processes() -> None:
    import subprocess
    import sys

    code = (
        "from ember import tir\n"
        "i = tir.Var('i')\n"
        "print(tir.structural_hash(i * 4 + tir.const(1)))\n"
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            check=True,
            capture_output=True,
            text=True,
            env={"PYTHONHASHSEED": str(seed)},
        ).stdout
        for seed in (1, 2)
    }
    assert len(outs) == 1
