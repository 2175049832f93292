"""Packages hold each weight once; loading one reads the weights once; load_module takes tars."""

import json
import tarfile

import numpy as np
import onnx
import pytest
from names_models import two_output_model

import ember
from ember.cli.main import main
from ember.executor import AotExecutor, GraphExecutor
from ember.runtime.blob import read_library_blob

pytestmark = pytest.mark.cc


@pytest.fixture(name="package")
def fixture_package(tmp_path):
    src = tmp_path / "m.onnx"
    onnx.save(two_output_model(), src)
    out = tmp_path / "m.tar"
    assert main(["compile", str(src), "-o", str(out), "--quiet"]) == 0
    return out


def test_weights_are_stored_once(package):
    with tarfile.open(package) as tar:
        names = tar.getnames()
        params = tar.extractfile("artifacts/graph_executor/params.bin").read()
        library = tar.extractfile("mod.so").read()
    assert "artifacts/graph_executor/params.bin" in names
    embedded = {a.file_name for a in read_library_blob(library, "mod.so") or []}
    assert "params.bin" not in embedded and "graph.json" in embedded
    assert params[-64:] not in library  # the weights' bytes are not in the library


def test_load_module_accepts_a_package_and_shares_weights(package):
    factory = ember.load_module(str(package))
    assert factory["list_params"]() == ["const_0", "const_1"]
    a = GraphExecutor(factory["default"](ember.cpu(0)))
    b = GraphExecutor(factory["default"](ember.cpu(0)))
    x = np.random.default_rng(1).random((1, 3, 8, 8), dtype="float32")
    for ex in (a, b):
        ex.set_input("x", x)
        ex.run()
    np.testing.assert_array_equal(a.get_output("probs").numpy(), b.get_output("probs").numpy())
    weights = factory["get_params"]()
    shared = a.module.get_input("const_0")
    assert shared.data_ptr == b.module.get_input("const_0").data_ptr  # one copy
    for ex in (a, b):  # the planned blocks of shared weights were released: held once
        plan = ex.module.plan
        for name in ("const_0", "const_1"):
            eid = ex.module.graph.node_row_ptr[ex.module.graph.arg_nodes[ex.get_input_index(name)]]
            assert ex.module.graph.storage_id[eid] not in plan.storage
    a.set_input("const_0", np.zeros(weights["const_0"].shape, "float32"))  # copy on write
    assert a.module.get_input("const_0").data_ptr != shared.data_ptr
    np.testing.assert_array_equal(b.module.get_input("const_0").numpy(), weights["const_0"].numpy())


def test_corrupt_external_weights_are_refused(package, tmp_path):
    data = bytearray(package.read_bytes())
    with tarfile.open(package) as tar:
        offset = tar.getmember("artifacts/graph_executor/params.bin").offset_data
    data[offset + 200] ^= 0xFF
    bad = tmp_path / "bad.tar"
    bad.write_bytes(bytes(data))
    with pytest.raises(ember.errors.ArtifactError, match="does not match its manifest"):
        ember.load_module(str(bad))


def test_aot_executors_share_the_package_weights(tmp_path):
    src = tmp_path / "m.onnx"
    onnx.save(two_output_model(), src)
    out = tmp_path / "aot.tar"
    assert main(["compile", str(src), "-o", str(out), "--executor", "aot", "--quiet"]) == 0
    factory = ember.load_module(str(out))
    a, b = (AotExecutor(factory["default"](ember.cpu(0))) for _ in range(2))
    ptr = a.module.get_input("const_0").data_ptr
    assert b.module.get_input("const_0").data_ptr == ptr
    x = np.random.default_rng(2).random((1, 3, 8, 8), dtype="float32")
    a.set_input("x", x)
    a.run()
    want = a.get_output("pooled").numpy()
    a.set_input("const_0", np.zeros_like(factory["get_params"]()["const_0"].numpy()))
    assert a.module.get_input("const_0").data_ptr != ptr  # copy on write
    a.run()  # the run's prepared arguments follow the moved constant
    assert not np.array_equal(a.get_output("pooled").numpy(), want)
    b.set_input("x", x)
    b.run()
    np.testing.assert_array_equal(b.get_output("pooled").numpy(), want)


def test_package_json_names_inputs_and_outputs(package):
    with tarfile.open(package) as tar:
        meta = json.loads(tar.extractfile("package.json").read())
    assert meta["inputs"] == ["x"] and meta["outputs"] == ["probs", "pooled"]
    assert meta["version"] == 2 and meta["external_artifacts"] == ["graph_executor/params.bin"]


def test_filled_weights_stay_compact_after_packing(tmp_path):
    # a ConstantOfShape weight of an odd column count, padded when packed: still one record
    shape = onnx.helper.make_tensor("s", onnx.TensorProto.INT64, [2], [64, 1000])
    value = onnx.helper.make_tensor("v", onnx.TensorProto.FLOAT, [1], [0.01])
    graph = onnx.helper.make_graph(
        [
            onnx.helper.make_node("Constant", [], ["shape"], value=shape),
            onnx.helper.make_node("ConstantOfShape", ["shape"], ["w"], value=value),
            onnx.helper.make_node("MatMul", ["x", "w"], ["y"]),
        ],
        "filled",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 64])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 1000])],
    )
    src = tmp_path / "filled.onnx"
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)]), src)
    out = tmp_path / "filled.tar"
    assert main(["compile", str(src), "-o", str(out), "--quiet"]) == 0
    with tarfile.open(out) as tar:
        params = tar.getmember("artifacts/graph_executor/params.bin").size
    assert params < 64 * 1000 * 4 // 8, params  # not the materialized 256 KB
    ex = GraphExecutor(ember.load_module(str(out))["default"](ember.cpu(0)))
    x = np.ones((1, 64), np.float32)
    ex.set_input("x", x)
    ex.run()
    np.testing.assert_allclose(ex.get_output("y").numpy(), np.full((1, 1000), 0.64), rtol=1e-5)
