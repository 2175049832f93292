"""Graph planning: graph JSON structure, constant lifting, kernel naming, storage reuse."""

import numpy as np
import pytest

from ember.formats.graph_json import OP_KERNEL, OP_NULL
from ember.ir import (
    Attrs,
    Call,
    Function,
    IRModule,
    OpDef,
    OpPattern,
    TensorType,
    Tuple,
    TupleGetItem,
    TupleType,
    Var,
    call,
    const,
)
from ember.ir.op import OPS, register_op
from ember.lowering.graph_plan import plan_graph


@pytest.fixture(scope="module", autouse=True)
def _ops():
    names = ["tplan.add", "tplan.relu", "tplan.split2"]
    register_op(
        OpDef("tplan.add", 2, lambda t, a: t[0], lambda x, a: x[0] + x[1], OpPattern.BROADCAST),
        override=True,
    )
    register_op(
        OpDef("tplan.relu", 1, lambda t, a: t[0], lambda x, a: np.maximum(x[0], 0)),
        override=True,
    )
    register_op(
        OpDef(
            "tplan.split2",
            1,
            lambda t, a: TupleType((t[0], t[0])),
            lambda x, a: (x[0], -x[0]),
        ),
        override=True,
    )
    yield
    for n in names:
        OPS.unregister(n)


T = TensorType((4, 8), "float32")


def _group(body_fn, n_args: int) -> Function:
    ps = tuple(Var(f"a{i}", T) for i in range(n_args))
    return Function(ps, body_fn(*ps), Attrs({"Primitive": 1}))


def test_chain_reuses_storage_and_names_kernels():
    x = Var("x", T)
    relu = _group(lambda a: call("tplan.relu", a), 1)
    y = x
    for _ in range(4):
        y = Call(relu, (y,))
    plan = plan_graph(IRModule.from_expr(Function((x,), y)))
    g = plan.graph
    assert [n.op for n in g.nodes] == [OP_NULL] + [OP_KERNEL] * 4
    assert [n.name for n in g.nodes[1:]] == [
        "ember_tplan_relu",
        "ember_tplan_relu_1",
        "ember_tplan_relu_2",
        "ember_tplan_relu_3",
    ]
    # the four identical groups share one kernel
    assert {n.attrs.func_name for n in g.nodes[1:] if n.attrs} == {"ember_tplan_relu"}
    assert list(plan.kernels) == ["ember_tplan_relu"]
    # x owns storage 0; the chain ping-pongs between two buffers; the output is pinned
    sids = list(g.storage_id)
    assert sids[0] == 0
    assert len(set(sids[1:4])) == 2
    assert sids[4] not in sids[:4]


def test_constants_lifted_to_params_and_scalars_inlined():
    x = Var("x", T)
    bias = const(np.arange(32, dtype="float32").reshape(4, 8))
    one = const(np.ones((1, 1), "float32"))
    a = Var("a", T)
    grp = Function(
        (a,), call("tplan.add", call("tplan.add", a, bias), one), Attrs({"Primitive": 1})
    )
    y = Call(grp, (x,))
    plan = plan_graph(IRModule.from_expr(Function((x,), y)))
    assert list(plan.params) == ["const_0"]
    np.testing.assert_array_equal(plan.params["const_0"], bias.data)
    kernel = next(iter(plan.kernels.values()))
    assert len(kernel.params) == 2  # x and the lifted bias; the scalar stays inside
    assert plan.graph.nodes[2].attrs is not None and plan.graph.nodes[2].attrs.num_inputs == 2


def test_model_params_kept_and_tuple_outputs():
    x = Var("x", T)
    w = Var("w", T)
    split = _group(lambda a: call("tplan.split2", a), 1)
    add = _group(lambda a, b: call("tplan.add", a, b), 2)
    s = Call(split, (Call(add, (x, w)),))
    out = Tuple((TupleGetItem(s, 1), TupleGetItem(s, 0)))
    params = {"w": np.ones((4, 8), "float32"), "unused": np.zeros(3, "float32")}
    plan = plan_graph(IRModule.from_expr(Function((x, w), out)), params)
    g = plan.graph
    assert list(plan.params) == ["w"]
    assert g.input_names() == ["x", "w"]
    assert [(h.node_id, h.index) for h in g.heads] == [(3, 1), (3, 0)]
    assert g.nodes[3].num_outputs == 2
    # both outputs are pinned: distinct storage, not shared with anything else
    outs = g.output_entry_ids()
    assert len({g.storage_id[e] for e in outs}) == 2


def test_bare_op_calls_are_wrapped():
    x = Var("x", T)
    y = call("tplan.relu", call("tplan.relu", x))
    plan = plan_graph(IRModule.from_expr(Function((x,), y)))
    assert len(plan.graph.nodes) == 3 and len(plan.kernels) == 1
    for f in plan.kernels.values():
        assert f.attrs["Primitive"] == 1
