"""String ops compiled for the C target, run by the graph and the AOT executor, against
onnxruntime (Equal, StringConcat, RegexFullMatch, StringNormalizer, LabelEncoder) and the
numpy references, on the c, llvm and llvmjit targets; the per-run string arena."""

from collections.abc import Sequence

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import ember
from ember.errors import EmberTypeError, OpNotSupportedError
from ember.frontend.onnx import from_onnx

S = TensorProto.STRING


def _model(nodes: list[onnx.NodeProto], ins: dict[str, tuple[int, list[int]]],
           outs: dict[str, tuple[int, list[int]]], inits: Sequence[onnx.TensorProto] = (),
           ml: bool = False) -> onnx.ModelProto:  # fmt: skip
    graph = helper.make_graph(
        nodes,
        "strings",
        [helper.make_tensor_value_info(n, t, s) for n, (t, s) in ins.items()],
        [helper.make_tensor_value_info(n, t, s) for n, (t, s) in outs.items()],
        list(inits),
    )
    opsets = [helper.make_opsetid("", 20)] + ([helper.make_opsetid("ai.onnx.ml", 4)] if ml else [])
    return helper.make_model(graph, opset_imports=opsets, ir_version=9)


def _executor(model: onnx.ModelProto, executor: str, target: str = "c") -> object:
    mod, params = from_onnx(model)
    lib = ember.build(mod, target=target, params=params, executor=executor)
    dev = ember.cpu(0)
    factory = ember.load_artifacts(lib, dev)["default"](dev)
    return ember.GraphExecutor(factory) if executor == "graph" else ember.AotExecutor(factory)


def _run(ex: object, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    for name, value in feeds.items():
        ex.set_input(name, value)  # type: ignore[attr-defined]
    ex.run()  # type: ignore[attr-defined]
    n = ex.get_num_outputs()  # type: ignore[attr-defined]
    return [ex.get_output(i).numpy() for i in range(n)]  # type: ignore[attr-defined]


#: every host code generator: the llvm kinds call the same runtime string functions.
TARGETS = ("c", "llvm", "llvmjit")


def _check(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> None:
    want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
    for target in TARGETS:
        for executor in ("graph", "aot"):
            got = _run(_executor(model, executor, target), feeds)
            for g, w in zip(got, want, strict=True):
                assert g.shape == np.asarray(w).shape
                assert g.tolist() == np.asarray(w).tolist(), (target, executor)
            assert g.dtype == (object if np.asarray(w).dtype.kind in "OUS" else w.dtype)


def _text(*values: str) -> np.ndarray:
    return np.array([*values, None], dtype=object)[:-1]


def test_equal_and_concat_broadcast_with_a_constant() -> None:
    suffix = helper.make_tensor("c", S, [1], [b"!"])
    nodes = [
        helper.make_node("StringConcat", ["x", "y"], ["t"]),
        helper.make_node("StringConcat", ["t", "c"], ["z"]),
        helper.make_node("Equal", ["x", "y"], ["e"]),
    ]
    model = _model(nodes, {"x": (S, [2, 3]), "y": (S, [3])}, {"z": (S, [2, 3]),
                   "e": (TensorProto.BOOL, [2, 3])}, [suffix])  # fmt: skip
    x = np.array([["a", "é", ""], ["b", "日本", "z"]], dtype=object)
    _check(model, {"x": x, "y": _text("b", "日本", "")})


def test_regex_full_match_rewrites_re2_classes() -> None:
    node = helper.make_node("RegexFullMatch", ["x"], ["y"], pattern=r"www\.[\w.-]+\.\bcom\b")
    model = _model([node], {"x": (S, [4])}, {"y": (TensorProto.BOOL, [4])})
    _check(model, {"x": _text("www.google.com", "www.bbc.co.uk", "www.a-b.com", "xwww.a.com")})


def test_regex_full_match_refuses_what_regcomp_rejects() -> None:
    node = helper.make_node("RegexFullMatch", ["x"], ["y"], pattern="a(b")
    model = _model([node], {"x": (S, [1])}, {"y": (TensorProto.BOOL, [1])})
    with pytest.raises(OpNotSupportedError, match="regcomp"):
        from_onnx(model)


@pytest.mark.parametrize("action", ["LOWER", "UPPER"])
def test_string_normalizer_changes_case_of_utf8(action: str) -> None:
    node = helper.make_node(
        "StringNormalizer", ["x"], ["y"], case_change_action=action, locale="C.UTF-8"
    )
    model = _model([node], {"x": (S, [4])}, {"y": (S, [4])})
    _check(model, {"x": _text("Monday", "ÉCOLE été", "straße", "ΣΊΣΥΦΟΣ")})


def test_label_encoder_string_keys_to_ints_and_strings() -> None:
    nodes = [
        helper.make_node("LabelEncoder", ["x"], ["i"], domain="ai.onnx.ml",
                         keys_strings=["b", "a", "ü"], values_int64s=[1, 0, 7], default_int64=-5),
        helper.make_node("LabelEncoder", ["x"], ["s"], domain="ai.onnx.ml",
                         keys_strings=["a", "ü"], values_strings=["A", "U"], default_string="?"),
    ]  # fmt: skip
    model = _model(nodes, {"x": (S, [5])}, {"i": (TensorProto.INT64, [5]), "s": (S, [5])}, ml=True)
    _check(model, {"x": _text("a", "b", "ü", "", "c")})


def test_arena_memory_does_not_grow_over_many_runs() -> None:
    node = helper.make_node("StringConcat", ["x", "x"], ["y"])
    model = _model([node], {"x": (S, [64])}, {"y": (S, [64])})
    ex = _executor(model, "graph")
    x = np.array(["abcdefgh" * 40] * 64, dtype=object)
    _run(ex, {"x": x})
    arena = ex.module.plan.arena  # type: ignore[attr-defined]
    first = arena.nbytes
    for _ in range(50):
        out = _run(ex, {"x": x})
    assert arena.nbytes == first > 0
    assert out[0][0] == "abcdefgh" * 80


def test_bad_input_objects_are_refused() -> None:
    node = helper.make_node("Equal", ["x", "y"], ["e"])
    model = _model([node], {"x": (S, [2]), "y": (S, [2])}, {"e": (TensorProto.BOOL, [2])})
    for executor in ("graph", "aot"):
        ex = _executor(model, executor)
        with pytest.raises(EmberTypeError, match="not a str"):
            ex.set_input("x", np.array(["a", 3], dtype=object))  # type: ignore[attr-defined]
