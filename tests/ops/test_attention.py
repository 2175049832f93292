"""The tensor_scatter compute (KV-cache update), lowered and interpreted, against the numpy
reference."""

import numpy as np
import pytest

from ember.ir import TensorType, Var, call
from ember.testing import random_input
from ember.testing.lowering import check_lowered, primitive


@pytest.mark.parametrize("mode", ["linear", "circular"])
@pytest.mark.parametrize(("shape", "update", "axis"), [((2, 3, 6, 4), 2, 2), ((3, 5, 2), 3, 1)])
@pytest.mark.parametrize("index_dtype", ["int64", "int32"])
def test_tensor_scatter(mode: str, shape: tuple, update: int, axis: int, index_dtype: str) -> None:
    past = random_input(shape, "float32", seed=1)
    ushape = tuple(update if d == axis else s for d, s in enumerate(shape))
    upd = random_input(ushape, "float32", seed=2)
    top = shape[axis] if mode == "circular" else shape[axis] - update + 1
    write = (np.arange(shape[0]) * 3 % top).astype(index_dtype)
    vs = [
        Var("past", TensorType(shape, "float32")),
        Var("update", TensorType(ushape, "float32")),
        Var("write", TensorType((shape[0],), index_dtype)),
    ]
    body = call("tensor_scatter", *vs, axis=axis, mode=mode)
    check_lowered(primitive(vs, body), [past, upd, write])
