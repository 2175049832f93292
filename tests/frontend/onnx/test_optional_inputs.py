"""Optional model inputs: present by default (a tensor input), or marked empty for the
build with ``shape={"opt": None}``, which removes the input and folds OptionalHasElement."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from ember.driver import build
from ember.errors import FrontendError
from ember.frontend.onnx import from_onnx
from ember.ir import evaluate
from ember.testing.onnx_models import build_model, node
from ember.testing.runners import run_artifacts


def _has_element_model() -> object:
    opt = helper.make_value_info(
        "opt",
        helper.make_optional_type_proto(helper.make_tensor_type_proto(TensorProto.INT32, [3])),
    )
    graph = helper.make_graph(
        [helper.make_node("OptionalHasElement", ["opt"], ["has"])],
        "has_element",
        [opt],
        [helper.make_tensor_value_info("has", TensorProto.BOOL, [])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_an_optional_input_is_present_by_default() -> None:
    mod, params = from_onnx(_has_element_model())
    assert [p.name for p in mod.main.params] == ["opt"]
    (got,) = evaluate(mod, {"opt": np.zeros(3, np.int32)}, params)
    assert bool(got) is True


def test_an_optional_input_marked_empty_is_no_input() -> None:
    mod, params = from_onnx(_has_element_model(), shape={"opt": None})
    assert list(mod.main.params) == []
    (got,) = evaluate(mod, {}, params)
    assert bool(got) is False


@pytest.mark.cc
def test_an_empty_optional_input_compiles() -> None:
    mod, params = from_onnx(_has_element_model(), shape={"opt": None})
    (got,) = run_artifacts(build(mod, params=params, target="c"), {})
    assert got.dtype == np.bool_ and not bool(got)


def test_none_for_a_plain_input_is_an_error() -> None:
    model = build_model([node("Identity", ["x"], "y")], {"x": ("float32", (2,))}, ["y"])
    with pytest.raises(FrontendError, match="'x', which is not optional"):
        from_onnx(model, shape={"x": None})
