"""The bitcast compute, lowered and interpreted, against the numpy reference (a view), and
tir.reinterpret's checks."""

import numpy as np
import pytest

from ember import tir
from ember.errors import IRError, OpNotSupportedError
from ember.ir import TensorType, Var, call
from ember.testing.lowering import check_lowered, primitive

SPECIAL = np.array([0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan, 1e-40], np.float64)


def _one(x: np.ndarray, dtype: str) -> None:
    v = Var("x", TensorType(x.shape, x.dtype.name))
    check_lowered(primitive([v], call("bitcast", v, dtype=dtype)), [x])


@pytest.mark.parametrize(
    ("src", "dst"),
    [
        ("float32", "int32"),
        ("float32", "uint32"),
        ("int32", "float32"),
        ("float64", "int64"),
        ("int64", "float64"),
        ("uint16", "int16"),
        ("int8", "uint8"),
        ("bool", "uint8"),
    ],
)
def test_bitcast_keeps_the_bits(src: str, dst: str) -> None:
    if src.startswith("float"):
        x = SPECIAL.astype(src).reshape(2, 4)
    elif src == "bool":
        x = np.array([[True, False, True]])
    else:
        x = np.array([[0, 1, -1, 7], [100, -100, 3, 5]]).astype(src)
    _one(x, dst)


def test_reinterpret_needs_one_width() -> None:
    with pytest.raises(IRError, match="one width"):
        tir.reinterpret("int64", tir.Var("f", "float32"))
    f = tir.Var("f", "float32")
    assert tir.reinterpret("float32", f) is f


def test_half_floats_are_refused_by_the_compute() -> None:
    v = Var("x", TensorType((3,), "float16"))
    with pytest.raises(OpNotSupportedError, match="16-bit"):
        check_lowered(primitive([v], call("bitcast", v, dtype="int16")), [np.zeros(3, "float16")])
