"""The passes on an imported ONNX model: a small residual CNN with batch norms, a Caffe-style
scale, a classifier and softmax agrees with onnxruntime unoptimized, optimized and fused."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper

from ember.frontend import from_onnx
from ember.ir import Call, Function, evaluate, post_order, verify
from ember.transform import PassContext, fuse_ops, optimize


def _model() -> onnx.ModelProto:
    rng = np.random.default_rng(3)

    def init(name: str, *shape: int, positive: bool = False) -> onnx.TensorProto:
        data = rng.random(shape) + 0.5 if positive else rng.standard_normal(shape) * 0.3
        return numpy_helper.from_array(data.astype(np.float32), name)

    inits = [
        init("w1", 8, 3, 3, 3),
        init("b1", 8),
        init("w2", 8, 8, 3, 3),
        init("scale", 8, 1, 1),
        init("fc_w", 10, 8),
        init("fc_b", 10),
    ]
    for prefix in ("bn1", "bn2"):
        inits += [
            init(f"{prefix}_s", 8, positive=True),
            init(f"{prefix}_b", 8),
            init(f"{prefix}_m", 8),
            init(f"{prefix}_v", 8, positive=True),
        ]
    node = helper.make_node
    nodes = [
        node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        node("BatchNormalization", ["c1", "bn1_s", "bn1_b", "bn1_m", "bn1_v"], ["n1"]),
        node("Relu", ["n1"], ["r1"]),
        node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        node("BatchNormalization", ["c2", "bn2_s", "bn2_b", "bn2_m", "bn2_v"], ["n2"]),
        node("Mul", ["n2", "scale"], ["s2"]),
        node("Add", ["s2", "r1"], ["res"]),
        node("Relu", ["res"], ["r2"]),
        node("GlobalAveragePool", ["r2"], ["g"]),
        node("Flatten", ["g"], ["f"]),
        node("Gemm", ["f", "fc_w", "fc_b"], ["logits"], transB=1),
        node("Softmax", ["logits"], ["y"], axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "resblock",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8, 8])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("logits", TensorProto.FLOAT, None),
        ],
        initializer=inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_imported_model_through_the_pipeline() -> None:
    model = _model()
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    sess = onnxruntime.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    want = sess.run(None, {"x": x})
    mod, params = from_onnx(model)
    plain = evaluate(mod, {"x": x}, params)
    # channels first, the groups as imported (convert_layout has its own tests)
    ctx = PassContext(opt_level=2, debug=True, config={"convert_layout": "NCHW"})
    opt = optimize(mod, params, ctx=ctx)
    fused = fuse_ops(opt)
    verify(fused)
    for got in (plain, evaluate(opt, {"x": x}), evaluate(fused, {"x": x})):
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    ops = [n.op_name for n in post_order(opt.main.body) if isinstance(n, Call)]
    assert "nn.batch_norm" not in ops and "multiply" not in ops
    groups = [
        [m.op_name for m in post_order(n.op.body) if isinstance(m, Call)]
        for n in post_order(fused.main.body)
        if isinstance(n, Call) and isinstance(n.op, Function)
    ]
    assert groups[:2] == [["nn.conv", "add", "relu"], ["nn.conv", "add", "add", "relu"]]
    assert all(r.ran for r in ctx.report.records)
