"""benchmarks/models.py and its helpers (bench_host.py, bench_report.py) work: they run on
a tiny model and print what issue 12 asks for. No timing is asserted, only the shape of
the report, the FLOP count, the FMA-limit formula and the busy process's lifetime."""

import os
import re
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from bench_script import load_bench_script
from onnx import TensorProto, helper, numpy_helper

BENCH = Path(__file__).parents[2] / "benchmarks"


@pytest.fixture
def bench(monkeypatch):
    """benchmarks/models.py loaded by file path (its folder joins sys.path for helpers)."""
    return load_bench_script("models", "ember_bench_zoo", monkeypatch)


def _table(out: str) -> tuple[list[str], list[list[str]]]:
    rows = [line for line in out.splitlines() if line.startswith("| ")]
    cells = [[c.strip() for c in r.split("|")[1:-1]] for r in rows]
    return cells[0], cells[2:]


@pytest.mark.cc
def test_models_benchmark_prints_both_thread_counts_ratios_and_geomeans(bench, capsys):
    argv = ["--models", "dense_autoencoder", "--repeat", "1", "--keep-cache", "--cpu-clock"]
    assert bench.main([*argv, "--profile", "3"]) == 0
    out = capsys.readouterr().out
    # the profile: each matrix-product kernel with its share of one core's FMA limit
    kernels = [ln for ln in out.splitlines() if "ember_fused_nn_matmul" in ln]
    assert len(kernels) == 3 and all(re.search(r"\d+% FMA", ln) for ln in kernels)
    head, rows = _table(out)
    for name in ("graph1 ms", "aot1 ms", "ort1 ms", "ort1/ember1", "graph2 ms", "ort2/ember2"):
        assert name in head
    # the AOT run timed from C, and what each executor adds to it
    assert {"aotC1 ms", "aotC2 ms", "graph1 ovh us", "aot1 ovh us"} <= set(head)
    assert {"ember1 %FMA", "ort1 %FMA", "ember2 %FMA"} <= set(head)
    used = dict(zip(head, rows[0], strict=True))["ember2 used (graph/aot)"]
    assert re.fullmatch(r"(pool|alone|-)/(pool|alone|-)", used)  # the run governor's choice
    assert [r[0] for r in rows] == ["dense_autoencoder"]
    row = dict(zip(head, rows[0], strict=True))
    assert float(row["ort1/ember1"]) > 0 and float(row["ort2/ember2"]) > 0
    assert float(row["aotC1 ms"]) > 0 and float(row["aotC2 ms"]) > 0
    float(row["graph1 ovh us"])  # a number (its sign is the machine's)
    c1, aot1 = float(row["aotC1 ms"]), float(row["aot1 ms"])  # printed to 1 us
    assert abs(float(row["aot1 ovh us"]) - (aot1 - c1) * 1e3) <= 1.05
    macs = 2 * 640 * 128 + 6 * 128 * 128 + 2 * 128 * 8  # the autoencoder's ten Gemms
    assert float(row["GFLOP"]) == pytest.approx(2 * macs / 1e9, rel=1e-2)
    assert "flop/cycle" in out and "GFLOP/s" in out
    assert "ort1/ember1: geomean" in out and "ort2/ember2: geomean" in out
    assert "noisy" not in out
    if len(os.sched_getaffinity(0)) >= 2:  # the cores' round trip, first and last
        assert len(re.findall(r"CPU round trip \d+ ns", out)) == 2


@pytest.mark.cc
def test_models_benchmark_quantized_prints_int8_next_to_onnxruntime_int8(
    bench, capsys, monkeypatch
):
    monkeypatch.setattr(bench, "INT8_MODELS", {"dense_autoencoder": "dense_autoencoder"})
    argv = ["--models", "dense_autoencoder", "--repeat", "1", "--keep-cache", "--cpu-clock"]
    assert bench.main([*argv, "--quantized", "static"]) == 0
    out = capsys.readouterr().out
    int8 = [line for line in out.splitlines() if "dense_autoencoder | static" in line]
    assert len(int8) == 1
    cells = [c.strip() for c in int8[0].split("|")[1:-1]]
    assert "ort int8 ms" in out and "ember int8 ms" in out
    assert float(cells[5]) > 0 and cells[-1].endswith("%")  # ort/ember int8, agreement


@pytest.mark.cc
def test_models_benchmark_noisy_runs_next_to_one_busy_process_and_stops_it(
    bench, capsys, monkeypatch
):
    children = []
    real = bench.busy_process

    @contextmanager
    def recording(seconds):
        with real(seconds) as child:
            children.append(child)
            yield child

    monkeypatch.setattr(bench, "busy_process", recording)
    argv = ["--models", "resnet8", "--repeat", "1", "--keep-cache", "--noisy"]
    assert bench.main([*argv, "--noisy-seconds", "120"]) == 0
    out = capsys.readouterr().out
    head, rows = _table(out)
    assert head[-1] == "noisy ember2/ember1" and float(rows[0][-1]) > 0
    assert "noisy ember2/ember1 (wall): geomean" in out
    assert len(children) == 1 and children[0].poll() is not None  # stopped at the end


def test_busy_process_is_killed_on_error_and_ends_at_its_bound(bench):
    host = sys.modules["bench_host"]
    with pytest.raises(RuntimeError, match="boom"), host.busy_process(60) as child:
        assert host.busy_alive(child)
        raise RuntimeError("boom")
    assert child.poll() is not None
    with host.busy_process(0.2) as child:
        child.wait(timeout=30)  # its own deadline, not the parent, stopped it
        assert child.returncode == 0 and not host.busy_alive(child)


def test_fma_limit_formula(bench):
    host = sys.modules["bench_host"]
    limit = host.FmaLimit(lanes=8, fma_units=2, ghz=3.0, clock_source="given")
    assert limit.flops_per_cycle == 32 and limit.gflops == pytest.approx(96.0)
    assert "8 lanes x 2 x 2 FMA units (given) x 3.00 GHz (given)" in limit.describe()
    given = host.fma_limit(fma_units=2, ghz=2.5)
    assert given.clock_source == "given" and given.lanes in (4, 8, 16)


def test_fma_units_are_measured(bench):
    """Zen 4 retires one 512-bit FMA a cycle, Zen 5 two: the units come from the host."""
    host = sys.modules["bench_host"]
    limit = host.fma_limit()
    if limit.units_source != "measured":
        pytest.skip("no x86-64 C compiler to measure the FMA rate with")
    assert limit.clock_source == "measured" and 1 <= limit.fma_units <= 4
    narrow = host.measure_fma_rate(4)  # 128-bit FMAs: at least as many a cycle
    assert narrow is not None and narrow / (limit.ghz * 1e9) > 0.6 * limit.fma_units


def test_model_gflop_counts_conv_conv_transpose_and_matmul(bench):
    w = numpy_helper.from_array(np.zeros((4, 3, 3, 3), np.float32), "w")
    wt = numpy_helper.from_array(np.zeros((4, 2, 2, 2), np.float32), "wt")
    m = numpy_helper.from_array(np.zeros((16, 5), np.float32), "m")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),  # 1x4x8x8
        helper.make_node("ConvTranspose", ["c", "wt"], ["t"], strides=[2, 2]),  # 1x2x16x16
        helper.make_node("MatMul", ["t", "m"], ["y"]),  # 1x2x16x5
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[w, wt, m],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    conv = 2 * (4 * 8 * 8) * (3 * 9)
    transpose = 2 * (4 * 8 * 8) * (2 * 4)
    matmul = 2 * (2 * 16 * 5) * 16
    assert bench.model_gflop(model) * 1e9 == pytest.approx(conv + transpose + matmul)
    # per node, named as ember's importer names unnamed nodes (the profile's onnx_nodes)
    flops = bench.node_flops(model)
    assert flops == {"Conv_0": conv, "ConvTranspose_1": transpose, "MatMul_2": matmul}


def test_geomean_and_summary_name_the_extreme_models(bench):
    report = sys.modules["bench_report"]
    assert report.geomean([1.0, 4.0]) == pytest.approx(2.0)

    def row(name, ember, ort):
        times = {}
        for n in (1, 2):
            times[("graph", n)] = times[("aot", n)] = report.Timing(ember * n, ember)
            times[("ort", n)] = report.Timing(ort, ort)
        return report.Row(name, 0.0, 0.0, times, 2, True, 0.0, 1.0)

    rows = [row("fast", 1.0, 2.0), row("slow", 2.0, 1.0)]
    text = report.summary(rows, noisy=True)
    assert "ort1/ember1: geomean 1.00 over 2 models, lowest 0.50 (slow)" in text
    assert "noisy ember2/ember1 (wall): geomean 2.00, highest 2.00" in text


def test_rotated_medians_let_every_function_follow_every_other_alike(bench):
    """The extra targets' run (compare_targets): in each round the order rotates, so no
    back end always comes right after the same one (that position alone read 1.3-1.45x)."""
    common = sys.modules["bench_common"]
    calls: list[str] = []
    fns = [lambda name=name: calls.append(name) for name in "abc"]
    ticks = iter(range(10_000))
    medians = common.rotated_medians(fns, repeat=6, clock=lambda: float(next(ticks)), warmup=0)
    assert medians == [1.0, 1.0, 1.0]
    follows = {(calls[k], calls[k + 1]) for k in range(len(calls) - 1)}
    assert {("a", "b"), ("b", "c"), ("c", "a")} <= follows
    assert [calls[3 * r] for r in range(6)] == list("abcabc")


@pytest.mark.cc
def test_models_benchmark_times_further_targets_against_the_first_in_their_own_run(
    bench, capsys, monkeypatch
):
    runs: list[int] = []
    real = sys.modules["bench_common"].rotated_medians

    def spy(fns, repeat, clock, warmup=2):
        runs.append(len(fns))
        return real(fns, repeat, clock, warmup)

    monkeypatch.setattr(bench, "rotated_medians", spy)
    argv = ["--models", "dense_autoencoder", "--repeat", "2", "--keep-cache", "--targets", "c,c"]
    assert bench.main(argv) == 0
    head, rows = _table(capsys.readouterr().out)
    row = dict(zip(head, rows[0], strict=True))
    assert runs == [2]  # the first target's graph executor and the further one, together
    assert float(row["c ms"]) > 0 and float(row["c/c"]) > 0


def test_main_run_rotates_its_order_every_round(bench):
    calls: list[str] = []
    entries = [((lambda: None), (lambda name=name: calls.append(name))) for name in "abc"]
    timings = bench.interleaved_timings(entries, repeat=3, warmup=0, settle=False)
    assert len(timings) == 3
    assert calls == list("abcbcacab")


def test_main_run_times_each_call_right_after_a_call_of_the_same_entry(bench, monkeypatch):
    """A rotated order keeps every entry's predecessor (b always follows a); the settling
    call makes the entry itself the predecessor of every timed call."""
    calls: list[str] = []
    before_clock: list[str] = []
    real = bench.time.perf_counter

    def clock() -> float:
        before_clock.append(calls[-1])  # what ran just before the clock was read
        return real()

    entries = [((lambda: None), (lambda name=name: calls.append(name))) for name in "abc"]
    monkeypatch.setattr(bench.time, "perf_counter", clock)
    bench.interleaved_timings(entries, repeat=3, warmup=0)
    assert calls == [n for n in "abcbcacab" for _ in range(2)]  # settling call, timed call
    # the clock is read before and after each timed call: after the settling call of the
    # same entry, then after the timed call itself
    assert before_clock == [n for n in "abcbcacab" for _ in range(2)]


def test_main_run_settles_for_settle_s_before_each_timed_call(bench, monkeypatch):
    """With settle_s the untimed calls before a timed one go on until that much time has
    passed (the spinning-onnxruntime pass: its threads spin ~30 ms after a run)."""
    calls: list[str] = []
    now = [0.0]

    def clock() -> float:
        now[0] += 0.01  # every reading 10 ms later
        return now[0]

    monkeypatch.setattr(bench.time, "perf_counter", clock)
    entries = [((lambda: None), (lambda name=name: calls.append(name))) for name in "ab"]
    bench.interleaved_timings(entries, repeat=1, warmup=0, settle_s=0.035)
    # per entry: the deadline read at 10 ms (until 45), a call, readings at 20, 30, 40 ms
    # each followed by a call, 50 ms ends the settling; then the timed call
    assert calls == list("aaaaa") + list("bbbbb")


def test_report_has_the_spinning_onnxruntime_pass(bench):
    """ort2spin is timed against ember's AOT run in a pass of their own; rows without it
    print '-'."""
    timing = bench.Timing(1e-3, 1e-3)
    times = {(e, n): timing for e in ("graph", "aot", "ort") for n in (1, 2)}
    spun = {**times, ("aots", 2): bench.Timing(1e-3, 1e-3), ("orts", 2): bench.Timing(2e-3, 2e-3)}
    row = bench.Row("m", 0.0, 0.0, spun, 2, False, 0.0, 1.0)
    assert row.spinning() == ["1.000", "2.000", "2.00"]
    assert bench.Row("m", 0.0, 0.0, times, 2, False, 0.0, 1.0).spinning() == ["-", "-", "-"]
    assert "ort2spin/aot2" in bench.summary([row], noisy=False)


def test_main_run_takes_the_time_an_entry_measured_itself(bench):
    """A run timed from C returns its Timing; that, not Python's reading, is its time."""
    timed = bench.Timing(1e-6, 2e-6)
    entries = [((lambda: None), (lambda: timed)), ((lambda: None), (lambda: None))]
    first, second = bench.interleaved_timings(entries, repeat=3, warmup=0)
    assert first == timed and second != timed


def test_main_run_times_calls_after_a_pause_instead_of_a_settling_call(bench, monkeypatch):
    calls: list[str] = []
    pauses: list[float] = []
    monkeypatch.setattr(bench.time, "sleep", pauses.append)
    entries = [((lambda: None), (lambda name=name: calls.append(name))) for name in "ab"]
    bench.interleaved_timings(entries, repeat=2, warmup=0, pause_s=0.005)
    assert calls == list("abba") and pauses == [0.005] * 4  # no settling call
