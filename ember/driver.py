"""build(): the one flat compilation pipeline, graph IR -> ArtifactSet, one line per stage.

The stages, in order (each consumes the previous one's output and nothing else):

1. optimize    bind parameters as constants, run the graph passes at ``opt_level``
2. constants   the target's ``constant_updater`` hook may rewrite the bound constants
3. legalize    rewrite ops that are lowered through simpler ops; fail listing every op
               that has no implementation, before any lowering work
4. fuse        group ops into primitive functions (TVM's fusion rules)
5. plan        graph JSON, storage plan, lifted parameters, one kernel per distinct group
6. lower       each kernel to loop IR (the target's ``relay_to_tir`` hook, or ember.ops)
7. codegen     loop IR to artifacts (``tir_to_runtime`` hook, or the C code generator);
               a ``relay_to_runtime`` hook skips 6-7 for its kernels and returns artifacts
8. metadata    graph.json, params.bin and metadata.json as ``metadata`` artifacts

The result is plain data; ``ember.runtime.load_artifacts`` turns it into modules.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ember.codegen.c import build_c
from ember.errors import ArtifactError, EmberValueError
from ember.executor import make_metadata_artifacts
from ember.ir.expr import Function
from ember.ir.module import IRModule
from ember.ir.verify import verify
from ember.lowering.graph_plan import plan_graph
from ember.lowering.legalize import check_lowerable, legalize
from ember.lowering.lower_group import lower_group
from ember.runtime.artifact import Artifact
from ember.runtime.artifact_set import ArtifactSet
from ember.runtime.registry import get_global_func
from ember.target import Target
from ember.tir import PrimFunc
from ember.transform import fold_constant, fuse_ops, optimize

#: executors ``build`` can target (the AOT executor arrives with its own issue).
EXECUTORS: tuple[str, ...] = ("graph",)


def build(
    mod: IRModule,
    target: str | Target = "c",
    params: Mapping[str, np.ndarray] | None = None,
    executor: str = "graph",
    mod_name: str = "default",
    opt_level: int = 2,
    progress: bool = False,
) -> ArtifactSet:
    """Compile ``mod`` for ``target`` into an ArtifactSet (see the module docstring)."""
    tgt = Target.create(target)
    if executor not in EXECUTORS:
        raise EmberValueError(f"unknown executor {executor!r}; known: {', '.join(EXECUTORS)}")
    if not mod_name.isidentifier():
        raise EmberValueError(f"mod_name must be a C identifier, got {mod_name!r}")
    verify(mod)
    mod = optimize(mod, params, opt_level=opt_level)  # 1
    mod = _update_constants(mod, tgt)  # 2
    mod = fold_constant(legalize(mod))  # 3
    check_lowerable(mod)
    mod = fuse_ops(mod, max_depth=256 if opt_level > 0 else 1)  # 4
    plan = plan_graph(mod)  # 5
    artifacts = _lower_and_generate(plan.kernels, tgt, progress)  # 6, 7
    artifacts += make_metadata_artifacts(plan.graph, plan.params, mod_name)  # 8
    return ArtifactSet(artifacts)


def _update_constants(mod: IRModule, target: Target) -> IRModule:
    hook = target.hook("constant_updater")
    if hook is None:
        return mod
    updated = get_global_func(hook)(mod, target)
    if not isinstance(updated, IRModule):
        raise EmberValueError(f"constant_updater hook {hook!r} must return an IRModule")
    return updated


def _lower_and_generate(
    kernels: Mapping[str, Function], target: Target, progress: bool
) -> list[Artifact]:
    """Stages 6 and 7: kernels -> PrimFuncs -> artifacts, honouring the target's hooks."""
    to_runtime = target.hook("relay_to_runtime")
    to_tir = target.hook("relay_to_tir")
    items: Any = kernels.items()
    if progress:
        from tqdm import tqdm

        items = tqdm(items, total=len(kernels), desc="lowering", unit="kernel", leave=False)
    funcs: list[PrimFunc] = []
    external: list[Artifact] = []
    for name, group in items:
        if to_runtime is not None:
            external.extend(
                _artifacts(get_global_func(to_runtime)(group, name, target), to_runtime)
            )
        elif to_tir is not None:
            funcs.append(get_global_func(to_tir)(group, name, target))
        else:
            funcs.append(lower_group(group, name, target))
    if not funcs:
        return external
    build_hook = target.hook("tir_to_runtime")
    if build_hook is not None:
        return external + _artifacts(get_global_func(build_hook)(funcs, target), build_hook)
    return external + list(build_c(funcs, target))


def _artifacts(value: Any, hook: str) -> list[Artifact]:
    items = list(value) if isinstance(value, list | tuple | ArtifactSet) else [value]
    bad = [type(v).__name__ for v in items if not isinstance(v, Artifact)]
    if bad:
        raise ArtifactError(f"hook {hook!r} must return Artifacts, got {', '.join(bad)}")
    return items
