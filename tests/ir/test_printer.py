"""Printer: deterministic text, meta table, inline constants, tuples, nested functions."""

from __future__ import annotations

import numpy as np
import pytest

from ember.errors import IRError
from ember.ir import (
    Function,
    IRModule,
    TensorType,
    Tuple,
    TupleGetItem,
    Var,
    astext,
    call,
    const,
)
from ember.transform import fuse_ops

F32 = "float32"


def _conv_module() -> IRModule:
    x = Var("data", TensorType((1, 3, 8, 8), F32))
    w = const(np.zeros((4, 3, 3, 3), np.float32))
    conv = call(
        "nn.conv", x, w, strides=[1, 1], padding=[1, 1, 1, 1], dilation=[1, 1], name="conv1"
    )
    bias = const(np.array([0.5, -1.0, 0.25, 2.0], np.float32).reshape(4, 1, 1))
    return IRModule.from_expr(Function((x,), call("relu", call("add", conv, bias))))


def test_module_text_exact() -> None:
    assert astext(_conv_module()) == (
        "def @main(%data: Tensor[(1, 3, 8, 8), float32]) -> Tensor[(1, 4, 8, 8), float32] {\n"
        '  %0 = nn.conv(%data, meta[0], data_layout="NCHW", dilation=[1, 1], groups=1, '
        "padding=[1, 1, 1, 1], strides=[1, 1]) /* ty=Tensor[(1, 4, 8, 8), float32] */;\n"
        "  %1 = add(%0, const([[[0.5]], [[-1.0]], [[0.25]], [[2.0]]], float32)) "
        "/* ty=Tensor[(1, 4, 8, 8), float32] */;\n"
        "  %2 = relu(%1) /* ty=Tensor[(1, 4, 8, 8), float32] */;\n"
        "  %2\n"
        "}\n"
        "/* meta[0]: Tensor[(4, 3, 3, 3), float32] */\n"
    )


def test_str_of_module_is_astext_and_deterministic() -> None:
    assert str(_conv_module()) == astext(_conv_module())
    assert 'name="conv1"' in astext(_conv_module(), show_names=True)
    assert "meta[0]:" not in astext(_conv_module(), show_meta=False)


def test_shared_constant_gets_one_meta_index() -> None:
    x = Var("x", TensorType((3, 3), F32))
    c = const(np.ones((3, 3), np.float32))
    d = const(np.ones((3, 3), np.float32))
    text = astext(Function((x,), call("add", call("add", x, c), call("multiply", c, d))))
    assert "add(%x, meta[0])" in text
    assert "multiply(meta[0], meta[1])" in text
    assert text.count("/* meta[") == 2


def test_tuples_items_and_scalars() -> None:
    x = Var("x", TensorType((4,), "int64"))
    parts = call("split", x, sizes=[1, 3], axis=0)
    body = Tuple((TupleGetItem(parts, 1), const(np.int64(7)), Tuple((x,))))
    text = astext(Function((x,), body))
    assert "%0 = split(%x, axis=0, sizes=[1, 3])" in text
    assert "%1 = %0.1 /* ty=Tensor[(3), int64] */;" in text
    assert "%2 = (%x,)" in text
    assert "%3 = (%1, const(7, int64), %2)" in text


def test_duplicate_variable_names_are_disambiguated() -> None:
    a, b = Var("x", TensorType((2,), F32)), Var("x", TensorType((2,), F32))
    text = astext(Function((a, b), call("add", a, b)))
    assert "fn(%x: Tensor[(2), float32], %x_1: Tensor[(2), float32])" in text
    assert "add(%x, %x_1)" in text


def test_fused_functions_print_nested() -> None:
    text = astext(fuse_ops(_conv_module()))
    lines = text.splitlines()
    assert lines[1].startswith("  %0 = fn (%p0: Tensor[(1, 3, 8, 8), float32], %p1: ")
    assert lines[1].endswith(", Primitive=1) -> Tensor[(1, 4, 8, 8), float32] {")
    assert lines[2].startswith("    %0 = nn.conv(%p0, %p1, ")
    assert (
        "  %1 = %0(%data, meta[0], const([[[0.5]], [[-1.0]], [[0.25]], [[2.0]]], float32)) "
        "/* ty=Tensor[(1, 4, 8, 8), float32] */;" in lines
    )
    assert lines[-2:] == ["}", "/* meta[0]: Tensor[(4, 3, 3, 3), float32] */"]


def test_attribute_values_and_bad_input() -> None:
    x = Var("x", TensorType((2, 2), F32))
    text = astext(call("leaky_relu", x, alpha=0.1))
    assert "leaky_relu(%x, alpha=0.1)" in text
    with pytest.raises(IRError, match="astext expects"):
        astext(42)  # type: ignore[arg-type]


def test_deep_graph_prints_without_recursion() -> None:
    x = Var("x", TensorType((2,), F32))
    y = x
    for _ in range(20000):
        y = call("negative", y)
    text = astext(Function((x,), y))
    assert text.count("negative(") == 20000
