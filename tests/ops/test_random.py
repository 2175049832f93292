"""The seeded random kernels (ember/codegen/c/random.py) against numpy's legacy
``RandomState(seed)``, bit for bit: several seeds (0, 1, 2**32 - 256, ...) and sizes (one
element, odd counts that leave a cached normal unused, more than the 624 words of one
MT19937 refill), compiled for the C target, and for the llvm kinds (the runtime library's copy)."""

from __future__ import annotations

import shutil
import subprocess
import tarfile
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

import ember
from ember.ir.op import Attrs
from ember.ir.ops.random import multinomial_ref
from ember.testing import build_model, run_onnx_compiled
from ember.testing.onnx_models import node
from ember.tools.mlf import TestVectors

pytestmark = pytest.mark.cc

SEEDS = (0, 1, 5489, 20261120, 2**32 - 256)  # ONNX seeds are float32
SHAPES = ((1,), (7,), (3, 5), (1000,), (33, 41))


def _fills(op: str, dtype: int, **attrs: float) -> tuple[list, list[str], list[tuple]]:
    nodes, names, cases = [], [], []
    for seed in SEEDS:
        for shape in SHAPES:
            name = f"y{len(names)}"
            nodes.append(
                node(op, [], name, shape=list(shape), seed=float(seed), dtype=dtype, **attrs)
            )
            names.append(name)
            cases.append((seed, shape))
    return nodes, names, cases


def _run(nodes: list, names: list[str], inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    model = build_model(nodes, {k: (v.dtype.name, v.shape) for k, v in inputs.items()}, names)
    return run_onnx_compiled(model, inputs)


def test_uniform_is_numpy_random_state_bit_for_bit() -> None:
    nodes, names, cases = _fills("RandomUniform", 11, low=-2.5, high=3.0)  # DOUBLE
    got = _run(nodes, names, {})
    for (seed, shape), y in zip(cases, got, strict=True):
        want = np.random.RandomState(seed).uniform(-2.5, 3.0, shape)
        assert y.dtype == np.float64 and y.shape == shape
        assert y.tobytes() == want.tobytes(), (seed, shape)


def test_normal_is_numpy_random_state_bit_for_bit() -> None:
    # the polar method keeps each pair's second value: odd sizes end with one unused
    nodes, names, cases = _fills("RandomNormal", 11, mean=1.5, scale=0.25)
    got = _run(nodes, names, {})
    for (seed, shape), y in zip(cases, got, strict=True):
        want = np.random.RandomState(seed).normal(1.5, 0.25, shape)
        assert y.tobytes() == want.tobytes(), (seed, shape)


def test_float32_outputs_are_numpy_doubles_rounded_once() -> None:
    # The kernel computes in double and casts once, as RandomState(...).astype(float32).
    nodes = [
        node("RandomUniform", [], "u", shape=[257], seed=3.0),
        node("RandomNormal", [], "n", shape=[257], seed=4.0),
    ]
    u, n = _run(nodes, ["u", "n"], {})
    assert u.tobytes() == np.random.RandomState(3).uniform(0, 1, 257).astype("f4").tobytes()
    assert n.tobytes() == np.random.RandomState(4).normal(0, 1, 257).astype("f4").tobytes()


def test_bernoulli_is_numpy_binomial_bit_for_bit() -> None:
    # p = 0, 1 and 0.5 exactly, both sides of 0.5 (numpy inverts 1 - p above it)
    p = np.random.default_rng(1).random(997)
    p[:4] = [0.0, 1.0, 0.5, 0.9999]
    nodes = [node("Bernoulli", ["p"], f"y{s}", seed=float(s), dtype=11) for s in SEEDS]
    got = _run(nodes, [f"y{s}" for s in SEEDS], {"p": p})
    for seed, y in zip(SEEDS, got, strict=True):
        want = np.random.RandomState(seed).binomial(1, p).astype(np.float64)
        assert y.tobytes() == want.tobytes(), seed


def test_bernoulli_rejects_probabilities_outside_0_1_at_run_time() -> None:
    model = build_model([node("Bernoulli", ["p"], "y", seed=0.0)], {"p": ("float64", (3,))}, ["y"])
    p = np.array([0.2, 1.5, 0.1])
    with pytest.raises(Exception, match="ember_rng_bernoulli"):
        run_onnx_compiled(model, {"p": p})
    with pytest.raises(ValueError):  # numpy refuses it too
        np.random.RandomState(0).binomial(1, p)


def test_multinomial_matches_its_numpy_reference() -> None:
    x = np.log(np.random.default_rng(2).random((5, 9)) + 0.01)
    x[1, 3] = -np.inf  # a class that is never drawn
    nodes = [
        node("Multinomial", ["x"], f"y{s}", seed=float(s), sample_size=37, dtype=7) for s in SEEDS
    ]
    got = _run(nodes, [f"y{s}" for s in SEEDS], {"x": x})
    for seed, y in zip(SEEDS, got, strict=True):
        want = multinomial_ref([x], Attrs({"seed": seed, "sample_size": 37}))
        assert y.dtype == np.int64 and np.array_equal(y, want), seed
        assert not np.any(y[1] == 3)


def test_multinomial_reference_is_random_state_choice_per_row() -> None:
    # rows draw from one stream in order: row b is choice(classes, S, p=softmax) after the
    # earlier rows' samples
    x = np.log(np.array([[0.2, 0.3, 0.5], [0.5, 0.25, 0.25]]))
    got = multinomial_ref([x], Attrs({"seed": 9, "sample_size": 50}))
    state = np.random.RandomState(9)
    for row, probs in zip(got, np.exp(x), strict=True):
        assert np.array_equal(row, state.choice(3, 50, p=probs / probs.sum()))


@pytest.mark.parametrize("kind", ["llvm", "llvmjit"])
def test_llvm_kinds_call_the_runtime_kernels_bit_for_bit(kind: str) -> None:
    nodes = [
        node("RandomUniform", [], "u", shape=[7, 5], seed=3.0, dtype=11),
        node("RandomNormal", [], "g", shape=[9], seed=20261120.0, dtype=11),
        node("Bernoulli", ["p"], "b", seed=1.0, dtype=11),
    ]
    p = np.linspace(0.0, 1.0, 11)
    model = build_model(nodes, {"p": ("float64", p.shape)}, ["u", "g", "b"])
    u, g, b = run_onnx_compiled(model, {"p": p}, target=kind)
    assert u.tobytes() == np.random.RandomState(3).uniform(0.0, 1.0, (7, 5)).tobytes()
    assert g.tobytes() == np.random.RandomState(20261120).normal(0.0, 1.0, 9).tobytes()
    assert b.tobytes() == np.random.RandomState(1).binomial(1, p).astype(np.float64).tobytes()


def _standalone(tmp_path: Path, target: str, tolerance: float) -> Path:
    """A Model Library Format program of Dropout, RandomNormal, Bernoulli, Multinomial
    whose test vectors are numpy's numbers, unpacked in ``tmp_path``."""
    p = np.random.default_rng(4).random((4, 6))
    x = np.random.default_rng(5).standard_normal((4, 6)).astype(np.float32)
    nodes = [
        helper.make_node("Dropout", ["x", "r", "t"], ["y", "z"], seed=2),
        node("RandomNormal", [], "n", shape=[5, 7], seed=6.0, dtype=11),
        node("Bernoulli", ["p"], "b", seed=7.0),
        node("Multinomial", ["p"], "m", seed=8.0, sample_size=5, dtype=7),
    ]
    inputs = {"x": x, "r": np.float32(0.75), "t": np.bool_(True), "p": p}
    specs = {k: (v.dtype.name, v.shape) for k, v in inputs.items()}
    model = build_model(nodes, specs, ["y", "z", "n", "b", "m"], opset=15)
    keep = np.random.RandomState(2).uniform(0, 1.0, x.shape) >= np.float32(0.75)
    want = [
        keep * x * (1 / (1 - np.float32(0.75))),
        keep,
        np.random.RandomState(6).normal(0, 1, (5, 7)),
        np.random.RandomState(7).binomial(1, p).astype(np.float64),
        multinomial_ref([p], Attrs({"seed": 8, "sample_size": 5})).astype(np.int32),
    ]
    mod, params = ember.frontend.from_onnx(model)
    lowered = ember.lower(mod, target, params, executor="aot -interface-api=c", mod_name="rng")
    vectors = TestVectors(inputs, want, rtol=tolerance, atol=tolerance)
    path = ember.export_model_library_format(lowered, tmp_path / "rng.tar", test_vectors=vectors)
    with tarfile.open(path) as tar:
        tar.extractall(tmp_path / "rng", filter="data")
    return tmp_path / "rng"


def test_standalone_program_draws_numpy_numbers_without_a_heap(tmp_path: Path) -> None:
    # AOT + Model Library Format: the generator states live in the planned arena, and the
    # standalone program (make test) checks its outputs against numpy's, exactly
    tmp_path = _standalone(tmp_path, "c", 0.0)
    out = subprocess.run(["make", "-s", "test"], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip().startswith("PASS")
    symbols = subprocess.run(
        ["nm", "-u", "run_model"], cwd=tmp_path, capture_output=True, text=True
    )
    linked = {line.split()[-1].split("@")[0] for line in symbols.stdout.splitlines() if line}
    assert not linked & {"malloc", "calloc", "realloc", "free", "posix_memalign", "aligned_alloc"}


@pytest.mark.skipif(
    any(shutil.which(t) is None for t in ("arm-none-eabi-gcc", "qemu-system-arm")),
    reason="the Cortex-M toolchain is not installed (.ci/run installs it)",
)
def test_cortex_m4_board_draws_numpy_numbers(tmp_path: Path) -> None:
    # newlib's log differs from glibc's in the last bit for some values: normals are
    # within 1e-12 there (uniform, Bernoulli, Multinomial, Dropout are exact on the board)
    directory = _standalone(tmp_path, "c -mcpu=cortex-m4", 1e-12)
    out = subprocess.run(
        ["make", "-s", "board-test"], cwd=directory, capture_output=True, text=True, timeout=900
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith("PASS")
