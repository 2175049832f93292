"""partition: pattern tables annotate, adjacent regions merge without cycles, regions are
outlined as functions marked with their kind."""

import pytest

from ember.ir import Call, Function, IRModule, TensorType, Var, call, post_order
from ember.transform.partition import creates_cycle, partition, region_kind
from ember.transform.partition_patterns import (
    PATTERN_TABLES,
    Pattern,
    dtype_is,
    get_pattern_table,
    register_pattern_table,
)

T = TensorType((4, 8), "float32")


@pytest.fixture()
def tables():
    register_pattern_table(
        "kx",
        [
            Pattern("kx.add", ("add",), dtype_is("float32")),
            Pattern("kx.mul", ("multiply",), dtype_is("float32")),
            Pattern("kx.add_relu", ("add", "relu"), dtype_is("float32")),
        ],
    )
    register_pattern_table("ky", [Pattern("ky.add", ("add",)), Pattern("ky.exp", ("exp",))])
    yield
    PATTERN_TABLES.unregister("kx")
    PATTERN_TABLES.unregister("ky")


def regions(mod: IRModule) -> list[tuple[str, list[str], str]]:
    out = []
    for node in post_order(mod.main.body):
        if isinstance(node, Call) and isinstance(node.op, Function):
            ops = [c.op.name for c in post_order(node.op.body) if isinstance(c, Call)]
            out.append((region_kind(node.op), ops, node.op.attrs["Composite"]))
    return out


def test_longest_pattern_wins_and_adjacent_units_merge(tables):
    x, y = Var("x", T), Var("y", T)
    body = call("relu", call("add", call("multiply", x, y), y))
    got = regions(partition(IRModule.from_expr(Function((x, y), body)), ["kx"]))
    assert got == [("kx", ["multiply", "add", "relu"], "kx.mul,kx.add_relu")]


def test_priority_order_and_host_rest(tables):
    x = Var("x", T)
    body = call("exp", call("add", x, x))
    got = regions(partition(IRModule.from_expr(Function((x,), body)), ["ky", "kx"]))
    assert got == [("ky", ["add", "exp"], "ky.add,ky.exp")]
    got = regions(partition(IRModule.from_expr(Function((x,), body)), ["kx", "ky"]))
    assert [(k, ops) for k, ops, _ in got] == [("kx", ["add"]), ("ky", ["exp"])]


def test_predicate_refuses_other_dtypes(tables):
    x = Var("x", TensorType((4,), "int32"))
    mod = IRModule.from_expr(Function((x,), call("add", x, x)))
    assert regions(partition(mod, ["kx"])) == []


def test_diamond_does_not_merge_into_a_cycle(tables):
    # a = x * y (kx); h = exp(a) (host); b = a + h (kx): merging a and b would put the
    # host op between two halves of one region, a cycle; they stay two regions.
    x, y = Var("x", T), Var("y", T)
    a = call("multiply", x, y)
    b = call("add", a, call("exp", a))
    mod = partition(IRModule.from_expr(Function((x, y), b)), ["kx"])
    got = regions(mod)
    assert [(k, ops) for k, ops, _ in got] == [("kx", ["multiply"]), ("kx", ["add"])]
    calls = [n for n in post_order(mod.main.body) if isinstance(n, Call)]
    host = [c for c in calls if not isinstance(c.op, Function)]
    assert [c.op.name for c in host] == ["exp"]


def test_creates_cycle_sees_a_path_back():
    x = Var("x", T)
    a = call("exp", x)
    h = call("negative", a)
    b = call("add", a, h)
    users = {id(a): [h, b], id(h): [b]}
    assert creates_cycle([h], {id(a), id(b)}, users)
    assert not creates_cycle([h], {id(a)}, users)


def test_no_kinds_or_no_table_is_identity(tables):
    x = Var("x", T)
    mod = IRModule.from_expr(Function((x,), call("add", x, x)))
    assert partition(mod, []) is mod
    assert partition(mod, ["nobody"]) is mod
    assert get_pattern_table("nobody").patterns == ()


def test_merge_false_keeps_one_pattern_per_region(tables):
    register_pattern_table(
        "kz", [Pattern("kz.add", ("add",)), Pattern("kz.relu", ("relu",))], merge=False
    )
    try:
        x = Var("x", T)
        mod = IRModule.from_expr(Function((x,), call("relu", call("add", x, x))))
        got = regions(partition(mod, ["kz"]))
        assert [(k, ops) for k, ops, _ in got] == [("kz", ["add"]), ("kz", ["relu"])]
    finally:
        PATTERN_TABLES.unregister("kz")
