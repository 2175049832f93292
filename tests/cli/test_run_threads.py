"""`ember run --threads N` sets the thread count of ember's pool for the run."""

import onnx
import pytest
from onnx import TensorProto, helper

import ember.runtime as rt
from ember.cli.main import main
from ember.runtime.threads import num_cores

pytestmark = pytest.mark.cc


def _relu_package(tmp_path):
    """A compiled package of a 4x8 Relu (no parallel loop at any thread count)."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
    )
    src = tmp_path / "r.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), src)
    out = tmp_path / "r.tar"
    assert main(["compile", str(src), "-o", str(out), "--quiet"]) == 0
    return out


def test_run_with_threads(tmp_path, capsys):
    out = _relu_package(tmp_path)
    before = rt.get_num_threads()
    try:
        assert main(["run", str(out), "--threads", "1", "--print-time", "--repeat", "1"]) == 0
        assert rt.get_num_threads() == 1
        assert "threads: 1\n" in capsys.readouterr().out
        with pytest.raises(SystemExit) as exc:  # refused by the parser: exit code 2
            main(["run", str(out), "--threads", "-2"])
        assert exc.value.code == 2
        assert "--threads: expected an integer 0-1024" in capsys.readouterr().err
    finally:
        rt.set_num_threads(before)


def test_run_print_time_says_when_the_governor_kept_one_thread(tmp_path, capsys):
    """A 4x8 Relu gains nothing from a second thread: after the governor's trial (not
    timed), the timing says the runs used one thread of two, and why."""
    out = _relu_package(tmp_path)
    if num_cores() < 2:
        pytest.skip("the run governor chooses only with 2+ threads on 2+ cores")
    before = rt.get_num_threads()
    try:
        assert main(["run", str(out), "--threads", "2", "--print-time", "--repeat", "3"]) == 0
        text = capsys.readouterr().out
        assert "latency ms:" in text
        line = next(x for x in text.splitlines() if x.startswith("threads:"))
        # a Relu of 32 values has no parallel loop: either choice runs it on one thread,
        # and the pool must save 5% to be kept
        assert line.startswith("threads: 1 of 2 (the run governor") or line == "threads: 2"
    finally:
        rt.set_num_threads(before)
