"""from_onnx: inputs, initializers as params, shape/dtype binding, opsets, folding,
multi-output handlers, and the up-front report of unsupported operators."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

from ember.errors import FrontendError, OpNotSupportedError
from ember.frontend import from_onnx
from ember.frontend.onnx import ConvertContext, NodeView, onnx_op
from ember.ir import Call, Constant, TensorType, Tuple, Var, call, evaluate

# Handlers in a private domain, so these tests do not depend on other op families.
TEST_DOMAIN = "ember.test"


@onnx_op("TAdd", since=1, domain=TEST_DOMAIN, dtypes={"float32", "int64"}, override=True)
def _tadd(ctx: ConvertContext, node: NodeView):
    return call("add", node.inputs[0], node.inputs[1], name=node.name)


@onnx_op("TReshape", since=1, domain=TEST_DOMAIN, override=True)
def _treshape(ctx: ConvertContext, node: NodeView):
    newshape = ctx.require_const(node.inputs[1], "the target shape")
    return call("reshape", node.inputs[0], newshape=[int(d) for d in newshape], name=node.name)


@onnx_op("TPair", since=1, domain=TEST_DOMAIN, override=True)
def _tpair(ctx: ConvertContext, node: NodeView):
    x = node.inputs[0]
    return Tuple((x, call("add", x, x)))


def _tnode(op: str, ins: list[str], outs: list[str], name: str = "") -> onnx.NodeProto:
    return helper.make_node(op, ins, outs, name=name or None, domain=TEST_DOMAIN)


def _model(onnx_model, nodes, inputs, outputs, extra_opsets=None, **kw) -> onnx.ModelProto:
    opsets = {TEST_DOMAIN: 1, **(extra_opsets or {})}
    return onnx_model(nodes, inputs, outputs, extra_opsets=opsets, **kw)


def test_inputs_then_used_initializers_as_params(onnx_model):
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    model = _model(
        onnx_model,
        [_tnode("TAdd", ["x", "w"], ["y"])],
        {"x": ("float32", (2, 3))},
        ["y"],
        initializers={"w": w, "unused": np.ones(4, np.float32)},
    )
    mod, params = from_onnx(model)
    assert [p.name for p in mod.main.params] == ["x", "w"]
    assert list(params) == ["w"]
    np.testing.assert_array_equal(params["w"], w)
    x = np.ones((2, 3), np.float32)
    (y,) = evaluate(mod, [x], params)
    np.testing.assert_array_equal(y, x + w)


def test_path_bytes_and_proto_give_the_same_module(onnx_model, tmp_path):
    model = _model(onnx_model, [_tnode("TAdd", ["x", "x"], ["y"])], {"x": ("float32", (3,))}, ["y"])
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    x = np.array([1, 2, 3], np.float32)
    for source in (model, model.SerializeToString(), str(path), path):
        mod, params = from_onnx(source)
        np.testing.assert_array_equal(evaluate(mod, [x], params)[0], 2 * x)


def test_external_data_is_loaded(onnx_model, tmp_path):
    w = np.arange(4096, dtype=np.float32)
    model = _model(
        onnx_model,
        [_tnode("TAdd", ["x", "w"], ["y"])],
        {"x": ("float32", (4096,))},
        ["y"],
        initializers={"w": w},
    )
    path = tmp_path / "ext.onnx"
    onnx.save(model, str(path), save_as_external_data=True, location="w.bin", size_threshold=0)
    mod, params = from_onnx(path)
    np.testing.assert_array_equal(params["w"], w)


def test_symbolic_dims_need_binding_and_the_error_names_them(onnx_model):
    model = _model(
        onnx_model,
        [_tnode("TAdd", ["x", "z"], ["y"])],
        {"x": ("float32", ("batch", 3)), "z": ("float32", (None, 3))},
        ["y"],
    )
    with pytest.raises(FrontendError) as err:
        from_onnx(model)
    msg = str(err.value)
    assert "'x' (dims 0='batch')" in msg and "'z' (dims 0=?)" in msg and "shape=" in msg
    mod, _ = from_onnx(model, shape={"batch": 4, "z": (4, 3)})
    assert [p.type for p in mod.main.params] == [TensorType((4, 3), "float32")] * 2
    with pytest.raises(FrontendError, match="neither inputs nor symbolic dims"):
        from_onnx(model, shape={"bogus": (1,)})
    with pytest.raises(FrontendError, match="rank 2"):
        from_onnx(model, shape={"x": (4, 3, 1), "z": (4, 3)})


def test_dtype_override(onnx_model):
    model = _model(onnx_model, [_tnode("TAdd", ["x", "x"], ["y"])], {"x": ("float32", (2,))}, ["y"])
    mod, _ = from_onnx(model, dtype="int64")
    assert mod.main.params[0].type == TensorType((2,), "int64")
    mod, _ = from_onnx(model, dtype={"x": "float32"})
    assert mod.main.params[0].type.dtype == "float32"
    with pytest.raises(FrontendError, match="not inputs"):
        from_onnx(model, dtype={"q": "float32"})


@pytest.mark.parametrize("opset", [1, 6])
def test_old_opsets_are_upgraded(onnx_model, opset):
    model = onnx_model(
        [helper.make_node("Identity", ["x"], ["y"])], {"x": ("float32", (2,))}, ["y"], opset=opset
    )
    mod, _ = from_onnx(model)  # converted to the minimum opset (tests/.../test_upgrade.py)
    assert mod.main.params[0].type == TensorType((2,), "float32")


def test_too_new_opset_is_rejected(onnx_model):
    newest = onnx.defs.onnx_opset_version()
    model = onnx_model(
        [helper.make_node("Identity", ["x"], ["y"])],
        {"x": ("float32", (2,))},
        ["y"],
        opset=newest + 1,
    )
    with pytest.raises(FrontendError, match="newer than the installed onnx"):
        from_onnx(model)


def test_shape_chain_folds_to_a_constant_and_initializer_shapes_are_read(onnx_model):
    # Reshape's target comes from Shape(x) + an initializer: both are static.
    model = _model(
        onnx_model,
        [
            helper.make_node("Shape", ["x"], ["s"]),
            _tnode("TAdd", ["s", "delta"], ["s2"]),
            _tnode("TReshape", ["x", "target"], ["y"]),
            _tnode("TReshape", ["x", "s2"], ["y2"]),
        ],
        {"x": ("float32", (2, 6))},
        ["y", "y2"],
        initializers={"target": np.array([3, 4], np.int64), "delta": np.array([2, -3], np.int64)},
    )
    mod, params = from_onnx(model)
    assert params == {}  # both shape initializers were consumed statically
    body = mod.main.body
    assert isinstance(body, Tuple)
    assert body.fields[0].type == TensorType((3, 4), "float32")
    assert body.fields[1].type == TensorType((4, 3), "float32")
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    y, y2 = evaluate(mod, [x], params)
    np.testing.assert_array_equal(y, x.reshape(3, 4))
    np.testing.assert_array_equal(y2, x.reshape(4, 3))


def test_calls_over_constants_fold(onnx_model):
    one = helper.make_tensor("one", onnx.TensorProto.FLOAT, [3], [1, 2, 3])
    model = _model(
        onnx_model,
        [
            helper.make_node("Constant", [], ["c"], value=one),
            _tnode("TAdd", ["c", "c"], ["c2"]),
            _tnode("TAdd", ["x", "c2"], ["y"]),
        ],
        {"x": ("float32", (3,))},
        ["y"],
    )
    mod, _ = from_onnx(model)
    body = mod.main.body
    assert isinstance(body, Call) and isinstance(body.args[1], Constant)
    np.testing.assert_array_equal(body.args[1].data, [2, 4, 6])


def test_initializer_arithmetic_is_not_folded_into_constants(onnx_model):
    model = _model(
        onnx_model,
        [_tnode("TAdd", ["w", "w"], ["w2"]), _tnode("TAdd", ["x", "w2"], ["y"])],
        {"x": ("float32", (3,))},
        ["y"],
        initializers={"w": np.ones(3, np.float32)},
    )
    mod, params = from_onnx(model)
    assert list(params) == ["w"]
    assert any(isinstance(p, Var) and p.name == "w" for p in mod.main.params)


def test_multi_output_handler_and_graph_outputs(onnx_model):
    model = _model(
        onnx_model,
        [_tnode("TPair", ["x"], ["a", "b"])],
        {"x": ("float32", (2,))},
        ["b", "a", "x"],
    )
    mod, params = from_onnx(model)
    x = np.array([1.5, -1], np.float32)
    b, a, same = evaluate(mod, [x], params)
    np.testing.assert_array_equal(a, x)
    np.testing.assert_array_equal(b, 2 * x)
    np.testing.assert_array_equal(same, x)


def test_nodes_out_of_order_are_sorted(onnx_model):
    model = _model(
        onnx_model,
        [_tnode("TAdd", ["t", "t"], ["y"]), _tnode("TAdd", ["x", "x"], ["t"])],
        {"x": ("float32", (2,))},
        ["y"],
    )
    mod, params = from_onnx(model)
    (y,) = evaluate(mod, [np.ones(2, np.float32)], params)
    np.testing.assert_array_equal(y, [4, 4])


def test_all_unsupported_ops_are_reported_at_once(onnx_model):
    model = _model(
        onnx_model,
        [
            helper.make_node("NoSuchOp", ["x"], ["a"], name="first_bad"),
            helper.make_node("NoSuchOp", ["a"], ["b"], name="second_bad"),
            helper.make_node("AlsoMissing", ["b"], ["c"], name="third_bad", domain="com.vendor"),
            _tnode("TAdd", ["c", "c"], ["y"]),
        ],
        {"x": ("float32", (2,))},
        ["y"],
        name="my_graph",
        extra_opsets={"com.vendor": 3},
    )
    with pytest.raises(OpNotSupportedError) as err:
        from_onnx(model)
    msg = str(err.value)
    assert "'my_graph'" in msg and "3 node(s)" in msg
    assert "NoSuchOp (domain ai.onnx, opset 17" in msg and "first_bad, second_bad" in msg
    assert "AlsoMissing (domain com.vendor, opset 3)" in msg and "third_bad" in msg
    assert "Supported ONNX ops:" in msg and "Identity" in msg


def test_handler_dtype_exclusion_is_reported_before_converting(onnx_model):
    model = _model(
        onnx_model,
        [_tnode("TAdd", ["x", "x"], ["y"], name="int_add")],
        {"x": ("int32", (2,))},
        ["y"],
    )
    with pytest.raises(OpNotSupportedError, match="input dtype int32.*float32, int64.*int_add"):
        from_onnx(model)
    # the dtype override is taken into account by the check
    mod, _ = from_onnx(model, dtype="int64")
    assert mod.main.params[0].type.dtype == "int64"


def test_domain_not_imported_is_reported(onnx_model):
    model = onnx_model([_tnode("TAdd", ["x", "x"], ["y"])], {"x": ("float32", (2,))}, ["y"])
    with pytest.raises(OpNotSupportedError, match="does not import domain 'ember.test'"):
        from_onnx(model)


def test_shape_errors_from_the_ir_name_the_node(onnx_model):
    model = _model(
        onnx_model,
        [_tnode("TAdd", ["x", "z"], ["y"], name="bad_add")],
        {"x": ("float32", (2,)), "z": ("float32", (3,))},
        ["y"],
    )
    with pytest.raises(FrontendError, match="bad_add"):
        from_onnx(model)


def test_model_local_functions_are_inlined(onnx_model):
    double = helper.make_function(
        "my.funcs",
        "Double",
        ["a"],
        ["b"],
        [helper.make_node("TAdd", ["a", "a"], ["b"], domain=TEST_DOMAIN)],
        [helper.make_opsetid("", 17), helper.make_opsetid(TEST_DOMAIN, 1)],
    )
    model = _model(
        onnx_model,
        [helper.make_node("Double", ["x"], ["y"], domain="my.funcs")],
        {"x": ("float32", (3,))},
        ["y"],
        extra_opsets={"my.funcs": 1},
    )
    model.functions.append(double)
    mod, params = from_onnx(model)
    x = np.array([1, 2, 3], np.float32)
    np.testing.assert_array_equal(evaluate(mod, [x], params)[0], 2 * x)


def test_sparse_initializers_become_dense_params(onnx_model):
    model = _model(
        onnx_model, [_tnode("TAdd", ["x", "w"], ["y"])], {"x": ("float32", (2, 3))}, ["y"]
    )
    sparse = helper.make_sparse_tensor(
        onnx.numpy_helper.from_array(np.array([5.0, 7.0], np.float32), "w"),
        onnx.numpy_helper.from_array(np.array([1, 5], np.int64), "w_idx"),
        [2, 3],
    )
    model.graph.sparse_initializer.append(sparse)
    mod, params = from_onnx(model)
    np.testing.assert_array_equal(params["w"], [[0, 5, 0], [0, 0, 7]])


def test_declared_output_dtype_must_match(onnx_model):
    model = _model(onnx_model, [_tnode("TAdd", ["x", "x"], ["y"])], {"x": ("float32", (2,))}, ["y"])
    model.graph.output[0].type.tensor_type.elem_type = onnx.TensorProto.INT32
    with pytest.raises(FrontendError, match="output 'y' is declared int32"):
        from_onnx(model)


def test_deep_graphs_import_in_linear_time(onnx_model):
    depth = 3000
    nodes = [
        _tnode("TAdd", ["x" if i == 0 else f"t{i}", "one"], [f"t{i + 1}"]) for i in range(depth)
    ]
    model = _model(
        onnx_model,
        nodes,
        {"x": ("float32", (2,))},
        [f"t{depth}"],
        initializers={"one": np.ones(2, np.float32)},
    )
    import time

    start = time.perf_counter()
    mod, params = from_onnx(model)
    assert time.perf_counter() - start < 20  # quadratic walks would take minutes
    (y,) = evaluate(mod, [np.zeros(2, np.float32)], params)
    np.testing.assert_array_equal(y, [depth, depth])


def test_node_view_decodes_every_attribute_kind():
    t = onnx.numpy_helper.from_array(np.arange(4, dtype=np.int32).reshape(2, 2), "t")
    node = helper.make_node(
        "Anything",
        ["a", "", "c"],
        ["y", ""],
        name="n1",
        f=1.5,
        i=3,
        s="hello",
        t=t,
        fs=[1.0, 2.0],
        is_=[1, 2, 3],
        ss=["a", "b"],
        ts=[t, t],
        g=helper.make_graph([], "sub", [], []),
    )
    x = Var("a", TensorType((2,), "float32"))
    view = NodeView(node, [x, None, x], opset=13, index=0)
    assert view.attr("f") == 1.5 and view.attr("i") == 3 and view.attr("s") == "hello"
    assert view.attr("fs") == [1.0, 2.0] and view.attr("is_") == [1, 2, 3]
    assert view.attr("ss") == ["a", "b"]
    np.testing.assert_array_equal(view.attr("t"), [[0, 1], [2, 3]])
    assert view.attr("t").dtype == np.int32 and len(view.attr("ts")) == 2
    assert isinstance(view.attr("g"), onnx.GraphProto)
    assert view.attr("missing", 7) == 7 and view.attr("missing", None) is None
    assert view.input(1) is None and view.input(5) is None and view.input(2) is x
    assert view.output_used(0) and not view.output_used(1) and not view.output_used(2)
    assert view.num_outputs == 2 and view.name == "n1" and view.opset == 13
    with pytest.raises(FrontendError, match="node 'n1' \\(Anything, opset 13\\).*'nope'"):
        view.attr("nope")


def test_unnamed_nodes_get_a_stable_name():
    view = NodeView(helper.make_node("Relu", ["x"], ["y"]), [None], opset=13, index=4)
    assert view.name == "Relu_4"


def test_const_value_sees_through_initializers_and_computations():
    w = Var("w", TensorType((3,), "int64"))
    ctx = ConvertContext("g", {"": 17}, {w: np.array([1, 2, 3], np.int64)})
    doubled = call("add", w, w)
    x = Var("x", TensorType((3,), "int64"))
    np.testing.assert_array_equal(ctx.const_value(doubled), [2, 4, 6])
    assert ctx.const_value(call("add", doubled, x)) is None
    assert ctx.const_value(None) is None and ctx.is_const(w) and not ctx.is_const(x)
    with pytest.raises(FrontendError, match="the axes is required but the input is omitted"):
        ctx.require_const(None, "the axes")
    # folding keeps initializer arithmetic (params stay params), folds pure constants
    assert ctx.fold(doubled) is doubled
    folded = ctx.fold(call("add", Constant(np.ones(3, np.int64)), Constant(np.ones(3, np.int64))))
    assert isinstance(folded, Constant)
    np.testing.assert_array_equal(folded.data, [2, 2, 2])


def test_fold_does_not_materialise_huge_broadcasts():
    ctx = ConvertContext("g", {"": 17})
    big = call("broadcast_to", Constant(np.array(1.0, np.float32)), shape=(1024, 1024))
    assert ctx.fold(big) is big
    small = call("broadcast_to", Constant(np.array(1.0, np.float32)), shape=(4, 4))
    assert isinstance(ctx.fold(small), Constant)


def test_import_is_deterministic_and_leaves_the_model_untouched(onnx_model):
    model = _model(
        onnx_model,
        [
            helper.make_node("Shape", ["x"], ["s"]),
            _tnode("TReshape", ["x", "s"], ["r"]),
            _tnode("TAdd", ["r", "w"], ["y"]),
            helper.make_node("Dropout", ["y"], ["z", "m"]),
        ],
        {"x": ("float32", ("n", 3))},
        ["z", "m"],
        initializers={"w": np.ones(3, np.float32)},
    )
    before = model.SerializeToString()
    first, p1 = from_onnx(model, shape={"n": 2})
    second, p2 = from_onnx(model, shape={"n": 2})
    assert model.SerializeToString() == before
    assert str(first) == str(second)
    assert list(p1) == list(p2) == ["w"]
