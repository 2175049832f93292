"""String NDArrays: numpy object/'U'/'S' arrays in, object arrays of str out; copies own
their bytes; bad elements and DLPack are refused; params carry strings; the standalone
runtime (Model Library Format with the C interface) refuses string models."""

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import ember
from ember.errors import EmberTypeError, EmberValueError, OpNotSupportedError
from ember.formats.params import load_params, save_params
from ember.frontend.onnx import from_onnx
from ember.runtime.strings import decode, encode
from ember.support import dtypes


def _text(*values: str) -> np.ndarray:
    return np.array([*values, None], dtype=object)[:-1]


def test_the_string_row_of_the_dtype_table() -> None:
    info = dtypes.dtype_info("string")
    assert info.itemsize == 16 and info.onnx == TensorProto.STRING
    assert dtypes.STRING_RECORD.itemsize == 16
    for npdt in (np.dtype(object), np.dtype("U3"), np.dtype("S3"), dtypes.STRING_RECORD):
        assert dtypes.from_numpy(npdt) is info
    assert "string" not in dtypes.TENSOR_DTYPES  # the numeric tensor dtypes


@pytest.mark.parametrize(
    "source",
    [_text("a", "", "日本語", "é"), np.array(["a", "", "日本語", "é"]), [b"a", b"", "日本語", "é"]],
)
def test_array_round_trip(source: object) -> None:
    arr = ember.nd.array(source if not isinstance(source, list) else np.array(source, object))
    assert arr.dtype == "string" and arr.shape == (4,) and arr.nbytes == 64
    out = arr.numpy()
    assert out.dtype == object and out.tolist() == ["a", "", "日本語", "é"]
    assert np.asarray(arr).tolist() == out.tolist()


def test_copies_own_their_bytes() -> None:
    src = ember.nd.array(np.array([["x", "yz"], ["", "w"]], dtype=object))
    dst = ember.nd.empty((2, 2), "string")
    assert dst.numpy().tolist() == [["", ""], ["", ""]]
    dst.copyfrom(src)
    del src
    assert dst.numpy().tolist() == [["x", "yz"], ["", "w"]]
    assert ember.nd.array(dst).numpy().tolist() == dst.numpy().tolist()


def test_encode_decode_zero_dim_and_empty() -> None:
    records, blob = encode(np.array("cat", dtype=object))
    assert records.shape == () and decode(records).item() == "cat" and blob[-1] == 0
    records, _ = encode(np.zeros((2, 0), dtype=object))
    assert decode(records).shape == (2, 0)


def test_non_str_elements_are_refused() -> None:
    with pytest.raises(EmberTypeError, match="element 1 is a int"):
        ember.nd.array(np.array(["a", 3], dtype=object))
    with pytest.raises(EmberTypeError, match="numpy array of str"):
        encode(np.array([1.0, 2.0]))


def test_dlpack_is_refused() -> None:
    with pytest.raises(EmberValueError, match="DLPack has no string type"):
        ember.nd.array(_text("a")).__dlpack__()


def test_params_carry_strings() -> None:
    params = {"s": np.array([["a", "bé"], ["", "z"]], dtype=object), "f": np.ones(2, "float32")}
    back = load_params(save_params(params))
    assert back["s"].dtype == object and back["s"].tolist() == params["s"].tolist()
    assert back["f"].tolist() == [1.0, 1.0]


def test_standalone_model_library_format_refuses_strings(tmp_path: Path) -> None:
    graph = helper.make_graph(
        [helper.make_node("StringConcat", ["x", "x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.STRING, [2])],
        [helper.make_tensor_value_info("y", TensorProto.STRING, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    onnx.checker.check_model(model)
    mod, params = from_onnx(model)
    lowered = ember.lower(mod, "c", params, executor="aot -interface-api=c")
    with pytest.raises(OpNotSupportedError, match="StringConcat"):
        ember.export_model_library_format(lowered, tmp_path / "m.tar")
