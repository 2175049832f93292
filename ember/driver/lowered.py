"""Lowered: the program between the graph passes and code generation, and its compile().

``ember.lower`` returns one; it holds everything a later stage needs and can be printed,
inspected and reused: the optimized, fused IRModule; the graph plan (graph JSON with its
storage plan, lifted parameters, one kernel per distinct fused group); the loop-IR
PrimFuncs of the kernels ember lowered; the artifacts of kernels an external
``relay_to_runtime`` hook compiled itself; the target and the pass report.
``compile()`` turns it into an ArtifactSet through the target's ``tir_to_runtime`` hook
(the host target's when the kind has none): the driver names no code generator.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ember.driver.executor import Executor
from ember.driver.partition_report import partition_artifacts, partition_lines
from ember.errors import ArtifactError, CompileError
from ember.executor import make_metadata_artifacts
from ember.executor.aot_executor import aot_metadata, make_aot_metadata_artifacts
from ember.formats.graph_json import GraphJSON
from ember.formats.metadata import ModelMetadata
from ember.ir.module import IRModule
from ember.ir.printer import astext
from ember.lowering.aot import HELPER_ATTR, AotProgram, kernel_infos
from ember.lowering.graph_plan import GraphPlan
from ember.lowering.memory_map import memory_map
from ember.runtime.artifact import AnyArtifact, Artifact, InMemoryArtifact
from ember.runtime.artifact_set import ArtifactSet
from ember.runtime.registry import get_global_func
from ember.target import Target
from ember.tir import PrimFunc
from ember.tir.printer import func_to_str
from ember.transform import PassReport


@dataclass(frozen=True)
class Lowered:
    """A model lowered for one target and executor, ready to ``compile()``."""

    target: Target
    executor: Executor
    mod_name: str
    ir: IRModule
    plan: GraphPlan
    prim_funcs: tuple[PrimFunc, ...]
    external: tuple[Artifact, ...]
    pass_report: PassReport
    aot: AotProgram | None = None

    def compile(self) -> ArtifactSet:
        """Code generation and metadata: PrimFuncs -> artifacts, plus graph/params/metadata."""
        if self.aot is not None:
            return self._compile_aot(self.aot)
        artifacts: list[AnyArtifact] = list(self.external)
        target = self.target
        if any(f.attrs.get(HELPER_ATTR) for f in self.prim_funcs):  # kernels call kernels
            target = _export_unpacked(target)
        if self.prim_funcs:
            artifacts += generate_code(self.prim_funcs, target)
        artifacts += make_metadata_artifacts(self.plan.graph, self.plan.params, self.mod_name)
        artifacts += partition_artifacts(self.ir, self.plan, self.target)
        return ArtifactSet(artifacts)

    def _compile_aot(self, aot: AotProgram) -> ArtifactSet:
        """The kernels and the run function (unpacked entries exported: the run function
        calls them across files), the metadata as C where the back end writes it
        (``target.build.<kind>.metadata``), then the metadata artifacts and memory map."""
        target = _export_unpacked(self.target)
        # external artifacts: regions' (called through their stubs) and a whole-target
        # relay_to_runtime hook's (called through call_packed)
        artifacts: list[AnyArtifact] = list(self.external)
        artifacts += generate_code((*aot.kernels, aot.run_func), target)
        md = aot_metadata(
            aot.graph,
            self.plan.params,
            self.mod_name,
            aot.memory.size,
            aot.run_symbol,
            kernel_infos(aot),
            self.executor.interface_api,
        )
        constants = self.plan.params if self.executor.link_params else None
        artifacts += generate_metadata(md, target, constants)
        artifacts += make_aot_metadata_artifacts(
            md, aot.graph, self.plan.params, memory_map(aot).to_json()
        )
        artifacts += partition_artifacts(self.ir, self.plan, self.target)
        return ArtifactSet(artifacts)

    def as_text(self, show_params: bool = False) -> str:
        """Every part as text: header, fused IR, graph JSON and each PrimFunc."""
        parts = [
            f"# lowered for target '{self.target}' ({', '.join(self.target.keys)}), "
            f"executor '{self.executor}', mod_name '{self.mod_name}'",
            f"# {len(self.plan.kernels)} kernels ({len(self.prim_funcs)} in loop IR, "
            f"{len(self.external)} external artifacts), {len(self.plan.params)} parameters",
            "",
            "## fused IR",
            astext(self.ir, show_meta=show_params),
            "",
            "## graph: node = op(input entries) -> entry: shape dtype @storage",
            *graph_lines(self.plan.graph),
        ]
        if self.target.externals:
            parts += ["", "## partition: node op -> where pattern kernel"]
            parts += partition_lines(self.ir, self.plan, self.target)
        for func in self.prim_funcs:
            parts += ["", f"## kernel {func.name}", func_to_str(func)]
        if self.aot is not None:
            parts += ["", "## AOT " + memory_map(self.aot).table().rstrip()]
            parts += [
                "",
                f"## run function {self.aot.run_symbol}",
                func_to_str(self.aot.run_func),
            ]
        return "\n".join(parts) + "\n"

    def __str__(self) -> str:
        return self.as_text()


def _export_unpacked(target: Target) -> Target:
    """``target`` with unpacked entries exported (calls across files), where it has the option."""
    if "export-unpacked" in target.kind.options:
        return target.with_attrs({"export-unpacked": True})
    return target


def graph_lines(graph: GraphJSON) -> list[str]:
    """One line per graph node: its op and inputs, then each output entry's type and storage."""
    lines = []
    for nid, node in enumerate(graph.nodes):
        first, last = graph.node_row_ptr[nid], graph.node_row_ptr[nid + 1]
        outs = ", ".join(
            f"e{e}: {tuple(graph.shape[e])} {graph.dltype[e]} @{graph.storage_id[e]}"
            for e in range(first, last)
        )
        args = ", ".join(f"e{graph.node_row_ptr[i.node_id] + i.index}" for i in node.inputs)
        call = f"input {node.name}" if node.op == "null" else f"{node.name}({args})"
        lines.append(f"  {nid:>3} {call} -> {outs}")
    heads = ", ".join(f"e{graph.node_row_ptr[h.node_id] + h.index}" for h in graph.heads)
    lines.append(f"  outputs: {heads}")
    return lines


def code_generating_target(target: Target) -> Target:
    """The target whose kind generates the code: ``target`` when its kind has a
    ``tir_to_runtime`` hook, else its host (``c`` by default)."""
    return target if target.hook("tir_to_runtime") else target.host_or_default()


def generate_code(funcs: Sequence[PrimFunc], target: Target) -> list[AnyArtifact]:
    """Stage 7: PrimFuncs -> artifacts through ``tir_to_runtime`` (the kind's, else the host's)."""
    codegen_target = code_generating_target(target)
    hook = codegen_target.hook("tir_to_runtime")
    if hook is None:
        raise CompileError(
            f"target '{target}' and its host '{codegen_target}' have no tir_to_runtime hook: "
            "nothing can turn the loop IR into code; register one on the kind or give a host "
            "target such as 'c'"
        )
    made = get_global_func(hook)(list(funcs), codegen_target)
    in_memory = list(made) if isinstance(made, list | tuple) else [made]
    if in_memory and all(isinstance(a, InMemoryArtifact) for a in in_memory):
        return in_memory  # e.g. llvmjit: code that exists only in this process
    return list(as_artifacts(made, hook))


def generate_metadata(
    md: ModelMetadata, target: Target, constants: Mapping[str, np.ndarray] | None = None
) -> list[Artifact]:
    """The metadata (and, with linked constants, the C interface) as code, from
    ``target.build.<kind>.metadata(md, target, constants)`` of the code-generating kind (the
    kind's, else its host's); none when the back end has no such function, which is an
    error when the build needs it (the ``c`` interface)."""
    codegen_target = code_generating_target(target)
    name = f"target.build.{codegen_target.kind.name}.metadata"
    func = get_global_func(name, allow_missing=True)
    if func is None:
        if md.interface_api == "c":
            raise CompileError(
                f"target '{codegen_target}' writes no {name}, which the c interface needs; "
                "use -interface-api=packed or a back end that has it (c)"
            )
        return []
    return as_artifacts(func(md, codegen_target, constants), name)


def as_artifacts(value: Any, hook: str) -> list[Artifact]:
    """Check a hook's result: an Artifact, or a list, tuple or ArtifactSet of them."""
    items = list(value) if isinstance(value, list | tuple | ArtifactSet) else [value]
    bad = [type(v).__name__ for v in items if not isinstance(v, Artifact)]
    if bad:
        raise ArtifactError(f"hook {hook!r} must return Artifacts, got {', '.join(bad)}")
    return items
