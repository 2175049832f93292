"""Stage 3b: the bodies of control ops (If, Loop, Scan) compiled like models of their own.

Each body (an ir Function held by a ``control.*`` call) goes through ``ember.lower`` for
the same target with the AOT executor: optimized, fused into kernels, its workspace planned
statically, and a run function written that calls its kernels in order. Nested control
flow compiles the same way, inside out. The call then records a
:class:`~ember.ops.control.BodyProgram` per body and takes the body's constants as extra
arguments, and the body's kernels and run function join the model's PrimFuncs, tagged
:data:`~ember.lowering.aot.HELPER_ATTR` (called by a kernel, not by an executor). The
control op's own kernel (``ember.ops.control``) is then one generated loop or branch
around those calls, which both executors see as an ordinary kernel.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import replace

from ember.driver.lowered import Lowered
from ember.errors import CompileError
from ember.ir.expr import Call, Constant, Expr, Function, Var, rewrite
from ember.ir.module import IRModule
from ember.ir.op import OpDef
from ember.ir.ops.control import PROGRAMS_ATTR
from ember.lowering.aot import HELPER_ATTR, UNPACKED_SUFFIX
from ember.ops.control import BodyProgram
from ember.target import Target
from ember.tir import PrimFunc
from ember.transform import PassContext

#: the body attributes of each control op, in the order of its programs.
BODIES: dict[str, tuple[str, ...]] = {
    "control.if": ("then_branch", "else_branch"),
    "control.loop": ("body",),
    "control.scan": ("body",),
}

LowerFn = Callable[..., Lowered]


def compile_control(
    mod: IRModule, lower: LowerFn, target: Target, ctx: PassContext, mod_name: str
) -> tuple[IRModule, tuple[PrimFunc, ...]]:
    """``mod`` with every control op's bodies compiled (see the module docstring), and the
    PrimFuncs of those bodies; ``lower`` is ``ember.lower`` (passed in: it calls this)."""
    helpers: list[PrimFunc] = []
    names = (f"{mod_name}_ctl{k}" for k in itertools.count())

    def rule(node: Expr, _new: object) -> Expr | None:
        if not isinstance(node, Call) or not isinstance(node.op, OpDef):
            return None
        bodies = BODIES.get(node.op.name)
        if bodies is None or node.attrs[PROGRAMS_ATTR] is not None:
            return None
        if target.hook("relay_to_runtime"):
            raise CompileError(
                f"target '{target}' compiles kernels through its relay_to_runtime hook; the "
                f"bodies of control flow ({node.op.name}, node '{node.name}') need kernels "
                "in loop IR; use the 'c' or 'llvm' target"
            )
        args = list(node.args)
        programs = []
        for attr in bodies:
            prog, consts, funcs = _compile_body(
                node.attrs[attr], lower, target, ctx, names, len(args)
            )
            programs.append(prog)
            args += consts
            helpers.extend(funcs)
        attrs = node.attrs.replace(**{PROGRAMS_ATTR: tuple(programs)})
        return Call(node.op, tuple(args), attrs, name=node.name)

    main = mod.main
    body = rewrite(main.body, rule)
    if body is main.body:
        return mod, ()
    return mod.with_function("main", Function(main.params, body, main.attrs)), tuple(helpers)


def _compile_body(
    func: Function,
    lower: LowerFn,
    target: Target,
    ctx: PassContext,
    names: Iterator[str],
    const_start: int,
) -> tuple[BodyProgram, list[Constant], list[PrimFunc]]:
    """One body through ``lower`` (AOT): its program, constants and PrimFuncs."""
    params = tuple(Var(f"arg{i}", p.type) for i, p in enumerate(func.params))
    by_id = {id(p): q for p, q in zip(func.params, params, strict=True)}
    body = rewrite(func.body, lambda n, _new: by_id.get(id(n)))
    name = next(names)
    sub_ctx = PassContext(ctx.opt_level, ctx.required, ctx.disabled, ctx.debug, dict(ctx.config))
    lowered = lower(
        IRModule.from_expr(Function(params, body)), target, None, "aot", name, pass_context=sub_ctx
    )
    aot = lowered.aot
    if aot is None or lowered.external:
        raise CompileError(
            f"control flow body '{name}': it compiled to artifacts of an external back end; "
            "the bodies of If, Loop and Scan need kernels in loop IR"
        )
    if aot.input_names != tuple(p.name for p in params):
        raise CompileError(f"control flow body '{name}': its inputs were reordered (ember bug)")
    consts = [Constant(lowered.plan.params[n]) for n in aot.param_names]
    prog = BodyProgram(
        aot.run_symbol + UNPACKED_SUFFIX,
        len(params),
        aot.num_outputs,
        const_start,
        len(consts),
        aot.memory.size,
    )
    funcs = [_helper(f) for f in (*aot.kernels, aot.run_func)]
    return prog, consts, funcs


def _helper(func: PrimFunc) -> PrimFunc:
    """``func`` tagged as called by another kernel (its name is final; see HELPER_ATTR)."""
    return replace(func, attrs={**func.attrs, HELPER_ATTR: True})
