"""``ember inspect OUT --show partition.json`` says which node went where."""

import json

import pytest

import ember
import ember.backends.example_accel  # noqa: F401 - registers the kind
from ember.cli.main import main
from ember.driver.partition_report import partition_map
from ember.frontend import from_onnx
from ember.testing.onnx_models import build_model, node

pytestmark = pytest.mark.cc


def test_partition_json_lists_every_node(tmp_path, capsys):
    nodes = [node("Add", ["x", "x"], "a"), node("Exp", ["a"], "e"), node("Relu", ["e"], "y")]
    model = build_model(nodes, {"x": ("float32", (2, 3))}, ["y"])
    mod, params = from_onnx(model)
    ember.build(mod, "example_accel, c", params).save(tmp_path / "out")
    assert main(["inspect", str(tmp_path / "out"), "--show", "partition.json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    where = {row["node"]: row["where"] for row in doc["nodes"]}
    assert where == {"a": "example_accel", "e": "c", "y": "example_accel"}
    assert doc["target"] == "example_accel, c"


def test_plain_target_writes_no_partition_map():
    nodes = [node("Relu", ["x"], "y")]
    mod, params = from_onnx(build_model(nodes, {"x": ("float32", (2, 3))}, ["y"]))
    assert not [a for a in ember.build(mod, "c", params) if a.file_name == "partition.json"]


def test_shared_kernels_report_each_nodes_own_name():
    # two identical adds share one kernel; each row still names its own ONNX node
    nodes = [node("Add", ["x", "x"], "a1"), node("Exp", ["a1"], "e"), node("Add", ["e", "e"], "a2")]
    mod, params = from_onnx(build_model(nodes, {"x": ("float32", (2, 3))}, ["a2"]))
    lowered = ember.lower(mod, "example_accel, c", params)
    assert len([k for k in lowered.plan.kernels if "example_accel" in k]) == 1
    rows = partition_map(lowered.ir, lowered.plan, lowered.target)
    assert [(r["node"], r["where"]) for r in rows] == [
        ("a1", "example_accel"),
        ("e", "c"),
        ("a2", "example_accel"),
    ]
    assert rows[0]["kernel"] != rows[2]["kernel"]  # two graph nodes calling one kernel
