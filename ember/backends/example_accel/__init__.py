"""``example_accel``: a pretend accelerator that teaches the hooks (no hardware).

* ``relay_to_tir`` turns a region of elementwise ops into loop IR whose statements are
  ``call_extern("accel_<op>", out, in...)`` on whole buffers, intermediates in scratch
  buffers (``Allocate``);
* ``tir_to_runtime`` prints that loop IR as a readable command stream (one artifact per
  kernel, loader ``example_accel``)::

      kernel ember_example_accel_fused_add_relu
      buffer arg0 float32 4x8
      ...
      add t0 arg0 arg1
      relu arg2 t0

* ``runtime.module.loadbinary_example_accel`` parses the stream and registers a Python
  function per kernel that runs the commands with numpy.

See docs/backends/example_accel.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ember.driver.regions import region_buffers
from ember.errors import CompileError, ModuleLoadError
from ember.ir.expr import Call, Function, Var, post_order
from ember.ir.op import OpDef
from ember.ir.types import TensorType
from ember.runtime.artifact import SYMBOL_KEY, Artifact
from ember.runtime.module import Module, PythonModule
from ember.runtime.ndarray import NDArray
from ember.runtime.registry import register_func
from ember.target import Target, TargetKind, register_target_kind
from ember.tir import Allocate, Buffer, Evaluate, PrimFunc, SeqStmt, Stmt, call_extern, decl_buffer
from ember.tir.expr import Call as TCall
from ember.transform.partition_patterns import Pattern, register_pattern_table

KIND = LOADER = "example_accel"
#: the ops the accelerator runs, as numpy functions of its inputs.
OPS: dict[str, Callable[..., np.ndarray]] = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "relu": lambda x: np.maximum(x, 0),
}


def _same_shape(calls: Sequence[Call]) -> bool:
    """Every operand a float32 tensor of the result's shape (no broadcasting on the accel)."""
    return all(
        isinstance(a.type, TensorType) and a.type == c.type and c.type.dtype == "float32"
        for c in calls
        for a in c.args
    )


def relay_to_tir(group: Function, name: str, target: Target) -> PrimFunc:
    """The region as one accelerator command per op, on whole buffers."""
    *params, out = region_buffers(group, name)
    ins = {id(p): buf for p, buf in zip(group.params, params, strict=True)}
    calls = [n for n in post_order(group.body) if isinstance(n, Call)]
    bufs: dict[int, Buffer] = dict(ins)
    steps: list[Stmt] = []
    scratch: list[Buffer] = []
    for k, c in enumerate(calls):
        if not isinstance(c.op, OpDef) or c.op.name not in OPS:
            raise CompileError(f"example_accel region '{name}': op {c.op} is not supported")
        if c is group.body:
            dst = out
        else:
            dst = decl_buffer(out.shape, out.dtype, f"t{k}")
            scratch.append(dst)
        bufs[id(c)] = dst
        args = [bufs[id(a)].data for a in c.args if isinstance(a, Var | Call)]
        if len(args) != len(c.args):
            raise CompileError(f"example_accel region '{name}': constants are not supported")
        steps.append(Evaluate(call_extern("int32", f"accel_{c.op.name}", dst.data, *args)))
    body: Stmt = SeqStmt(tuple(steps))
    for buf in reversed(scratch):
        body = Allocate(buf, body)
    return PrimFunc(name, (*ins.values(), out), body)


def tir_to_runtime(funcs: Sequence[PrimFunc], target: Target) -> list[Artifact]:
    """Each PrimFunc as a command stream artifact."""
    return [
        Artifact(KIND, LOADER, f"{f.name}.cmds", "\n".join(command_stream(f)).encode())
        for f in funcs
    ]


def command_stream(func: PrimFunc) -> list[str]:
    """The readable commands of one kernel: its buffers, then one line per op."""
    lines = [f"kernel {func.name}"]
    lines += [f"param {p.name} {p.dtype} {_shape(p)}" for p in func.params if isinstance(p, Buffer)]
    stmt = func.body
    while isinstance(stmt, Allocate):
        lines.append(f"scratch {stmt.buffer.name} {stmt.buffer.dtype} {_shape(stmt.buffer)}")
        stmt = stmt.body
    for step in stmt.seq if isinstance(stmt, SeqStmt) else (stmt,):
        call = step.value if isinstance(step, Evaluate) else None
        if not isinstance(call, TCall) or not call.op.startswith("accel_"):
            raise CompileError(f"example_accel: cannot encode {step!r} as a command")
        lines.append(" ".join([call.op[len("accel_") :], *(str(a) for a in call.args)]))
    return lines


def _shape(buf: Buffer) -> str:
    return "x".join(str(d) for d in buf.shape) or "1"


class CommandStream:
    """A parsed command stream, callable with the kernel's tensors (params, in order)."""

    def __init__(self, text: str) -> None:
        self.params: list[str] = []
        self.scratch: dict[str, tuple[str, tuple[int, ...]]] = {}
        self.steps: list[tuple[str, str, list[str]]] = []
        for line in text.splitlines():
            word, *rest = line.split()
            if word == "param":
                self.params.append(rest[0])
            elif word == "scratch":
                self.scratch[rest[0]] = (rest[1], tuple(int(d) for d in rest[2].split("x")))
            elif word in OPS:
                self.steps.append((word, rest[0], rest[1:]))
            elif word != "kernel":
                raise ModuleLoadError(f"example_accel: unknown command {line!r}")

    def __call__(self, *tensors: NDArray) -> None:
        env = {n: t.numpy() for n, t in zip(self.params, tensors, strict=True)}
        env.update({n: np.empty(s, d) for n, (d, s) in self.scratch.items()})
        for op, dst, srcs in self.steps:
            env[dst] = OPS[op](*(env[s] for s in srcs)).astype(env[dst].dtype)
        out = self.params[-1]
        tensors[-1].copyfrom(env[out])


def loadbinary(artifacts: list[Artifact]) -> Module:
    """runtime.module.loadbinary_example_accel: register each stream under its symbol."""
    funcs = {}
    for art in artifacts:
        symbol = str(art.metadata.get(SYMBOL_KEY, art.file_name))
        funcs[symbol] = CommandStream(art.content.decode())
        register_func(symbol, funcs[symbol], override=True)
    return PythonModule(funcs, type_key=KIND)


register_func("target.example_accel.relay_to_tir", relay_to_tir)
register_func("target.example_accel.tir_to_runtime", tir_to_runtime)
register_func("runtime.module.loadbinary_" + LOADER, loadbinary)
register_pattern_table(KIND, [Pattern(f"example_accel.{op}", (op,), _same_shape) for op in OPS])
register_target_kind(
    TargetKind(
        KIND,
        hooks={
            "relay_to_tir": "target.example_accel.relay_to_tir",
            "tir_to_runtime": "target.example_accel.tir_to_runtime",
        },
        doc="a teaching accelerator: elementwise ops as a command stream run by numpy",
    )
)
