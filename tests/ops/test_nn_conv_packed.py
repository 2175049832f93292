"""nn.conv_packed: the compile-time weight packing of nn.conv, its legalizer, the
register-tiled schedule (interpreted and compiled) and the op's type rule and reference."""

from __future__ import annotations

import numpy as np
import pytest

from ember import tir
from ember.errors import IRError
from ember.ir import Attrs, Constant, Function, TensorType, Var, call, const, evaluate
from ember.ir.ops.nn_conv_weights import (
    PACK_BLOCKS,
    pack_block,
    pack_conv_weight,
    unpack_conv_weight,
)
from ember.lowering.lower_group import lower_group
from ember.ops.nn_conv import conv_to_packed
from ember.ops.nn_conv_rewrite import INTERPRET_EXTERNS
from ember.ops.nn_schedule_tiles import _tile_cols, register_tiles
from ember.target import Target

#: the schedules' shapes below are those of the wide register tiles (AVX-512's row, also the
#: default of CPUs without a row), whatever the host; AVX2's row is tested on its own
WIDE_TILES = "c -mcpu=skylake-avx512"
MAX_TILE_COLS = register_tiles(Target.create(WIDE_TILES)).conv_cols


def v(name: str, shape: tuple[int, ...], dtype: str = "float32") -> Var:
    return Var(name, TensorType(shape, dtype))


def _weight(shape: tuple[int, ...], seed: int = 0, dtype: str = "float32") -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def test_pack_unpack_round_trip_and_layout():
    w = _weight((32, 3, 3, 2))
    wp = pack_conv_weight(w, 16)
    assert wp.shape == (2, 3, 3, 2, 16) and wp.flags.c_contiguous
    assert wp[1, 2, 0, 1, 5] == w[16 + 5, 2, 0, 1]
    np.testing.assert_array_equal(unpack_conv_weight(wp), w)


@pytest.mark.parametrize(
    ("xshape", "wshape", "attrs", "block"),
    [
        ((1, 3, 9, 9), (32, 3, 3, 3), {"padding": (1, 1, 1, 1)}, 16),
        ((2, 4, 10), (24, 4, 3), {"strides": (2,), "dilation": (2,)}, 8),
        ((1, 2, 4, 5, 6), (8, 2, 1, 2, 3), {"padding": (0, 1, 0, 0, 1, 2)}, 8),
    ],
)
def test_legalizer_packs_constant_ungrouped_weights(xshape, wshape, attrs, block):
    x = v("x", xshape)
    w = _weight(wshape, 1)
    node = call("nn.conv", x, const(w), name="c1", **attrs)
    out = conv_to_packed(node)
    assert out.op.name == "nn.conv_packed" and out.name == "c1"
    assert isinstance(out.args[1], Constant)
    assert out.args[1].data.shape[-1] == block
    assert out.type == node.type
    xs = [_weight(xshape, 2)]
    want = evaluate(Function((x,), node), xs)[0]
    np.testing.assert_allclose(evaluate(Function((x,), out), xs)[0], want, rtol=1e-5, atol=1e-5)


def test_legalizer_leaves_other_convolutions_alone():
    x = v("x", (1, 4, 6, 6))
    grouped = call("nn.conv", x, const(_weight((12, 2, 3, 3))), groups=2)  # 6 per group
    odd = call("nn.conv", x, const(_weight((12, 4, 3, 3))))
    dynamic = call("nn.conv", x, v("w", (16, 4, 3, 3)))
    for node in (grouped, odd, dynamic):
        assert conv_to_packed(node) is node


@pytest.mark.parametrize(
    ("xshape", "wshape", "groups", "block"),
    [((1, 4, 6, 7), (32, 2, 3, 3), 2, 16), ((2, 6, 5, 5), (24, 2, 1, 1), 3, 8)],
)
def test_legalizer_packs_grouped_convolutions(xshape, wshape, groups, block):
    x = v("x", xshape)
    node = call("nn.conv", x, const(_weight(wshape, 9)), groups=groups, padding=(1, 0, 0, 1))
    out = conv_to_packed(node)
    assert out.op.name == "nn.conv_packed" and out.attrs["groups"] == groups
    assert out.args[1].data.shape[-1] == block and out.type == node.type
    xs = [_weight(xshape, 10)]
    want = evaluate(Function((x,), node), xs)[0]
    np.testing.assert_allclose(evaluate(Function((x,), out), xs)[0], want, rtol=1e-5, atol=1e-5)


def test_pack_block_pads_only_when_it_wastes_little():
    assert PACK_BLOCKS == (16, 8)
    assert pack_block(64) == 16 and pack_block(24) == 8 and pack_block(1000) == 16
    assert pack_block(120) == 16 and pack_block(12) == 0 and pack_block(3) == 0
    w = _weight((30, 2, 3))
    wp = pack_conv_weight(w, 16)
    assert wp.shape == (2, 2, 3, 16)
    assert not wp[1, :, :, 14:].any()
    np.testing.assert_array_equal(unpack_conv_weight(wp, 30), w)


def test_padded_channels_legalize_and_match():
    x = v("x", (1, 3, 5, 5))
    node = call("nn.conv", x, const(_weight((120, 3, 3, 3), 7)), padding=(1, 1, 1, 1))
    out = conv_to_packed(node)
    assert out.args[1].data.shape == (8, 3, 3, 3, 16) and out.attrs["channels"] == 120
    assert out.type == node.type
    xs = [_weight((1, 3, 5, 5), 8)]
    want = evaluate(Function((x,), node), xs)[0]
    np.testing.assert_allclose(evaluate(Function((x,), out), xs)[0], want, rtol=1e-5, atol=1e-5)


def test_packed_type_rule_checks_channels():
    x, wp = v("x", (1, 4, 6, 6)), v("wp", (3, 4, 3, 3, 16))
    assert call("nn.conv_packed", x, wp, channels=36).type.shape == (1, 36, 4, 4)
    # the block before the last too: a zero block more (ember.ops.nn_conv_flat)
    assert call("nn.conv_packed", x, wp, channels=32).type.shape == (1, 32, 4, 4)
    with pytest.raises(IRError, match="last two blocks"):
        call("nn.conv_packed", x, wp, channels=16).type  # noqa: B018


def test_packed_type_rule_refuses_a_plain_weight():
    x, w = v("x", (1, 4, 6, 6)), v("w", (16, 4, 3, 3))
    with pytest.raises(IRError, match="one rank more"):
        call("nn.conv_packed", x, w).type  # noqa: B018


def _run(params: list[Var], body, seed: int = 0, tol: float = 1e-4) -> str:
    """Lower the group, interpret it and compare with the graph-IR reference."""
    rng = np.random.default_rng(seed)
    xs = [rng.standard_normal(p.type.shape).astype(p.type.dtype) for p in params]
    func = Function(tuple(params), body, Attrs({"Primitive": 1}))
    refs = evaluate(Function(func.params, func.body), xs)
    prim = lower_group(func, "kernel", WIDE_TILES)
    tir.verify(prim)
    outs = [np.zeros(r.shape, r.dtype) for r in refs]
    tir.interpret(prim, xs + outs, externs=INTERPRET_EXTERNS)
    for out, ref in zip(outs, refs, strict=True):
        np.testing.assert_allclose(out, ref, rtol=tol, atol=tol)
    return str(prim)


@pytest.mark.parametrize(
    ("xshape", "wshape", "attrs"),
    [
        ((1, 3, 6, 8), (16, 3, 3, 3), {"padding": (1, 1, 1, 1)}),
        ((2, 2, 5, 11), (8, 2, 3, 3), {"strides": (1, 2), "padding": (0, 1, 2, 0)}),
        ((1, 2, 7, 13), (8, 2, 2, 3), {"dilation": (2, 1)}),
        ((1, 3, 10), (16, 3, 3), {"padding": (1, 1)}),
        ((1, 2, 3, 4, 9), (8, 2, 2, 1, 3), {"padding": (1, 0, 0, 0, 1, 1)}),
        ((1, 6, 5, 9), (48, 2, 3, 3), {"groups": 3, "padding": (1, 1, 1, 1)}),
        ((2, 4, 6, 6), (16, 2, 3, 3), {"groups": 2, "strides": (2, 1)}),
    ],
)
def test_packed_conv_matches_reference(xshape, wshape, attrs):
    x = v("x", xshape)
    w = _weight(wshape, 3)
    node = conv_to_packed(call("nn.conv", x, const(w), **attrs))
    assert node.op.name == "nn.conv_packed"
    wp = v("wp", node.args[1].data.shape)
    text = _run([x, wp], call("nn.conv_packed", x, wp, **attrs))
    assert "unrolled" in text and "vectorized" in text


@pytest.mark.parametrize("epilogue", [False, True])
def test_packed_conv_with_padded_channels(epilogue):
    x, wp, b = v("x", (1, 3, 4, 9)), v("wp", (2, 3, 3, 3, 16)), v("b", (30, 1, 1))
    conv = call("nn.conv_packed", x, wp, padding=(1, 1, 1, 1), channels=30)
    body = call("relu", call("add", conv, b)) if epilogue else conv
    text = _run([x, wp, b] if epilogue else [x, wp], body)
    assert "vectorized(16)" in text


def test_packed_conv_with_epilogue_is_one_tiled_nest():
    x, wp, b = v("x", (1, 4, 3, 2 * MAX_TILE_COLS)), v("wp", (2, 4, 3, 3, 8)), v("b", (16, 1, 1))
    conv = call("nn.conv_packed", x, wp, padding=(1, 1, 1, 1))
    text = _run([x, wp, b], call("relu", call("add", conv, b)))
    assert "parallel" in text
    # the accumulator is one tile (columns x block), not the whole output
    assert f'Buffer((1, 1, {MAX_TILE_COLS}, 8), "float32", scope="local"), stack' in text


def test_tile_columns():
    assert _tile_cols(56, 8) == 8
    assert _tile_cols(28, 8) == 7
    assert _tile_cols(7, 8) == 7
    assert _tile_cols(13, 8) == 8  # no useful divisor: a guarded tail tile
    assert _tile_cols(3, 8) == 3
    assert _tile_cols(56, 14) == 14 and _tile_cols(26, 14) == 13
    assert _tile_cols(55, 14) == 14 and _tile_cols(27, 14) == 14 and _tile_cols(16, 14) == 14
    assert _tile_cols(7, 2) == 2


def _conv_model(
    cin: int, cout: int, size: tuple[int, int], kernel: int, stride: int, relu: bool, groups=1
):
    from onnx import TensorProto, helper, numpy_helper

    w = _weight((cout, cin // groups, kernel, kernel), 4) / np.float32(np.sqrt(cin * kernel**2))
    b = _weight((cout,), 5)
    pad = kernel // 2
    nodes = [
        helper.make_node(
            "Conv",
            ["x", "w", "b"],
            ["c"],
            pads=[pad] * 4,
            strides=[stride] * 2,
            group=groups,
            name="conv",
        )
    ]
    nodes.append(helper.make_node("Relu" if relu else "Identity", ["c"], ["y"]))
    oh = (size[0] + 2 * pad - kernel) // stride + 1
    ow = (size[1] + 2 * pad - kernel) // stride + 1
    graph = helper.make_graph(
        nodes,
        "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, cin, *size])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, cout, oh, ow])],
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.mark.cc
@pytest.mark.parametrize(
    ("cin", "cout", "size", "kernel", "stride", "relu", "groups"),
    [
        (16, 32, (9, 13), 3, 1, True, 1),  # tail tile (13 columns)
        (8, 24, (14, 14), 1, 1, False, 1),  # block 8, 1x1
        (3, 16, (11, 12), 7, 2, True, 1),  # stem-like: 7x7 stride 2
        (8, 120, (6, 5), 3, 1, True, 1),  # 120 channels padded to 128
        (32, 16, (7, 7), 3, 1, False, 1),  # 7-wide rows
        (12, 48, (7, 9), 1, 1, True, 3),  # grouped (shufflenet-like): 16 channels per group
        (8, 32, (6, 6), 3, 2, False, 2),
    ],
)
def test_compiled_packed_conv_matches_onnxruntime(cin, cout, size, kernel, stride, relu, groups):
    from ember.testing import assert_matches_onnxruntime

    model = _conv_model(cin, cout, size, kernel, stride, relu, groups)
    x = _weight((1, cin, *size), 6)
    assert_matches_onnxruntime(model, {"x": x}, rtol=1e-4, atol=1e-5)


def test_writeback_vectorises_over_channels_under_a_clip_epilogue():
    # column-innermost writes would gather the accumulators (left scalar and branchy by gcc)
    x, wp = v("x", (1, 4, 5, 6)), v("wp", (1, 4, 3, 3, 16))
    conv = call("nn.conv_packed", x, wp, padding=(1, 1, 1, 1))
    text = _run([x, wp], call("clip", conv, a_min=0.0, a_max=6.0))
    # init, update, out; twice: 2-row tiles of 5 rows, the full tiles and the partial one
    assert text.count("vectorized(16)") == 6 and "vectorized(6)" not in text


@pytest.mark.parametrize(
    ("xshape", "wshape", "rows"),
    [
        ((1, 3, 7, 7), (1, 3, 3, 3, 16), 2),  # 7x7: 2 rows x 7 columns, the last tile guarded
        ((1, 2, 3, 5, 4), (1, 2, 1, 3, 3, 8), 3),  # 3-D, rows of 4: 3 rows of the middle axis
    ],
)
def test_narrow_rows_tile_several_rows(xshape, wshape, rows):
    x, wp = v("x", xshape), v("wp", wshape)
    nsp = len(xshape) - 2
    conv = call("nn.conv_packed", x, wp, padding=(1,) * (2 * nsp))
    text = _run([x, wp], call("relu", conv))
    assert f"unrolled({rows})" in text


@pytest.mark.cc
def test_conv_kernels_benchmark_prints_a_checked_row(capsys, monkeypatch, tmp_path):
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(__file__).parents[2] / "benchmarks" / "conv_kernels.py"
    spec = importlib.util.spec_from_file_location("conv_kernels_bench", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "conv_kernels_bench", bench)  # dataclasses look it up
    spec.loader.exec_module(bench)
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("EMBER_NUM_THREADS", "1")  # main() sets it; restored afterwards
    assert bench.main(["--only", "mv2.dw.7,bert.128x1024", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "| mv2.dw.7 " in out and "| bert.128x1024x256 " in out
    assert bench.main(["--only", "nothing"]) == 2


@pytest.mark.cc
@pytest.mark.parametrize("target", ["c", "llvm"])
@pytest.mark.parametrize(
    ("cin", "cout", "size", "kernel", "stride", "groups"),
    [
        (16, 32, (5, 20), 3, 1, 1),  # 14-column tiles: one full, one partial of 6
        (8, 16, (3, 29), 1, 1, 1),  # two full tiles and a partial of 1
        (8, 24, (9, 9), 3, 1, 1),  # 9-wide rows: one partial tile per row
        (4, 16, (7, 7), 3, 1, 1),  # 2-row tiles of 7-row output: the last tile partial
        (12, 48, (5, 31), 3, 2, 3),  # grouped, strided, 16 columns: 14 + partial 2
    ],
)
def test_partial_tiles_match_onnxruntime(cin, cout, size, kernel, stride, groups, target):
    from ember.testing import assert_matches_onnxruntime

    model = _conv_model(cin, cout, size, kernel, stride, True, groups)
    x = _weight((1, cin, *size), 7)
    assert_matches_onnxruntime(model, {"x": x}, rtol=1e-4, atol=1e-5, target=target)


@pytest.mark.parametrize("size", [(2, 20), (7, 7), (3, 29)])
def test_full_tiles_have_no_guard_in_the_reduction(size):
    x, wp = v("x", (1, 3, *size)), v("wp", (1, 3, 3, 3, 16))
    text = _run([x, wp], call("relu", call("nn.conv_packed", x, wp, padding=(1, 1, 1, 1))))
    full, partial = text.split("    else:\n", 1)
    assert " if " in full and "        if " not in full.split(" if ", 1)[1]
    assert partial.count("if ") >= 3  # init, update and write-back keep their guards


def test_avx2_tiles_fit_avx2_registers_and_avx512_keeps_the_wide_ones():
    """The register tile row each kind and CPU gets (llvm on AVX-512: its own row)."""
    from ember.ops.nn_schedule_tiles import TILES

    for kind in ("llvm", "llvmjit"):
        for llvm_avx2 in ("-mcpu=haswell", "-mcpu=skylake-avx512 -mattr=-avx512f"):
            assert register_tiles(Target.create(f"{kind} {llvm_avx2}")) is TILES["llvm"]
        # AVX-512's 32 registers: the llvm kinds take a row of their own, not AVX2's
        wide = register_tiles(Target.create(f"{kind} -mcpu=skylake-avx512"))
        assert wide is TILES["llvm x86-avx512"]
        assert wide.conv_cols + 2 <= 32 and wide.matmul[0] * wide.matmul[1] // 16 <= 32
        assert wide.conv_cols >= 8  # 2 FMA units x 4 cycles of latency: 8 accumulators
    # C contracts reduction updates into FMAs (codegen/c/contract.py): the small tiles win
    assert register_tiles(Target.create("c -mcpu=haswell")) == TILES["x86-avx2"]
    assert register_tiles(Target.create("c -mcpu=skylake-avx512")) == TILES["x86-avx512"]
    for key in ("llvm", "x86-avx2"):
        assert TILES[key].conv_cols * 2 + 4 <= 16  # accumulators + operands in 16 registers
        assert TILES[key].matmul[0] * TILES[key].matmul[1] // 8 + 3 <= 16
