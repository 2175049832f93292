"""The string handlers: IR they make, ember's references against onnx's reference
implementation, value-shaped ops (StringSplit, StringNormalizer with stopwords) evaluated
at build time when their input is constant and refused otherwise."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from ember.errors import FrontendError, OpNotSupportedError
from ember.frontend.onnx import from_onnx
from ember.ir import Call, post_order
from ember.testing import run_onnx_reference

S = TensorProto.STRING


def _model(node: onnx.NodeProto, ins: list[str], outs: dict[str, int],
           inits: list[onnx.TensorProto] | None = None) -> onnx.ModelProto:  # fmt: skip
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info(n, S, [3]) for n in ins],
        [helper.make_tensor_value_info(n, t, None) for n, t in outs.items()],
        inits or [],
    )
    opsets = [helper.make_opsetid("", 20), helper.make_opsetid("ai.onnx.ml", 4)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=9)


def _ops(model: onnx.ModelProto) -> set[str]:
    mod, _ = from_onnx(model)
    body = mod["main"].body
    return {e.op.name for e in post_order(body) if isinstance(e, Call)}


def _against_onnx(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> None:
    want = ReferenceEvaluator(model).run(None, feeds)
    got = run_onnx_reference(model, feeds)
    for g, w in zip(got, want, strict=True):
        assert np.asarray(g).tolist() == np.asarray(w).tolist()


X = np.array(["ab", "Cd", "ab"], dtype=object)
Y = np.array(["ab", "cd", "x"], dtype=object)


def test_equal_on_strings_is_string_equal() -> None:
    model = _model(helper.make_node("Equal", ["x", "y"], ["z"]), ["x", "y"], {"z": 9})
    assert "string_equal" in _ops(model)
    _against_onnx(model, {"x": X, "y": Y})


def test_string_concat_and_regex() -> None:
    concat = _model(helper.make_node("StringConcat", ["x", "y"], ["z"]), ["x", "y"], {"z": S})
    assert "string_concat" in _ops(concat)
    _against_onnx(concat, {"x": X, "y": Y})
    regex = _model(helper.make_node("RegexFullMatch", ["x"], ["z"], pattern=r"\w\w"), ["x"],
                   {"z": 9})  # fmt: skip
    _against_onnx(regex, {"x": X})


def test_regex_without_posix_equivalent_is_refused() -> None:
    node = helper.make_node("RegexFullMatch", ["x"], ["z"], pattern=r"\p{Greek}")
    with pytest.raises(OpNotSupportedError, match="POSIX"):
        from_onnx(_model(node, ["x"], {"z": 9}))


def test_normalizer_without_stopwords_compiles_case_change() -> None:
    node = helper.make_node("StringNormalizer", ["x"], ["z"], case_change_action="UPPER")
    model = _model(node, ["x"], {"z": S})
    assert _ops(model) == {"string_change_case"}
    _against_onnx(model, {"x": X})


def test_stopwords_need_a_constant_input() -> None:
    node = helper.make_node("StringNormalizer", ["x"], ["z"], stopwords=["ab"], name="norm")
    with pytest.raises(FrontendError, match=r"'norm'.*must be constant"):
        from_onnx(_model(node, ["x"], {"z": S}))
    c = helper.make_tensor("c", S, [3], [b"ab", b"Cd", b"ab"])
    node = helper.make_node("StringNormalizer", ["c"], ["z"], stopwords=["ab"])
    got = run_onnx_reference(_model(node, [], {"z": S}, [c]), {})
    assert np.asarray(got[0]).tolist() == ["Cd"]


def test_string_split_of_a_constant_folds() -> None:
    c = helper.make_tensor("c", S, [2], [b"a b", b"c"])
    node = helper.make_node("StringSplit", ["c"], ["z", "n"])
    model = _model(node, [], {"z": S, "n": TensorProto.INT64}, [c])
    z, n = run_onnx_reference(model, {})
    assert np.asarray(z).tolist() == [["a", "b"], ["c", ""]] and np.asarray(n).tolist() == [2, 1]
    with pytest.raises(FrontendError, match="must be constant"):
        from_onnx(_model(helper.make_node("StringSplit", ["x"], ["z", "n"]), ["x"], {"z": S}))


def test_label_encoder_checks_counts_and_matches_onnx() -> None:
    node = helper.make_node("LabelEncoder", ["x"], ["z"], domain="ai.onnx.ml",
                            keys_strings=["ab", "Cd"], values_strings=["1", "2"])  # fmt: skip
    model = _model(node, ["x"], {"z": S})
    assert _ops(model) == {"label_encode_string"}
    _against_onnx(model, {"x": X})
    bad = helper.make_node("LabelEncoder", ["x"], ["z"], domain="ai.onnx.ml",
                           keys_strings=["a"], values_int64s=[1, 2])  # fmt: skip
    with pytest.raises(FrontendError, match="1 keys but 2 values"):
        from_onnx(_model(bad, ["x"], {"z": TensorProto.INT64}))
