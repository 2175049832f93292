"""Channels-last (NHWC) convolutions on the llvm kinds (ember.ops.nn_conv_nhwc): the
schedule choices that keep them within c's time, checked on the lowered loop IR (never by
timing), and a compiled chain against c.

Regressions (mobilenet_v2, one thread, CPU time, llvm/c per kernel): 3x3 depthwise rows of
14 took tiles of 4, 4, 4 and a guarded 2 (1.50x c's time at 14x14x384); 1x1 convolutions
with short reductions called the runtime's generic tile kernel once per tile (1.13-1.31x
at 16->96 112x112 and 24->144 56x56)."""

from __future__ import annotations

import numpy as np
import pytest

from ember.driver import build
from ember.ir import Attrs, Function, IRModule, TensorType, Var, call, const
from ember.lowering.lower_group import lower_group
from ember.ops.nn_conv_nhwc import LLVM_DEPTHWISE_LANES, LLVM_LOOP_TILE_REDUCTION
from ember.testing.runners import run_artifacts

LLVM = "llvm -mcpu=haswell"
C = "c -mcpu=haswell"


def _v(name: str, shape: tuple[int, ...]) -> Var:
    return Var(name, TensorType(shape, "float32"))


def _lowered(
    op: str, xshape: tuple[int, ...], wshape: tuple[int, ...], target: str, **attrs: object
) -> str:
    x, w = _v("x", xshape), _v("w", wshape)
    conv = call(op, x, w, data_layout="NHWC", **attrs)  # type: ignore[arg-type]
    return str(
        lower_group(Function((x, w), call("relu", conv), Attrs({"Primitive": 1})), "kernel", target)
    )


def test_llvm_depthwise_rows_of_14_are_two_tiles_of_7_without_a_guard() -> None:
    args = ("nn.conv_depthwise_packed", (1, 14, 14, 32), (2, 3, 3, 16))
    llvm = _lowered(*args, LLVM, padding=(1, 1, 1, 1))
    cols = LLVM_DEPTHWISE_LANES // 16
    assert f"conv = allocate(Buffer((1, 1, {cols}, 16)" in llvm and "if " not in llvm
    c = _lowered(*args, C, padding=(1, 1, 1, 1))
    assert "conv = allocate(Buffer((1, 1, 4, 16)" in c and "< 14:" in c


@pytest.mark.parametrize(("cin", "kernel"), [(24, False), (2 * LLVM_LOOP_TILE_REDUCTION, True)])
def test_llvm_short_nhwc_reductions_keep_loop_tiles(cin: int, kernel: bool) -> None:
    args = ("nn.conv_packed", (1, 20, 20, cin), (3, cin, 1, 1, 16))
    assert ("ember_f32_conv_tile" in _lowered(*args, LLVM)) is kernel
    # c: flattened 1x1 positions keep short reductions' loop tiles inline too (FLAT_ANY_SIZE)
    assert ("ember_f32_conv_tile" in _lowered(*args, C)) is kernel


def test_llvm_nhwc_chain_matches_c() -> None:
    rng = np.random.default_rng(3)

    def conv(v: object, cin: int, cout: int, k: int = 1, groups: int = 1) -> object:
        w = const((rng.standard_normal((cout, cin // groups, k, k)) / 5).astype("float32"))
        p = k // 2
        y = call("nn.conv", v, w, padding=[p, p, p, p], groups=groups)  # type: ignore[arg-type]
        return call("clip", y, a_min=0.0, a_max=6.0)

    x = _v("x", (1, 16, 14, 14))
    y = conv(conv(conv(x, 16, 48), 48, 48, 3, groups=48), 48, 24)
    mod = IRModule({"main": Function((x,), y)})  # type: ignore[arg-type]
    data = {"x": rng.standard_normal((1, 16, 14, 14)).astype("float32")}
    want = run_artifacts(build(mod, C), data)[0]
    got = run_artifacts(build(mod, LLVM), data)[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
