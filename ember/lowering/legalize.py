"""Legalization: rewrite graph-IR ops that have a legalizer into simpler ops, and check
that every remaining op can be lowered, reporting all that cannot at once."""

from __future__ import annotations

from ember.errors import OpNotSupportedError
from ember.ir.expr import Call, Expr, Function, post_order, rewrite
from ember.ir.module import IRModule
from ember.ir.op import OpDef
from ember.lowering.widen_half import widen_half
from ember.ops.registry import find_legalizer, has_compute

#: legalizers may produce ops that are legalized again; this bounds the rounds.
MAX_ROUNDS = 8


def _legalize_once(body: Expr) -> tuple[Expr, bool]:
    changed = False

    def rule(node: Expr, _new: object) -> Expr | None:
        nonlocal changed
        if isinstance(node, Call) and isinstance(node.op, OpDef):
            fn = find_legalizer(node.op.name)
            if fn is not None:
                out = fn(node)
                changed = changed or out is not node
                return out
        return None

    return rewrite(body, rule), changed


def legalize(mod: IRModule) -> IRModule:
    """Apply registered legalizers to ``main`` until none applies (after ``widen_half``:
    float16/bfloat16 anchors compute in float32)."""
    main = mod.main
    body = widen_half(main.body)
    for _ in range(MAX_ROUNDS):
        body, changed = _legalize_once(body)
        if not changed:
            break
    if body is main.body:
        return mod
    return mod.with_function("main", Function(main.params, body, main.attrs))


def check_lowerable(mod: IRModule) -> None:
    """Raise OpNotSupportedError listing every op of ``main`` with no implementation."""
    missing: dict[str, list[str]] = {}
    calls = [n for n in post_order(mod.main.body) if isinstance(n, Call)]
    for node in calls:
        if isinstance(node.op, OpDef) and not has_compute(node.op.name):
            missing.setdefault(node.op.name, []).append(node.name or "<unnamed>")
    if missing:
        lines = [
            f"  {op}: nodes {', '.join(sorted(set(names))[:8])}"
            + (" ..." if len(set(names)) > 8 else "")
            for op, names in sorted(missing.items())
        ]
        raise OpNotSupportedError(
            f"{len(missing)} op(s) of model '{mod.attrs.get('name', 'main')}' have no code "
            "generator implementation yet:\n"
            + "\n".join(lines)
            + "\nRegister one with ember.ops.register_compute or register_legalize."
        )
