"""The Winograd convolution (ember.ops.nn_conv_winograd) on the llvm kinds: they call the
runtime library's AVX-512 copy of c's kernel text (``ember_f32_winograd_avx512``,
ember.codegen.llvm.tiles) on AVX-512 targets only, and compute c's results bit for bit on
real layers (F(4,3) and F(2,3), edge tiles, paddings, fused bias + ReLU and a residual add,
one and two threads)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from llvm_build import E2E_KINDS

from ember.codegen.llvm.jit import RUNTIME_SYMBOLS
from ember.codegen.llvm.tiles import AVX512_ONLY_NAMES, header_text, tile_symbol
from ember.driver import build
from ember.errors import ArtifactError
from ember.ir import Function, IRModule, TensorType, Var, call, const
from ember.ops.nn_conv_winograd import WINOGRAD_CONFIG, winograd_target
from ember.runtime import libruntime, load_artifacts, num_threads
from ember.target import Target
from ember.testing.runners import run_artifacts
from ember.transform import PassContext

pytestmark = pytest.mark.cc

AVX512 = "x86-avx512" in Target.create("c").keys
needs_avx512 = pytest.mark.skipif(not AVX512, reason="Winograd convolutions need AVX-512")


def test_runtime_exports_only_the_avx512_copy() -> None:
    assert AVX512_ONLY_NAMES == ("ember_f32_winograd",)
    assert tile_symbol("ember_f32_winograd", True) == "ember_f32_winograd_avx512"
    assert "ember_f32_winograd_avx512" in RUNTIME_SYMBOLS
    assert "ember_f32_winograd_avx512(" in header_text()
    assert "ember_f32_winograd(" not in header_text()  # no AVX2 copy
    lib = libruntime.load()
    assert lib.ember_f32_winograd_avx512
    with pytest.raises(AttributeError):
        _ = lib.ember_f32_winograd


def test_rule_needs_an_avx512_cpu_record() -> None:
    assert winograd_target(Target.create("llvm -mcpu=skylake-avx512"))
    assert winograd_target(Target.create("llvmjit -mcpu=skylake-avx512"))
    assert not winograd_target(Target.create("llvm -mcpu=haswell"))
    assert not winograd_target(Target.create("llvm -mcpu=skylake-avx512 -mattr=-avx512f"))
    assert not winograd_target(Target.create("llvm -mtriple=aarch64-linux-gnu"))


def _module(
    h: int, w: int, c: int, o: int, pads: tuple[int, ...], residual: bool, stride: int = 1
) -> tuple[IRModule, dict[str, np.ndarray]]:
    rng = np.random.default_rng(h * w + c + o)
    x = np.maximum(rng.standard_normal((1, h, w, c)), 0).astype(np.float32)
    wt = (rng.standard_normal((o, c, 3, 3)) * np.sqrt(2 / (9 * c))).astype(np.float32)
    bias = (rng.standard_normal((1, 1, o)) * 0.1).astype(np.float32)
    xv = Var("x", TensorType(x.shape, "float32"))
    strides = [stride, stride]
    y = call("nn.conv", xv, const(wt), data_layout="NHWC", padding=list(pads), strides=strides)
    y = call("add", y, const(bias))
    params, inputs = [xv], {"x": x}
    if residual:
        shape = tuple(int(d) for d in y.type.shape) if y.type else ()
        params.append(Var("r", TensorType(shape, "float32")))
        inputs["r"] = rng.standard_normal(shape).astype(np.float32)
        y = call("add", y, params[-1])
    y = call("relu", y)
    return IRModule({"main": Function(tuple(params), y)}), inputs


def _blob(art: object) -> bytes:
    parts = art.artifacts  # type: ignore[attr-defined]
    return b"".join(
        (getattr(a, "content", b"") or b"") + (getattr(a, "bitcode", b"") or b"") for a in parts
    )


@needs_avx512
@pytest.mark.parametrize("kind", E2E_KINDS)
@pytest.mark.parametrize(
    ("h", "w", "c", "o", "m", "pads", "residual", "threads"),
    [
        (56, 56, 64, 64, 4, (1, 1, 1, 1), False, 1),  # ResNet-50
        (14, 14, 256, 256, 2, (1, 1, 1, 1), False, 1),  # ResNet-50, F(2,3) by default
        (32, 32, 16, 16, 4, (1, 1, 1, 1), True, 1),  # resnet8, residual add
        (10, 10, 256, 80, 4, (1, 1, 1, 1), False, 2),  # YOLO: 80 channels, 2 threads
        (9, 11, 32, 48, 2, (0, 1, 2, 0), False, 1),  # edge tiles, asymmetric padding
        (13, 7, 32, 48, 4, (2, 2, 2, 2), True, 2),
        (20, 20, 96, 24, 4, (1, 1, 1, 1), True, 1),  # DBNet: 24 channels padded to 32, masked
        (9, 11, 48, 40, 2, (1, 1, 1, 1), False, 2),  # 40 padded to 48
    ],
)
def test_llvm_equals_c_bitwise(
    kind: str,
    h: int,
    w: int,
    c: int,
    o: int,
    m: int,
    pads: tuple[int, ...],
    residual: bool,
    threads: int,
) -> None:
    mod, inputs = _module(h, w, c, o, pads, residual)
    cfg = PassContext(config={WINOGRAD_CONFIG: m})
    c_art, art = build(mod, "c", pass_context=cfg), build(mod, kind, pass_context=cfg)
    assert b"ember_f32_winograd(" in _blob(c_art)
    assert b"ember_f32_winograd_avx512" in _blob(art)
    with num_threads(threads):
        want, got = run_artifacts(c_art, inputs)[0], run_artifacts(art, inputs)[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes(), f"{kind} differs from c"


@needs_avx512
@pytest.mark.parametrize("kind", E2E_KINDS)
@pytest.mark.parametrize(
    ("h", "w", "c", "o", "pads", "residual", "threads"),
    [
        (32, 32, 16, 32, (1, 1, 1, 1), False, 1),  # resnet8's stride-2 layers
        (16, 16, 32, 64, (1, 1, 1, 1), True, 2),
        (10, 14, 16, 40, (0, 0, 1, 1), False, 2),  # 40 padded to 48, edge tiles
    ],
)
def test_llvm_stride2_equals_c_bitwise(
    kind: str,
    h: int,
    w: int,
    c: int,
    o: int,
    pads: tuple[int, ...],
    residual: bool,
    threads: int,
) -> None:
    """F(4,2) of a stride-2 convolution's phases: the same bits as c's."""
    mod, inputs = _module(h, w, c, o, pads, residual, stride=2)
    cfg = PassContext(config={WINOGRAD_CONFIG: 4})
    c_art, art = build(mod, "c", pass_context=cfg), build(mod, kind, pass_context=cfg)
    assert b"ember_f32_winograd(" in _blob(c_art)
    assert b"ember_f32_winograd_avx512" in _blob(art)
    with num_threads(threads):
        want, got = run_artifacts(c_art, inputs)[0], run_artifacts(art, inputs)[0]
    assert got.tobytes() == want.tobytes(), f"{kind} differs from c"


@needs_avx512
def test_llvm_default_choice_is_cs() -> None:
    """Unset config: the llvm kinds pick Winograd on the layers c picks it on."""
    for h, c in ((16, 32), (7, 512)):
        mod, _ = _module(h, h, c, c, (1, 1, 1, 1), False)
        c_calls = b"ember_f32_winograd(" in _blob(build(mod, "c"))
        assert c_calls
        assert (b"ember_f32_winograd_avx512" in _blob(build(mod, "llvm"))) == c_calls


@needs_avx512
def test_llvm_builds_are_deterministic() -> None:
    mod, _ = _module(16, 16, 32, 32, (1, 1, 1, 1), False)
    cfg = PassContext(config={WINOGRAD_CONFIG: 4})
    a, b = build(mod, "llvm", pass_context=cfg), build(mod, "llvm", pass_context=cfg)
    assert a.content_hash() == b.content_hash()


@needs_avx512
def test_objects_calling_other_runtime_kernels_are_refused(tmp_path: Path) -> None:
    """Regression: an llvm object calls the runtime's Winograd copy, whose arguments and
    scratch layout change between versions (the fused epilogue, the point stride); a saved
    set built by another ember wrote past its scratch. Such objects record the kernels'
    digest and loading one recorded against other kernels is refused."""
    mod, _ = _module(16, 16, 32, 32, (1, 1, 1, 1), False)
    arts = build(mod, "llvm")
    objects = [a for a in arts.artifacts if a.loader == "native"]
    assert [a.metadata.get(libruntime.TILES_KEY) for a in objects] == [
        libruntime.tiles_digest()
    ] * len(objects)
    root = arts.save(tmp_path / "set")
    manifest = json.loads((root / "manifest.json").read_text())
    for entry in manifest["artifacts"]:
        if libruntime.TILES_KEY in entry["metadata"]:
            entry["metadata"][libruntime.TILES_KEY] = "0123456789abcdef"
    (root / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match="rebuild the model with this ember"):
        load_artifacts(root, trust_native=True)
