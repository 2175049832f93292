"""Names end to end: ONNX output and node names in executors, npz files, profiles, traces."""

import io
import json

import numpy as np
import onnx
import pytest
from names_models import two_output_model

import ember
from ember.cli.main import main
from ember.cli.run_cmd import npz_bytes
from ember.errors import ExecutorError
from ember.executor import AotExecutor, GraphExecutor
from ember.frontend.onnx import from_onnx
from ember.ir import Function, IRModule, TensorType, Var, call

pytestmark = pytest.mark.cc


@pytest.mark.parametrize("executor", ["graph", "aot"])
def test_outputs_by_onnx_name_in_both_executors(executor):
    mod, params = from_onnx(two_output_model())
    factory = ember.build(mod, target="c", params=params, executor=executor).load_module()
    wrap = AotExecutor if executor == "aot" else GraphExecutor
    ex = wrap(factory["default"](ember.cpu(0)))
    ex.set_input("x", np.ones((1, 3, 8, 8), "float32"))
    ex.run()
    assert ex.get_output_names() == ["probs", "pooled"]
    assert ex.get_output_index("pooled") == 1 and ex.get_output_index("nope") == -1
    assert ex.get_output("pooled").shape == (1, 4, 1, 1)
    np.testing.assert_array_equal(ex.get_output("probs").numpy(), ex.get_output(0).numpy())
    assert [p.name for p in factory["get_metadata"]().outputs] == ["probs", "pooled"]
    with pytest.raises(ExecutorError, match="no output 'nope'; outputs: 'probs', 'pooled'"):
        ex.get_output("nope")


def test_model_without_names_keeps_positional_names():
    x = Var("x", TensorType((2,), "float32"))
    mod = IRModule.from_expr(Function((x,), call("relu", x)))
    ex = GraphExecutor(ember.build(mod, target="c").load_module()["default"](ember.cpu(0)))
    assert ex.get_output_names() == ["output0"]


def test_run_writes_npz_by_name_and_profile_exports(tmp_path, capsys):
    src = tmp_path / "m.onnx"
    onnx.save(two_output_model(), src)
    pkg = tmp_path / "m.tar"
    assert main(["compile", str(src), "-o", str(pkg), "--quiet"]) == 0
    out, prof, trace = tmp_path / "o.npz", tmp_path / "p.json", tmp_path / "t.json"
    args = ["run", str(pkg), "--outputs", str(out), "--profile", "--profile-json", str(prof)]
    assert main([*args, "--trace", str(trace)]) == 0
    printed = capsys.readouterr().out
    assert sorted(np.load(out).files) == ["pooled", "probs"]
    assert "conv_a, relu_a" in printed and "Op type" in printed and "Conv+Relu" in printed
    report = json.loads(prof.read_text())
    rows = {r["name"]: r for r in report["rows"]}
    conv = next(r for r in rows.values() if "conv_a" in r["onnx_nodes"])
    assert conv["op_types"] == ["Conv", "Relu"] and conv["onnx_nodes"] == ["conv_a", "relu_a"]
    assert {t["op_type"] for t in report["by_op_type"]} >= {"Conv+Relu", "Sigmoid"}
    events = json.loads(trace.read_text())["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    assert len(complete) == len(report["rows"])
    for e in complete:
        assert {"name", "ts", "dur", "pid", "tid", "cat", "args"} <= set(e)
        assert isinstance(e["ts"], int | float) and e["dur"] >= 0
    ends = [e["ts"] + e["dur"] for e in complete]
    assert all(b["ts"] >= a - 1e-3 for a, b in zip(ends, complete[1:], strict=False))
    assert any("sig_a" in e["args"]["onnx_nodes"] for e in complete)


def test_npz_keeps_names_numpy_savez_cannot_take():
    arrays = {"file": np.arange(3), "allow_pickle": np.ones((2, 2), "float32")}
    loaded = np.load(io.BytesIO(npz_bytes(arrays)))
    assert sorted(loaded.files) == ["allow_pickle", "file"]
    np.testing.assert_array_equal(loaded["file"], arrays["file"])


def test_trace_events_end_where_the_next_begins():
    """Regression: ts and dur were rounded separately, so an event could end up to 1 ns
    after the next one began (the CLI test failed in CI on such a profile)."""
    from ember.executor.profile import ProfileReport, ProfileRow

    rng = np.random.default_rng(0)
    rows = tuple(
        ProfileRow(k, f"k{k}", f"k{k}", float(t), 0.0, ((1,),), "float32")
        for k, t in enumerate(rng.uniform(0.0005, 50.0, 400))
    )
    events = [e for e in ProfileReport(rows, 1).chrome_trace()["traceEvents"] if e["ph"] == "X"]
    for a, b in zip(events, events[1:], strict=False):
        assert b["ts"] >= a["ts"] + a["dur"] - 1e-9
