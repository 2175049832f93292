"""Pass infrastructure: named passes with an opt level, a registry, PassContext, Sequential.

A :class:`Pass` is a pure ``IRModule -> IRModule`` function with a name and the lowest
``opt_level`` at which it runs. :class:`Sequential` runs a list of passes under a
:class:`PassContext`, which decides what runs (``opt_level``, ``required``, ``disabled``),
verifies the IR after every pass when ``debug`` is set, and collects a :class:`PassReport`
(pass, whether it ran, node counts before/after, seconds). Example::

    ctx = PassContext(opt_level=2, disabled=("simplify",), debug=True)
    mod = Sequential([get_pass("fold_constant"), get_pass("simplify")])(mod, ctx)
    print(ctx.report.table())

Built-in passes and their opt levels (a pass runs when ``level <= ctx.opt_level``):

=========================  =====
fold_constant              1
dead_code_elimination      1
eliminate_common_subexpr   2
simplify                   2
convert_layout             1  (joins the pipeline when convert_layout.chosen_layout is
                              not NCHW: config key ``convert_layout``, required, or the
                              default of DEFAULT_LEVEL; standard_pipeline)
fuse_ops                   3  (run by ember.lower at every level, config key
                              ``fuse_ops.max_depth``; depth 1 at level 0 or when disabled)
=========================  =====

Register a new pass with ``register_pass(Pass("my_pass", 2, fn))``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ember.errors import IRError
from ember.ir.module import IRModule
from ember.ir.verify import verify
from ember.support.registry import Registry
from ember.transform._util import count_nodes
from ember.transform.convert_layout import chosen_layout, convert_layout
from ember.transform.dead_code_elimination import dead_code_elimination
from ember.transform.eliminate_common_subexpr import eliminate_common_subexpr
from ember.transform.fold_constant import fold_constant
from ember.transform.fuse_ops import DEFAULT_MAX_DEPTH, fuse_ops
from ember.transform.qdq import fuse_qdq
from ember.transform.simplify import simplify
from ember.transform.sink_reshape import sink_reshape

PassFn = Callable[[IRModule, "PassContext"], IRModule]


@dataclass(frozen=True)
class PassRecord:
    """One line of a pass report."""

    name: str
    ran: bool
    nodes_before: int
    nodes_after: int
    seconds: float


@dataclass
class PassReport:
    """The passes a PassContext ran, in order, with node counts and timings."""

    records: list[PassRecord] = field(default_factory=list)

    def table(self, timings: bool = True) -> str:
        """A text table; deterministic when ``timings`` is False."""
        lines = [f"{'pass':<28} {'ran':<4} {'nodes':>15}" + ("  seconds" if timings else "")]
        for r in self.records:
            nodes = f"{r.nodes_before} -> {r.nodes_after}" if r.ran else "-"
            line = f"{r.name:<28} {'yes' if r.ran else 'no':<4} {nodes:>15}"
            if timings:
                line += f"  {r.seconds:.4f}" if r.ran else "  -"
            lines.append(line)
        return "\n".join(lines)

    def total_seconds(self) -> float:
        """Time spent in all passes that ran."""
        return sum(r.seconds for r in self.records)


@dataclass
class PassContext:
    """What to run and how: opt level, forced/skipped passes, debug verification, options
    (e.g. ``{"fuse_ops.max_depth": 64}``) and the report of what ran."""

    opt_level: int = 2
    required: Sequence[str] = ()
    disabled: Sequence[str] = ()
    debug: bool = False
    config: dict[str, Any] = field(default_factory=dict)
    report: PassReport = field(default_factory=PassReport)

    def __post_init__(self) -> None:
        clash = sorted(set(self.required) & set(self.disabled))
        if clash:
            raise IRError(f"passes {clash} are both required and disabled; pick one")
        for name in (*self.required, *self.disabled):
            PASSES.get(name)  # unknown names raise, listing the known passes

    def enabled(self, p: Pass) -> bool:
        """True if ``p`` runs in this context."""
        if p.name in self.disabled:
            return False
        return p.name in self.required or p.opt_level <= self.opt_level


@dataclass(frozen=True)
class Pass:
    """A named, pure module transformation that runs from ``opt_level`` upwards."""

    name: str
    opt_level: int
    fn: PassFn
    doc: str = ""

    def __call__(self, mod: IRModule, ctx: PassContext | None = None) -> IRModule:
        """Run this pass alone (regardless of the context's opt level)."""
        return self.fn(mod, ctx or PassContext())


PASSES: Registry[Pass] = Registry("pass")


def register_pass(p: Pass, override: bool = False) -> Pass:
    """Add a pass to the registry (duplicates raise unless ``override``)."""
    return PASSES.register(p.name, p, override=override)


def get_pass(name: str) -> Pass:
    """Look up a registered pass by name."""
    return PASSES.get(name)


def module_pass(fn: Callable[[IRModule], IRModule], opt_level: int, name: str = "") -> Pass:
    """Wrap a plain ``IRModule -> IRModule`` function as a Pass (not registered)."""
    doc = (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else ""
    return Pass(name or fn.__name__, opt_level, lambda mod, _ctx: fn(mod), doc)


@dataclass(frozen=True)
class Sequential:
    """Passes run in order under a context. Without an explicit context, one with this
    sequence's ``opt_level`` is used."""

    passes: Sequence[Pass]
    opt_level: int = 2
    name: str = "sequential"

    def __call__(self, mod: IRModule, ctx: PassContext | None = None) -> IRModule:
        """Run the enabled passes, recording each one in ``ctx.report``."""
        ctx = ctx or PassContext(opt_level=self.opt_level)
        if ctx.debug:
            _verify(mod, "the input")
        for p in self.passes:
            if not ctx.enabled(p):
                ctx.report.records.append(PassRecord(p.name, False, 0, 0, 0.0))
                continue
            before = count_nodes(mod)
            start = time.perf_counter()
            mod = p.fn(mod, ctx)
            seconds = time.perf_counter() - start
            if not isinstance(mod, IRModule):
                raise IRError(f"pass '{p.name}' returned {type(mod).__name__}, not an IRModule")
            ctx.report.records.append(PassRecord(p.name, True, before, count_nodes(mod), seconds))
            if ctx.debug:
                _verify(mod, f"pass '{p.name}'")
        return mod


def _verify(mod: IRModule, where: str) -> None:
    try:
        verify(mod)
    except IRError as err:
        raise IRError(f"IR is ill-formed after {where}: {err}") from None


def _fuse(mod: IRModule, ctx: PassContext) -> IRModule:
    return fuse_ops(mod, int(ctx.config.get("fuse_ops.max_depth", DEFAULT_MAX_DEPTH)))


def _builtin(fn: Callable[[IRModule], IRModule], level: int) -> Pass:
    return register_pass(module_pass(fn, level))


FOLD_CONSTANT = _builtin(fold_constant, 1)
DEAD_CODE_ELIMINATION = _builtin(dead_code_elimination, 1)
ELIMINATE_COMMON_SUBEXPR = _builtin(eliminate_common_subexpr, 2)
SIMPLIFY = _builtin(simplify, 2)
SINK_RESHAPE = _builtin(sink_reshape, 2)  # after legalization (ember.driver.pipeline)
FUSE_QDQ = register_pass(
    Pass(
        "fuse_qdq",
        1,
        lambda mod, ctx: fuse_qdq(mod, bool(ctx.config.get("fuse_qdq.int8_kernels", True))),
        "quantized chains as integer kernels (config key fuse_qdq.int8_kernels)",
    )
)
FUSE_OPS = register_pass(Pass("fuse_ops", 3, _fuse, "operator fusion into Primitive functions"))


def _layout(ctx: PassContext) -> str:
    return chosen_layout(ctx.config, "convert_layout" in ctx.required, ctx.opt_level)


def _convert_layout(mod: IRModule, ctx: PassContext) -> IRModule:
    return convert_layout(mod, _layout(ctx))


CONVERT_LAYOUT = register_pass(
    Pass("convert_layout", 1, _convert_layout, "NHWC chains (config key convert_layout)")
)

#: the standard optimisation pipeline (without fusion), in order.
STANDARD_PIPELINE: tuple[str, ...] = (
    "fuse_qdq",
    "fold_constant",
    "simplify",
    "fold_constant",
    "eliminate_common_subexpr",
    "dead_code_elimination",
)


def standard_pipeline(ctx: PassContext) -> tuple[str, ...]:
    """STANDARD_PIPELINE, with convert_layout before common subexpression elimination when
    ``ctx`` selects a layout other than NCHW (convert_layout.chosen_layout)."""
    if _layout(ctx) == "NCHW":
        return STANDARD_PIPELINE
    at = STANDARD_PIPELINE.index("eliminate_common_subexpr")
    return (*STANDARD_PIPELINE[:at], "convert_layout", *STANDARD_PIPELINE[at:])


def pipeline(names: Iterable[str | Pass], opt_level: int = 2) -> Sequential:
    """A Sequential of passes given as Pass objects or registered names."""
    return Sequential([n if isinstance(n, Pass) else get_pass(n) for n in names], opt_level)


class PassManager:
    """A pipeline plus the context it runs in; keeps the report of the last run.

    Example::

        pm = PassManager(opt_level=3, disabled=["eliminate_common_subexpr"], debug=True)
        mod = pm.run(mod)
        print(pm.report.table())
    """

    def __init__(
        self,
        passes: Iterable[str | Pass] = STANDARD_PIPELINE,
        opt_level: int = 2,
        required: Sequence[str] = (),
        disabled: Sequence[str] = (),
        debug: bool = False,
        config: dict[str, Any] | None = None,
    ) -> None:
        self.sequential = pipeline(passes, opt_level)
        self.opt_level = opt_level
        self.required = tuple(required)
        self.disabled = tuple(disabled)
        self.debug = debug
        self.config = dict(config or {})
        self.report = PassReport()

    def context(self) -> PassContext:
        """A fresh context with this manager's settings."""
        return PassContext(
            self.opt_level, self.required, self.disabled, self.debug, dict(self.config)
        )

    def run(self, mod: IRModule) -> IRModule:
        """Run the pipeline on ``mod``; ``self.report`` describes this run."""
        ctx = self.context()
        out = self.sequential(mod, ctx)
        self.report = ctx.report
        return out
