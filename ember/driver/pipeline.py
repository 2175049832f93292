"""lower() and build(): the compilation pipeline, graph IR -> Lowered -> ArtifactSet.

The stages, in order (each consumes the previous one's output and nothing else):

1. optimize    bind parameters as constants, run the graph passes under the PassContext
2. constants   the target's ``constant_updater`` hook may rewrite the bound constants
   partition   a composite target's external kinds claim regions (ember.transform.partition)
3. legalize    rewrite ops that are lowered through simpler ops; fail listing every op
               that has no implementation, before any lowering work (regions untouched);
               the bodies of If/Loop/Scan compile as models of their own (ember.driver.control);
               then ``sink_reshape`` (opt level 2) moves the legalized products' reshapes
               after their elementwise epilogues
4. fuse        group ops into primitive functions (the ``fuse_ops`` pass; its depth is the
               context's config key ``fuse_ops.max_depth``; opt level 0 or a disabled
               ``fuse_ops`` puts every op in its own group)
5. plan        graph JSON, storage plan, lifted parameters, one kernel per distinct group
6. lower       each kernel to loop IR (the target's ``relay_to_tir`` hook, or ember.ops'
               computes with the schedules registered for the target's keys); a
               ``relay_to_runtime`` hook compiles its kernels to artifacts itself; a
               region of an external kind goes through that kind's hooks (ember.driver.regions)
   -> Lowered  (printable, reusable)
7. codegen     ``Lowered.compile()``: loop IR to artifacts through ``tir_to_runtime``
8. metadata    graph.json, params.bin and metadata.json as ``metadata`` artifacts

Example::

    lowered = ember.lower(mod, "c -mcpu=native", params)
    print(lowered.as_text())          # fused IR, graph, every kernel's loop IR
    artifacts = lowered.compile()     # the same as ember.build(mod, "c -mcpu=native", params)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

import numpy as np
from tqdm import tqdm

from ember.driver.control import compile_control
from ember.driver.executor import Executor
from ember.driver.lowered import Lowered, as_artifacts
from ember.driver.regions import lower_region
from ember.errors import EmberValueError
from ember.ir.expr import Function
from ember.ir.module import IRModule
from ember.ir.verify import verify
from ember.lowering.aot import build_aot
from ember.lowering.graph_plan import plan_graph
from ember.lowering.graph_scratch import plan_graph_scratch
from ember.lowering.legalize import check_lowerable, legalize
from ember.lowering.lower_group import lower_group
from ember.ops.nn_conv_winograd import winograd_scope
from ember.ops.nn_depthwise_kernel import depthwise_kernel_scope
from ember.ops.registry import legalize_scope
from ember.runtime.artifact import Artifact
from ember.runtime.artifact_set import ArtifactSet
from ember.runtime.registry import get_global_func
from ember.target import Target
from ember.tir import PrimFunc
from ember.transform import PassContext, Sequential, fold_constant, get_pass, optimize
from ember.transform.fuse_ops import DEFAULT_MAX_DEPTH
from ember.transform.partition import partition, region_kind


def lower(
    mod: IRModule,
    target: str | Target = "c",
    params: Mapping[str, np.ndarray] | None = None,
    executor: str | Executor | None = None,
    mod_name: str = "default",
    opt_level: int = 2,
    progress: bool = False,
    pass_context: PassContext | None = None,
) -> Lowered:
    """Run stages 1-6 (see the module docstring); ``pass_context`` overrides ``opt_level``;
    ``executor`` defaults to the target's ``-executor`` option, else ``graph``."""
    tgt = Target.create(target)
    ex = Executor.create(executor if executor is not None else tgt.attrs.get("executor", "graph"))
    if not mod_name.isidentifier():
        raise EmberValueError(f"mod_name must be a C identifier, got {mod_name!r}")
    ctx = pass_context if pass_context is not None else PassContext(opt_level=opt_level)
    if "llvm" in tgt.keys and "fuse_qdq.int8_kernels" not in ctx.config:
        # the int8 layer kernels are C source: LLVM targets keep the portable int32 path
        config = {**ctx.config, "fuse_qdq.int8_kernels": False}
        ctx = PassContext(ctx.opt_level, ctx.required, ctx.disabled, ctx.debug, config, ctx.report)
    if "convert_layout" not in ctx.config and not _channels_last_host(tgt):
        # hooks and external kinds see the convolutions as imported (NCHW); NHWC chains are
        # measured on x86 with AVX2 or wider only
        config = {**ctx.config, "convert_layout": "NCHW"}
        ctx = PassContext(ctx.opt_level, ctx.required, ctx.disabled, ctx.debug, config, ctx.report)
    verify(mod)
    mod = optimize(mod, params, ctx=ctx)  # 1
    mod = _update_constants(mod, tgt)  # 2
    mod = _partition(mod, tgt)  # before legalize: external kinds see the ops as imported
    with winograd_scope(tgt, ctx.config), legalize_scope(tgt):  # target-specific forms
        mod = fold_constant(legalize(mod))  # 3
    mod = Sequential([get_pass("sink_reshape")])(mod, ctx)  # 3c: epilogues join products
    mod, helpers = compile_control(mod, lower, tgt, ctx, mod_name)  # 3b: If/Loop/Scan bodies
    check_lowerable(mod)
    mod = _fuse(mod, ctx)  # 4
    plan = plan_graph(mod)  # 5
    with depthwise_kernel_scope(ctx.config):  # nn.depthwise_kernel: False keeps loop IR
        funcs, external = _lower_kernels(plan.kernels, tgt, progress)  # 6
    funcs = (*funcs, *helpers)
    alignment = max(64, tgt.cpu.vector_bits // 8)
    aot = None
    if ex.kind == "graph":
        # kernels' scratch: one buffer of the graph executor instead of a heap block per call
        graph, funcs = plan_graph_scratch(plan.graph, funcs, alignment)
        plan = replace(plan, graph=graph)
    elif ex.kind == "aot":
        # regions' external kernels have host stubs (ordinary kernels); a whole-target
        # relay_to_runtime hook's kernels are called through call_packed
        if external and tgt.hook("relay_to_runtime") and ex.interface_api == "c":
            raise EmberValueError(
                f"executor '{ex}': target '{tgt}' compiled kernels through its "
                "relay_to_runtime hook; the run function calls them through the runtime "
                "(call_packed), which the C interface has not; use -interface-api=packed"
            )
        aot = build_aot(plan.graph, plan.params, funcs, mod_name, alignment, ex.calling_convention)
    return Lowered(tgt, ex, mod_name, mod, plan, funcs, external, ctx.report, aot)


def build(
    mod: IRModule,
    target: str | Target = "c",
    params: Mapping[str, np.ndarray] | None = None,
    executor: str | Executor | None = None,
    mod_name: str = "default",
    opt_level: int = 2,
    progress: bool = False,
    pass_context: PassContext | None = None,
) -> ArtifactSet:
    """Compile ``mod`` for ``target`` into an ArtifactSet: ``lower(...).compile()``."""
    lowered = lower(mod, target, params, executor, mod_name, opt_level, progress, pass_context)
    return lowered.compile()


#: the target hooks that see the graph IR (tir_to_runtime sees loop IR only).
GRAPH_HOOKS: tuple[str, ...] = ("relay_to_tir", "relay_to_runtime", "constant_updater")


def _channels_last_host(target: Target) -> bool:
    """Whether convert_layout's default (NHWC chains at opt_level >= 2) applies to ``target``:
    an x86 CPU with 256-bit vectors or wider, no GRAPH_HOOKS and no external kinds."""
    hooks = any(target.hook(name) for name in GRAPH_HOOKS)
    x86 = target.cpu.arch == "x86" and target.cpu.vector_bits >= 256
    return x86 and not hooks and not target.externals


def _update_constants(mod: IRModule, target: Target) -> IRModule:
    hook = target.hook("constant_updater")
    if hook is None:
        return mod
    updated = get_global_func(hook)(mod, target)
    if not isinstance(updated, IRModule):
        raise EmberValueError(f"constant_updater hook {hook!r} must return an IRModule")
    return updated


def _partition(mod: IRModule, target: Target) -> IRModule:
    kinds = [t.kind.name for t in target.externals]
    own = [t.kind.name for t in target.externals if t.hook("constant_updater")]
    return partition(mod, kinds, own)


def _fuse(mod: IRModule, ctx: PassContext) -> IRModule:
    """Stage 4 through the registered ``fuse_ops`` pass, recorded in the context's report."""
    off = ctx.opt_level == 0 or "fuse_ops" in ctx.disabled
    depth = 1 if off else int(ctx.config.get("fuse_ops.max_depth", DEFAULT_MAX_DEPTH))
    config = {**ctx.config, "fuse_ops.max_depth": depth}
    fuse_ctx = PassContext(ctx.opt_level, ("fuse_ops",), (), ctx.debug, config, ctx.report)
    return Sequential([get_pass("fuse_ops")])(mod, fuse_ctx)


def _lower_kernels(
    kernels: Mapping[str, Function], target: Target, progress: bool
) -> tuple[tuple[PrimFunc, ...], tuple[Artifact, ...]]:
    """Stage 6: kernels -> PrimFuncs (or artifacts), honouring the target's hooks."""
    to_runtime = target.hook("relay_to_runtime")
    to_tir = target.hook("relay_to_tir")
    items: Iterable[tuple[str, Function]] = kernels.items()
    if progress:
        items = tqdm(items, total=len(kernels), desc="lowering", unit="kernel", leave=False)
    funcs: list[PrimFunc] = []
    external: list[Artifact] = []
    for name, group in items:
        kind = region_kind(group)
        ext = target.external(kind) if kind is not None else None
        if ext is not None:
            func, made = lower_region(group, name, ext, target)
            funcs.extend([func] if func is not None else [])
            known = {(a.key, a.sha256) for a in external}
            external.extend(a for a in made if (a.key, a.sha256) not in known)
        elif to_runtime is not None:
            made = get_global_func(to_runtime)(group, name, target)
            external.extend(as_artifacts(made, to_runtime))
        elif to_tir is not None:
            funcs.append(get_global_func(to_tir)(group, name, target))
        else:
            funcs.append(lower_group(group, name, target))
    return tuple(funcs), tuple(external)
