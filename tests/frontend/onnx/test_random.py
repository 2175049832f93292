"""Import of the random family (RandomUniform/Normal(/Like), Bernoulli, Multinomial) and of
training-mode Dropout: onnx's reference numbers, run-time ``ratio``/``training_mode``,
seeds (given, derived from the build, out of range), no constant folding of generators,
deterministic artifacts; and the check behind the Bernoulli conformance cases' claim."""

from __future__ import annotations

import re
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from ember.errors import FrontendError
from ember.frontend import from_onnx
from ember.ir import Call, post_order
from ember.testing import build_model, run_onnx_compiled
from ember.testing.onnx_models import node
from ember.testing.runners import compile_onnx, run_onnx_reference
from ember.transform import optimize

sys.path.append(str(Path(__file__).resolve().parents[3] / "benchmarks"))
import conformance_cases as cc  # noqa: E402

X = np.random.default_rng(0).standard_normal((3, 4, 5)).astype(np.float32)


def _dropout_model(outputs: tuple[str, ...] = ("y", "z"), seed: int | None = 0):
    attrs = {} if seed is None else {"seed": seed}
    drop = helper.make_node("Dropout", ["x", "r", "t"], list(outputs), name="drop", **attrs)
    inputs = {"x": ("float32", (3, 4, 5)), "r": ("float32", ()), "t": ("bool", ())}
    return build_model([drop], inputs, list(outputs), opset=13)


def _numpy_dropout(x: np.ndarray, ratio: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    mask = np.random.RandomState(seed).uniform(0, 1.0, x.shape) >= np.float32(ratio)
    return mask * x * (1 / (1 - np.float32(ratio))), mask


@pytest.mark.cc
def test_dropout_ratio_and_training_mode_fed_at_run_time() -> None:
    model = _dropout_model()
    for ratio, training in [(0.75, True), (0.5, True), (0.75, False), (0.0, True)]:
        feeds = {"x": X, "r": np.float32(ratio), "t": np.bool_(training)}
        y, z = run_onnx_compiled(model, feeds)
        if training and ratio:
            want_y, want_z = _numpy_dropout(X, ratio)
        else:
            want_y, want_z = X, np.ones(X.shape, bool)
        assert z.dtype == np.bool_ and np.array_equal(z, want_z), (ratio, training)
        assert y.tobytes() == want_y.astype(np.float32).tobytes(), (ratio, training)


def test_dropout_with_constant_inputs_keeps_its_generator_out_of_folding() -> None:
    drop = helper.make_node("Dropout", ["x", "r", "t"], ["y"], seed=3)
    inits = {"r": np.float32(0.25), "t": np.bool_(True)}
    model = build_model([drop], {"x": ("float32", (3, 4, 5))}, ["y"], inits, opset=13)
    mod, params = from_onnx(model)
    mod = optimize(mod, params)
    ops = {n.op.name for n in post_order(mod["main"].body) if isinstance(n, Call)}
    assert "random.uniform" in ops
    (y,) = run_onnx_reference(model, {"x": X})
    assert y.tobytes() == _numpy_dropout(X, 0.25, seed=3)[0].tobytes()


def test_dropout_constant_inference_inputs_stay_an_identity() -> None:
    drop = helper.make_node("Dropout", ["x", "r", "t"], ["y", "z"], seed=0)
    inits = {"r": np.float32(0.5), "t": np.bool_(False)}
    model = build_model([drop], {"x": ("float32", (3, 4, 5))}, ["y", "z"], inits, opset=13)
    mod, _ = from_onnx(model)
    assert "random" not in str(mod)


def test_random_ops_give_onnx_reference_numbers() -> None:
    # onnx's own reference implementation seeds numpy's RandomState(seed) per call too
    nodes = [
        node("RandomUniform", [], "u", shape=[4, 6], seed=7.0, low=-1.0, high=2.0),
        node("RandomNormal", [], "n", shape=[5, 3], seed=8.0, mean=2.0, scale=3.0, dtype=11),
        node("RandomUniformLike", ["x"], "ul", seed=9.0),
        node("RandomNormalLike", ["x"], "nl", seed=10.0, dtype=11),
        node("Bernoulli", ["p"], "b", seed=11.0),
    ]
    p = np.random.default_rng(3).random((2, 9))
    feeds = {"x": X, "p": p}
    model = build_model(nodes, {"x": X, "p": p}, ["u", "n", "ul", "nl", "b"], opset=15)
    want = ReferenceEvaluator(model).run(None, feeds)
    got = run_onnx_reference(model, feeds)
    for g, w in zip(got[1:], want[1:], strict=True):  # float64, or float32 of low 0, high 1
        assert g.dtype == w.dtype and g.tobytes() == w.tobytes()
    # float32 with low/high: onnx's reference rounds u to float32, then scales and shifts
    # it in float32 (three roundings, each at most half an ulp of a value within the range
    # 3); ember rounds numpy's double low + (high - low) * u once
    exact = np.random.RandomState(7).uniform(-1.0, 2.0, (4, 6)).astype(np.float32)
    assert got[0].dtype == np.float32 and got[0].tobytes() == exact.tobytes()
    assert np.max(np.abs(got[0] - want[0])) <= 3 * 3.0 * np.finfo(np.float32).eps / 2


def test_like_ops_and_bernoulli_take_the_input_dtype_multinomial_int32() -> None:
    nodes = [
        node("RandomUniformLike", ["x"], "ul", seed=1.0),
        node("Bernoulli", ["x"], "b", seed=2.0),
        node("Bernoulli", ["x"], "bi", seed=2.0, dtype=7),
        node("Multinomial", ["m"], "mu", seed=3.0, sample_size=4),
    ]
    x = np.full((2, 3), 0.5, np.float32)
    model = build_model(nodes, {"x": x, "m": x}, ["ul", "b", "bi", "mu"], opset=15)
    ul, b, bi, mu = run_onnx_reference(model, {"x": x, "m": x})
    assert (ul.dtype, b.dtype, bi.dtype, mu.dtype) == (np.float32, np.float32, np.int64, np.int32)
    assert ul.shape == b.shape == (2, 3) and mu.shape == (2, 4)
    assert np.array_equal(b, bi)


def test_an_unseeded_node_gets_a_seed_from_its_output_name() -> None:
    model = build_model([node("RandomUniform", [], "out", shape=[8])], {}, ["out"])
    (got,) = run_onnx_reference(model, {})
    seed = zlib.crc32(b"RandomUniform:out")
    assert got.tobytes() == np.random.RandomState(seed).uniform(size=8).astype("f4").tobytes()


@pytest.mark.cc
def test_two_builds_give_byte_identical_artifacts() -> None:
    nodes = [node("RandomNormal", [], "n", shape=[16]), node("Bernoulli", ["p"], "b")]
    model = build_model(nodes, {"p": ("float32", (16,))}, ["n", "b"], opset=15)
    first, second = compile_onnx(model), compile_onnx(model)
    assert [(a.file_name, a.content) for a in first] == [(a.file_name, a.content) for a in second]


@pytest.mark.parametrize("seed", [-1.0, 2.0**32, float("nan")])
def test_a_seed_numpy_cannot_take_is_an_import_error(seed: float) -> None:
    model = build_model([node("RandomUniform", [], "y", shape=[2], seed=seed)], {}, ["y"])
    with pytest.raises(FrontendError, match="seeds 0..4294967295"):
        from_onnx(model)


def test_the_bernoulli_cases_draw_input_and_output_from_one_numpy_stream() -> None:
    # onnx's generator: np.random.seed(0); x = uniform(size=10); y = binomial(1, x), both
    # from the global stream, so y follows the 20 words x used and no seed attribute (the
    # node's, 0, in test_bernoulli_seed) reproduces it: the cases cannot pass by design.
    for case in cc.select_cases(["Bernoulli"]):
        ((inputs, outputs),) = case.data_sets
        x, y = np.asarray(inputs[0]), np.asarray(outputs[0])
        np.random.seed(0)
        again = np.random.uniform(0.0, 1.0, 10).astype(x.dtype)
        assert np.array_equal(again, x)
        assert np.array_equal(np.random.binomial(1, p=again), y)
        drawn = np.random.RandomState(0).binomial(1, x.astype(np.float64))
        assert not np.array_equal(drawn, y), case.name
        assert cc.exclusion_reason(case.name) is not None, case.name


@pytest.mark.cc
def test_the_example_of_docs_random_md_runs() -> None:
    doc = Path(__file__).resolve().parents[3] / "docs" / "random.md"
    (block,) = re.findall(r"```python\n(.*?)```", doc.read_text(), flags=re.S)
    out = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("numpy-identical: ember (2, 3)")
