"""The official ONNX node test cases of the issue's ops, compiled for C and run.

Every case that passes through importer + reference evaluator must also pass compiled
(build for the C target, load the artifacts, run the graph executor), except the cases in
``KNOWN_FAILURES`` (each with its reason; they must still fail, so the list stays honest)
and ``TOOLCHAIN_FAILURES`` (failing with some C compilers only). The fast tier compiles a
few cases per op family, the worker and batch machinery, and reproduces failures found
below the op computes; the slow tier sweeps every case of every issue op, one test per op
so a red op is visible by name.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

_RUNNER = Path(__file__).resolve().parents[2] / "benchmarks" / "onnx_conformance.py"


def _load_runner() -> ModuleType:
    name = "ember_onnx_conformance"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, _RUNNER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


oc = _load_runner()

#: cases that pass in reference mode but not compiled, with the reason (case -> reason);
#: none now (the float16/bfloat16 ones pass since the C back end stores half types).
KNOWN_FAILURES: dict[str, str] = {}

#: cases that fail with some C compilers only (tolerated, not required to fail); none now.
#: (test_lrn was one between commits 8052974 and e7a64f1: see test_power_one_half_compiles.)
TOOLCHAIN_FAILURES: dict[str, str] = {}

#: a few cases per op family, compiled by the fast tier (names of onnx node test cases).
FAST_CASES: tuple[str, ...] = (
    # elementwise math, activations, comparisons and logic
    "test_add_bcast",
    "test_pow_bcast_array",
    "test_sqrt_example",
    "test_relu",
    "test_leakyrelu_default_expanded",
    "test_gelu_default_2",
    "test_clip_default_int8_inbounds",
    "test_where_long_example",
    "test_less_bcast",
    "test_or_bcast3v1d",
    "test_sum_example",
    "test_cast_DOUBLE_to_FLOAT",
    # nn: convolutions, dense, pools, norms, softmax, recurrent
    "test_conv_with_strides_and_asymmetric_padding",
    "test_convtranspose_1d",
    "test_gemm_all_attributes",
    "test_matmul_3d",
    "test_maxpool_2d_ceil",
    "test_averagepool_2d_ceil_last_window_starts_on_pad",
    "test_batchnorm_example",
    "test_layer_normalization_2d_axis1",
    "test_lrn",
    "test_softmax_axis_0_expanded",
    "test_logsoftmax_axis_1",
    "test_gru_defaults",
    "test_lstm_defaults",
    # reductions, arg and topk
    "test_reduce_mean_do_not_keepdims_random",
    "test_reduce_log_sum_exp_default_axes_keepdims_random_expanded",
    "test_argmax_default_axis_example_select_last_index",
    "test_top_k_same_values_2d",
    # tensor: layout, indexing and shape ops
    "test_transpose_all_permutations_3",
    "test_concat_2d_axis_1",
    "test_split_2d_uneven_split_opset18",
    "test_slice_default_steps",
    "test_reshape_negative_dim",
    "test_gather_negative_indices",
    "test_gather_elements_1",
    "test_constant_pad_axes",
    "test_tile_precomputed",
    "test_depthtospace_crd_mode_example",
    "test_tril_neg",
    "test_resize_downsample_scales_cubic",
    "test_einsum_batch_matmul",
    "test_shape_clip_end",
    "test_constantofshape_int_zeros",
    "test_range_int32_type_negative_delta",
)


def _by_name() -> dict[str, Any]:
    return {c.name: c for c in oc.collect_cases()}


def test_known_failures_and_fast_cases_are_real_issue_cases():
    issue = {c.name for c in oc.select_cases(oc.ISSUE_OPS)}
    assert set(KNOWN_FAILURES) <= issue, sorted(set(KNOWN_FAILURES) - issue)
    assert set(TOOLCHAIN_FAILURES) <= issue, sorted(set(TOOLCHAIN_FAILURES) - issue)
    assert not set(FAST_CASES) & (set(KNOWN_FAILURES) | set(TOOLCHAIN_FAILURES))
    assert set(FAST_CASES) <= issue, sorted(set(FAST_CASES) - issue)
    assert all(KNOWN_FAILURES.values())
    ops = {c.op for c in oc.select_cases(oc.ISSUE_OPS) if c.name in FAST_CASES}
    assert len(ops) >= 40, "the fast tier should span the op families"


@pytest.mark.cc
@pytest.mark.parametrize("name", FAST_CASES)
def test_fast_case_compiles_and_matches(name):
    case = _by_name()[name]
    result = oc.run_case(case, oc.run_compiled)
    assert result.status == "pass", f"{name} [{result.status}] {result.detail}"


@pytest.mark.cc
@pytest.mark.slow
@pytest.mark.parametrize("op", oc.ISSUE_OPS)
def test_issue_op_cases_pass_compiled(op):
    cases = oc.select_cases([op])
    assert cases, f"onnx ships no node test case for {op}"
    reference = {r.case: r for r in oc.run(cases, "reference")}
    compiled = oc.run(cases, "compiled", batch=oc.DEFAULT_BATCH)
    regressions = [
        f"{r.case} [{r.status}] {r.detail}"
        for r in compiled
        if reference[r.case].status == "pass"
        and r.status != "pass"
        and r.case not in KNOWN_FAILURES
        and r.case not in TOOLCHAIN_FAILURES
    ]
    assert not regressions, (
        f"{len(regressions)} {op} cases pass in reference mode but not compiled:\n"
        + "\n".join(regressions)
    )
    fixed = [r.case for r in compiled if r.case in KNOWN_FAILURES and r.status == "pass"]
    assert not fixed, f"known failures that now pass; remove them from KNOWN_FAILURES: {fixed}"


@pytest.mark.cc
@pytest.mark.slow
@pytest.mark.parametrize("suite", oc.MODEL_SUITES)
def test_shipped_model_suites_pass_compiled(suite):
    # PyTorch-exported models and small model tests onnx ships with their data.
    cases = oc.collect_model_cases(suite)
    reference = {r.case: r for r in oc.run(cases, "reference")}
    compiled = oc.run(cases, "compiled")
    bad = [
        f"{r.case} [{r.status}] {r.detail}"
        for r in compiled
        if reference[r.case].status == "pass" and r.status != "pass"
    ]
    assert not bad, f"{len(bad)} {suite} cases pass in reference mode but not compiled:\n" + (
        "\n".join(bad)
    )


def test_workers_give_the_in_process_results(monkeypatch):
    # Two workers, reference mode (cheap): the same results in the order of the cases;
    # excluded cases (training Dropout, excluded here) are settled in this process,
    # sequence values (Identity of a sequence) stored for the workers.
    monkeypatch.setitem(oc.EXCLUDED, "test_training_dropout", "excluded for this test")
    cases = oc.select_cases(["Relu", "Size", "Identity"])
    cases += [c for c in oc.select_cases(["Dropout"]) if c.name == "test_training_dropout"]
    seen: list[tuple[int, int]] = []
    got = oc.run(cases, "reference", jobs=2, batch=2, progress=lambda *a: seen.append(a))
    want = oc.run(cases, "reference")
    assert seen[-1] == (len(cases), len(cases))
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)
    assert [(r.case, r.status, r.detail) for r in got] == [
        (r.case, r.status, r.detail) for r in want
    ]
    assert {r.status for r in got} == {"pass", "excluded"}


def test_sweep_target_reaches_the_workers(capsys):
    # --target is passed to the worker processes through the environment: an unknown
    # target fails every case there, llvmjit passes them (no C compiler for the kernels)
    argv = ["--ops", "Equal", "-k", "string", "--mode", "compiled", "-j", "1"]
    try:
        assert oc.main([*argv, "--target", "no-such-target"]) != 0
        assert "compiled: 0/2 passed" in capsys.readouterr().out
        assert oc.main([*argv, "--target", "llvmjit"]) == 0
        assert "compiled: 2/2 passed" in capsys.readouterr().out
    finally:
        os.environ.pop(oc.TARGET_ENV, None)


def test_a_case_that_outlives_its_timeout_is_an_error_row():
    # The batch of two is killed, then each case runs alone in a fresh worker (and is
    # killed again): every row names the case's own time limit.
    cases = oc.select_cases(["Relu"])
    results = oc.run_in_workers(cases, "reference", jobs=1, batch=2, timeout=0.05)
    assert [r.case for r in results] == [c.name for c in cases]
    for r in results:
        assert r.status == "error" and r.detail == "worker timed out after 0.05 s"


def test_a_worker_that_dies_is_reported_with_its_signal(tmp_path):
    (case,) = [c for c in oc.select_cases(["Relu"]) if c.name == "test_relu"]
    assert oc.write_case(case, tmp_path / "case")
    worker = oc._Worker("compiled", dict(os.environ))
    worker.argv = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"]
    results, why = worker.run([(case, tmp_path / "case")], timeout=60)
    assert results == [] and why == "worker crashed (SIGSEGV)"
    assert worker.proc is None  # the next batch starts a fresh worker


def test_a_worker_answers_in_the_order_asked_even_when_a_case_is_unreadable(tmp_path):
    relu, relu_expanded = oc.select_cases(["Relu"])
    assert oc.write_case(relu_expanded, tmp_path / "good")
    worker = oc._Worker("reference", dict(os.environ))
    try:
        stored = [(relu, tmp_path / "missing"), (relu_expanded, tmp_path / "good")]
        results, why = worker.run(stored, timeout=120)
    finally:
        worker.close()
    assert why == ""
    assert [(r.case, r.status) for r in results] == [
        (relu.name, "error"),
        (relu_expanded.name, "pass"),
    ]
    assert results[0].detail.startswith("cannot read the case")


def test_batches_group_cases_of_one_op():
    cases = oc.select_cases(["Relu", "Add"])  # sorted by name: add*, relu*
    groups = oc.batches(cases, 3)
    assert sorted(i for g in groups for i in g) == list(range(len(cases)))
    for group in groups:
        assert len(group) <= 3 and len({cases[i].op for i in group}) == 1
    assert [len(g) for g in groups] == [3, 3, 2, 2]
    assert oc.batches(cases, 1) == [[i] for i in range(len(cases))]


@pytest.mark.cc
def test_cases_merged_into_one_module_give_their_own_outputs():
    names = ["test_top_k", "test_add_bcast", "test_identity", "test_shape", "test_lstm_defaults"]
    cases = [_by_name()[n] for n in names]
    parts = [oc._import_alone(c) for c in cases]
    assert all(p is not None for p in parts)
    outputs = oc.run_merged(parts)
    assert [len(o) for o in outputs] == [len(c.data_sets[0][1]) for c in cases]
    for case, part, got in zip(cases, parts, outputs, strict=True):
        assert oc.compare(got, part.expected, case) == "", case.name


@pytest.mark.cc
def test_a_batch_reports_what_each_case_gives_alone(monkeypatch):
    # A case that breaks the merged build (float16/float8 casts under the llvm back ends,
    # which refuse them; the C back end compiles them) makes every case run alone and be
    # reported with its own status and message.
    names = [
        "test_cast_DOUBLE_to_FLOAT",
        "test_cast_FLOAT_to_FLOAT16",
        "test_cast_FLOAT_to_DOUBLE",
        "test_cast_FLOAT_to_FLOAT8E4M3FN",
        "test_training_dropout",  # excluded here
    ]
    monkeypatch.setitem(oc.EXCLUDED, "test_training_dropout", "excluded for this test")
    cases = [_by_name()[n] for n in names]
    batched = oc.run_batch(cases, "compiled")
    alone = [oc.run_case(c, oc.run_compiled) for c in cases]
    assert [(r.case, r.status, r.detail) for r in batched] == [
        (r.case, r.status, r.detail) for r in alone
    ]
    statuses = [r.status for r in batched]
    assert statuses[0] == statuses[2] == "pass" and statuses[4] == "excluded"
    assert statuses[1] == statuses[3] and statuses[1] in ("pass", "error")


@pytest.mark.parametrize("name", ["test_cast_BFLOAT16_to_FLOAT", "test_cast_FLOAT_to_FLOAT16"])
def test_cases_reach_workers_bit_exact(tmp_path, name):
    # Workers read cases in onnx's backend test layout; half types survive the round trip.
    case = _by_name()[name]
    assert oc.write_case(case, tmp_path / "case")
    back = oc.read_case(tmp_path / "case", case.name, case.op, case.rtol, case.atol)
    assert (back.name, back.op, back.rtol, back.atol) == (name, case.op, case.rtol, case.atol)
    assert back.model.SerializeToString() == case.model.SerializeToString()
    assert len(back.data_sets) == len(case.data_sets)
    for (ins, outs), (ins2, outs2) in zip(case.data_sets, back.data_sets, strict=True):
        for want, got in zip([*ins, *outs], [*ins2, *outs2], strict=True):
            want = np.asarray(oc._as_array(want))
            assert got.dtype == want.dtype and got.shape == want.shape
            assert got.tobytes() == want.tobytes()


@pytest.mark.cc
def test_both_modes_side_by_side(capsys):
    code = oc.main(["--mode", "both", "--ops", "Relu,Size", "--jobs", "0", "-v"])
    out = capsys.readouterr().out
    assert code == 0
    assert "reference" in out and "compiled" in out
    assert "overall compiled:  4/4 passed" in out
    assert "compiled passes 4 of the 4 cases reference passes" in out


def test_an_op_without_compute_counts_as_unsupported_not_as_a_crash():
    from ember.errors import CompileError, OpNotSupportedError

    (case,) = [c for c in oc.select_cases(["Relu"]) if c.name == "test_relu"]

    def no_compute(model, inputs):
        raise OpNotSupportedError(
            "1 op(s) of model 'm' have no code generator implementation yet:\n"
            "  relu: nodes test\nRegister one with ember.ops.register_compute."
        )

    def codegen_fails(model, inputs):
        raise CompileError("C codegen of 'ember_relu': something\nmore")

    unsupported = oc.run_case(case, no_compute)
    assert (unsupported.status, unsupported.detail) == ("unsupported", "relu: nodes test")
    crashed = oc.run_case(case, codegen_fails)
    assert (crashed.status, crashed.detail) == (
        "error",
        "CompileError: C codegen of 'ember_relu': something",
    )


def test_the_comparison_splits_unsupported_wrong_and_crashed():
    R = oc.Result
    reference = [R("a", "Conv", "pass"), R("b", "Conv", "pass"), R("c", "Conv", "pass")]
    compiled = [
        R("a", "Conv", "unsupported", "nn.conv2d: nodes conv"),
        R("b", "Conv", "fail", "output 0: max abs error 1"),
        R("c", "Conv", "error", "CompileError: boom"),
    ]
    table = oc.format_comparison(reference, compiled, verbose=True)
    row = next(line for line in table.splitlines() if line.startswith("Conv"))
    assert row.split() == ["Conv", "3", "3/3", "0/3", "1", "1", "1", "0.0%"]
    assert "compiled passes 0 of the 3 cases reference passes" in table
    assert "  b [fail] output 0: max abs error 1" in table


# -- failures the sweep found below the op computes (regressions, or xfail reproductions) --


@pytest.mark.cc
def test_power_one_half_compiles():
    # Regression: Pow(x, 0.5) (LRN's default beta, and exported models) is powf(x, 0.5f) in
    # an omp simd loop. With powf declared 'omp declare simd' for libmvec (8052974) and
    # errno-setting math, gcc 12.2 died with an internal compiler error (segfault in the
    # cunroll/fre/cddce passes) and test_lrn failed; compiling with -fno-math-errno
    # (e7a64f1) avoids it. Found by the compiled conformance sweep.
    import ember
    from ember.ir import Function, IRModule, TensorType, Var, call, const

    x = Var("x", TensorType((64,), "float32"))
    mod = IRModule.from_expr(Function((x,), call("power", x, const(np.float32(0.5)))))
    artifacts = ember.build(mod, target="c")
    xs = np.linspace(0.0, 4.0, 64, dtype=np.float32)
    dev = ember.cpu(0)
    executor = ember.GraphExecutor(ember.load_artifacts(artifacts, dev)["default"](dev))
    executor.set_input("x", xs)
    executor.run()
    np.testing.assert_allclose(executor.get_output(0).numpy(), np.sqrt(xs), rtol=1e-6)
