"""Einsum against onnxruntime."""

from __future__ import annotations

import pytest

try:  # a package when tests/ has __init__ files, plain modules otherwise
    from .nn_check import check_node, rand
except ImportError:
    from nn_check import check_node, rand  # type: ignore[no-redef]


@pytest.mark.parametrize(
    "eq,shapes",
    [
        ("ij,jk->ik", [(3, 4), (4, 5)]),
        ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
        ("ij->ji", [(3, 4)]),
        ("ijk->i", [(3, 4, 2)]),
        ("i,j->ij", [(3,), (4,)]),
        ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 2)]),
        ("ii->i", [(3, 3)]),
        ("ij,ij->", [(3, 4), (3, 4)]),
    ],
)
def test_einsum(eq: str, shapes: list[tuple[int, ...]]) -> None:
    inputs = {f"x{i}": rand(s, seed=i) for i, s in enumerate(shapes)}
    check_node("Einsum", inputs, {"equation": eq}, opset=12)
