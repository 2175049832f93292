"""Single ONNX ops as models use them: ember next to onnxruntime, one thread by default.

Run: ``.venv/bin/python benchmarks/single_ops.py [--only einsum,pool] [--repeat 15]
[--threads 1]``. Each row is a one- to seven-node ONNX model at a shape a real model gives
it (attention's einsum, a stem's max pool, an embedding lookup, a decomposed LayerNorm,
...), compiled for ``c`` and run by the AOT executor. Outputs are checked against
onnxruntime first (rtol 1e-4, atol 1e-4 of the output's scale); a row whose ember/ort is
above 1.25 is marked ``<<<``. This sweep found the slow paths fixed at stop 38 (ScatterND: 1800x,
Pow by 3: 100x, einsum as a generic compute: 30x, reductions over H and W: 8x, padded NCHW
pools: 4-16x, RoiAlign: 6x); run it after touching an op family. Nothing is asserted on the times.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.append(str(Path(__file__).resolve().parent))

from bench_common import best_times, markdown_table, ort_session, run_table  # noqa: E402

#: (op, inputs, attributes) of one node; its output is the next node's ``x``-chain value.
Node = tuple[str, tuple[str, ...], dict[str, Any]]


def _i64(*v: int) -> np.ndarray:
    return np.array(v, np.int64)


def _f32(*v: float) -> np.ndarray:
    return np.array(v, np.float32)


def _scalar(v: float | int) -> np.ndarray:
    return np.array(v, np.float32 if isinstance(v, float) else np.int64)


@dataclass(frozen=True)
class Case:
    """A model: ``nodes`` over input ``x`` (``shape``, ``dtype``) and constants ``consts``
    (name -> value, or a callable of a seeded generator); the last node's output is ``y``."""

    name: str
    shape: tuple[int, ...]
    nodes: tuple[Node, ...]
    consts: dict[str, Any] = field(default_factory=dict)
    dtype: str = "float32"
    #: the input's values from a seeded generator (default: standard normal floats)
    values: Callable[[np.random.Generator], np.ndarray] | None = None
    #: the output's element type (onnx.TensorProto: 1 float, 2 uint8, 6 int32, 7 int64)
    out_dtype: int = 1


def _ln_decomposed() -> tuple[Node, ...]:
    return (
        ("ReduceMean", ("x", "axes"), {}),
        ("Sub", ("x", "t0"), {}),
        ("Pow", ("t1", "two"), {}),
        ("ReduceMean", ("t2", "axes"), {}),
        ("Add", ("t3", "eps"), {}),
        ("Sqrt", ("t4",), {}),
        ("Div", ("t1", "t5"), {}),
    )


POOL_3X3_S2 = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}

CASES: tuple[Case, ...] = (
    Case("pow3 (GPT-2 GELU)", (128, 1536), (("Pow", ("x", "e"), {}),), {"e": _scalar(3.0)}),
    Case(
        "einsum bhqd,bhkd->bhqk",
        (1, 8, 128, 64),
        (("Einsum", ("x", "x"), {"equation": "bhqd,bhkd->bhqk"}),),
    ),
    Case(
        "einsum bhqk,bhkd->bhqd",
        (1, 8, 128, 128),
        (("Einsum", ("x", "v"), {"equation": "bhqk,bhkd->bhqd"}),),
        {"v": lambda rng: rng.standard_normal((1, 8, 128, 64)).astype(np.float32)},
    ),
    Case(
        "reducemean H,W 1x256x56x56",
        (1, 256, 56, 56),
        (("ReduceMean", ("x", "a"), {}),),
        {"a": _i64(2, 3)},
    ),
    Case("reducemax last 64x1000", (64, 1000), (("ReduceMax", ("x", "a"), {}),), {"a": _i64(-1)}),
    Case("maxpool 3x3/2 1x64x112x112", (1, 64, 112, 112), (("MaxPool", ("x",), POOL_3X3_S2),)),
    Case(
        "avgpool 3x3/1 1x64x56x56",
        (1, 64, 56, 56),
        (("AveragePool", ("x",), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),),
    ),
    Case("softmax 12x197x197", (1, 12, 197, 197), (("Softmax", ("x",), {"axis": -1}),)),
    Case("logsoftmax 64x1000", (64, 1000), (("LogSoftmax", ("x",), {"axis": -1}),)),
    Case("exp 128x1536", (128, 1536), (("Exp", ("x",), {}),)),
    Case(
        "layernorm decomposed 1x512x768",
        (1, 512, 768),
        _ln_decomposed(),
        {"axes": _i64(-1), "two": _scalar(2.0), "eps": _scalar(1e-5)},
    ),
    Case(
        "layernorm 1x512x768",
        (1, 512, 768),
        (("LayerNormalization", ("x", "s", "b"), {"axis": -1}),),
        {"s": np.ones(768, np.float32), "b": np.zeros(768, np.float32)},
    ),
    Case(
        "gather embedding 30000x256",
        (1, 512),
        (("Gather", ("table", "x"), {"axis": 0}),),
        {"table": lambda rng: rng.standard_normal((30000, 256)).astype(np.float32)},
        dtype="int64",
        values=lambda rng: rng.integers(0, 30000, (1, 512)),
    ),
    Case("cumsum last 64x1000", (64, 1000), (("CumSum", ("x", "axis"), {}),), {"axis": _scalar(1)}),
    Case("topk 5 of 4x1000", (4, 1000), (("TopK", ("x", "k"), {}),), {"k": _i64(5)}),
    Case("argmax last 64x1000", (64, 1000), (("ArgMax", ("x",), {"axis": -1}),), out_dtype=7),
    Case(
        "pad reflect 1x64x128x128",
        (1, 64, 128, 128),
        (("Pad", ("x", "p"), {"mode": "reflect"}),),
        {"p": _i64(0, 0, 1, 1, 0, 0, 1, 1)},
    ),
    Case(
        "cast f32->f16->f32 1x64x56x56",
        (1, 64, 56, 56),
        (("Cast", ("x",), {"to": 10}), ("Cast", ("t0",), {"to": 1})),
    ),
    Case(
        "resize bilinear x2 1x64x64x64",
        (1, 64, 64, 64),
        (("Resize", ("x", "", "s"), {"mode": "linear"}),),
        {"s": _f32(1, 1, 2, 2)},
    ),
    Case(
        "instancenorm 1x64x128x128",
        (1, 64, 128, 128),
        (("InstanceNormalization", ("x", "s", "b"), {}),),
        {"s": np.ones(64, np.float32), "b": np.zeros(64, np.float32)},
    ),
    Case(
        "transpose 0213 1x128x12x64",
        (1, 128, 12, 64),
        (("Transpose", ("x",), {"perm": [0, 2, 1, 3]}),),
    ),
    Case(
        "scatternd 200 rows into 1000x64",
        (1000, 64),
        (("ScatterND", ("x", "i", "u"), {}),),
        {
            "i": lambda rng: rng.integers(0, 1000, (200, 1)),
            "u": lambda rng: rng.standard_normal((200, 64)).astype(np.float32),
        },
    ),
    Case(
        "scatterelements 64x100 into 64x1000",
        (64, 1000),
        (("ScatterElements", ("x", "i", "u"), {"axis": 1}),),
        {
            "i": lambda rng: rng.integers(0, 1000, (64, 100)),
            "u": lambda rng: rng.standard_normal((64, 100)).astype(np.float32),
        },
    ),
    Case(
        "meanvariancenorm 1x64x56x56", (1, 64, 56, 56), (("MeanVarianceNormalization", ("x",), {}),)
    ),
    Case(
        "roialign 100 rois 1x256x50x50",
        (1, 256, 50, 50),
        (
            (
                "RoiAlign",
                ("x", "rois", "batch"),
                {"output_height": 7, "output_width": 7, "sampling_ratio": 2},
            ),
        ),
        {
            "rois": lambda rng: (rng.uniform(0, 40, (100, 4)) + [0, 0, 5, 5]).astype(np.float32),
            "batch": np.zeros(100, np.int64),
        },
    ),
    Case(
        "quantizelinear 1x64x56x56",
        (1, 64, 56, 56),
        (("QuantizeLinear", ("x", "scale", "zero"), {}),),
        {"scale": _scalar(0.05), "zero": np.array(128, np.uint8)},
        out_dtype=2,
    ),
    Case(
        "matmulinteger 128x768 @ 768x768",
        (128, 768),
        (("MatMulInteger", ("x", "w", "xz", "wz"), {}),),
        {
            "w": lambda rng: rng.integers(0, 255, (768, 768)).astype(np.uint8),
            "xz": np.array(128, np.uint8),
            "wz": np.array(128, np.uint8),
        },
        dtype="uint8",
        values=lambda rng: rng.integers(0, 255, (128, 768)),
        out_dtype=6,
    ),
    Case(
        "matmul 1x1536 @ 1536x384",
        (1, 1536),
        (("MatMul", ("x", "w"), {}),),
        {"w": lambda rng: (rng.standard_normal((1536, 384)) * 0.03).astype(np.float32)},
    ),
)


def make_case(case: Case, seed: int = 0) -> tuple[Any, dict[str, np.ndarray]]:
    """The ONNX model of ``case`` and its seeded input."""
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(seed)
    if case.values is not None:
        x = np.asarray(case.values(rng)).astype(case.dtype)
    else:
        x = rng.standard_normal(case.shape).astype(case.dtype)
    inits = []
    for name, value in case.consts.items():
        array = value(rng) if callable(value) else value
        inits.append(numpy_helper.from_array(np.asarray(array), name))
    nodes = []
    for k, (op, inputs, attrs) in enumerate(case.nodes):
        outs = ["y" if k == len(case.nodes) - 1 else f"t{k}"]
        if op == "TopK":
            outs.append("indices")
        nodes.append(helper.make_node(op, list(inputs), outs, **attrs))
    dtype = helper.np_dtype_to_tensor_dtype(np.dtype(case.dtype))
    graph = helper.make_graph(
        nodes,
        "single_op",
        [helper.make_tensor_value_info("x", dtype, list(case.shape))],
        [helper.make_tensor_value_info("y", case.out_dtype, None)],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model, {"x": x}


def measure(case: Case, repeat: int, threads: int) -> list[str]:
    """Compile, check and time one case; return its table cells."""
    import ember
    from ember.executor import AotExecutor
    from ember.testing import compile_onnx

    model, inputs = make_case(case)
    dev = ember.cpu(0)
    built = compile_onnx(model, shape={"x": case.shape}, executor="aot")
    aot = AotExecutor(ember.load_artifacts(built, dev)["default"](dev))
    aot.set_input("x", inputs["x"])
    sess = ort_session(model.SerializeToString(), threads)
    aot.run()
    ours = aot.get_output(0).numpy()
    ref = sess.run(None, inputs)[0]
    scale = float(np.max(np.abs(ref))) if ref.size and ref.dtype.kind == "f" else 1.0
    np.testing.assert_allclose(ours, ref, rtol=1e-4, atol=1e-4 * scale, err_msg=case.name)

    def ort_run() -> object:
        return sess.run(None, inputs)

    ember_s, ort_s = best_times([aot.run, ort_run], repeat)
    flag = "  <<<" if ember_s > 1.25 * ort_s else ""
    return [case.name, f"{ember_s * 1e6:.1f}", f"{ort_s * 1e6:.1f}", f"{ember_s / ort_s:.2f}{flag}"]


HEADER = ["case", "ember us", "ort us", "ember/ort"]


def format_table(rows: Sequence[Sequence[str]]) -> str:
    """A markdown table of the measured rows."""
    return markdown_table(HEADER, rows)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line, measure every selected case, print the table."""
    description = (__doc__ or "").split("\n")[0]
    return run_table(description, CASES, measure, HEADER, argv, repeat=15)


if __name__ == "__main__":
    sys.exit(main())
