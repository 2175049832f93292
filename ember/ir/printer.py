"""Text printer: IRModule / Function / Expr -> a readable, deterministic text format.

One line per call in topological order; constants with more than :data:`INLINE_LIMIT`
elements become ``meta[i]`` references listed after the code with their type; nested
(fused, ``Primitive=1``) functions print as nested ``fn`` blocks called by ``%f(args)``::

    def @main(%data: Tensor[(1, 3, 8, 8), float32]) -> Tensor[(1, 4, 8, 8), float32] {
      %0 = fn (%p0: Tensor[(1, 3, 8, 8), float32], %p1: ..., Primitive=1) -> ... {
        %0 = nn.conv(%p0, %p1, strides=[1, 1], ...) /* ty=Tensor[(1, 4, 8, 8), float32] */;
        %1 = relu(%0) /* ty=Tensor[(1, 4, 8, 8), float32] */;
        %1
      };
      %1 = %0(%data, meta[0]) /* ty=Tensor[(1, 4, 8, 8), float32] */;
      %1
    }
    /* meta[0]: Tensor[(4, 3, 3, 3), float32] */

The same IR always prints the same text (no ids, no addresses, sorted attributes).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember.errors import IRError
from ember.ir.expr import Call, Constant, Expr, Function, Tuple, TupleGetItem, Var, post_order
from ember.ir.module import IRModule

#: constants with at most this many elements are printed inline.
INLINE_LIMIT = 8


def astext(node: IRModule | Expr, show_meta: bool = True, show_names: bool = False) -> str:
    """Print a module, function or expression as text.

    ``show_meta`` appends the table of large constants; ``show_names`` adds each call's
    name hint (e.g. the ONNX node name) to its type comment.
    """
    printer = _Printer(show_names)
    if isinstance(node, IRModule):
        lines = printer.module(node)
    elif isinstance(node, Function):
        lines = printer.function(node, "fn", "")
    elif isinstance(node, Expr):
        lines = printer.expr(node)
    else:
        raise IRError(f"astext expects an IRModule or an Expr, got {type(node).__name__}")
    if show_meta:
        lines.extend(f"/* meta[{i}]: {c.type} */" for i, c in enumerate(printer.meta))
    return "\n".join(lines) + "\n"


def format_value(value: Any) -> str:
    """Deterministic text of an attribute value."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return repr(float(value))
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    if isinstance(value, np.ndarray):
        if value.size <= INLINE_LIMIT:
            return f"array({format_value(value.tolist())}, {value.dtype.name})"
        return f"array(shape={list(value.shape)}, {value.dtype.name})"
    if value is None:
        return "None"
    if isinstance(value, Expr):
        return f"<{type(value).__name__}>"
    return repr(value)


def _format_data(data: np.ndarray) -> str:
    """Inline text of a small constant: ``const([1, 2], int64)``; floats print with the
    shortest digits that round-trip in their own dtype (``0.1`` for float32, not
    ``0.10000000149011612``)."""
    flat = [str(v) for v in data.reshape(-1)]
    return f"const({_nest(flat, data.shape)}, {data.dtype.name})"


def _nest(flat: list[str], shape: tuple[int, ...]) -> str:
    if not shape:
        return flat[0]
    if len(shape) == 1:
        return "[" + ", ".join(flat) + "]"
    step = len(flat) // shape[0] if shape[0] else 0
    parts = [_nest(flat[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])]
    return "[" + ", ".join(parts) + "]"


class _Printer:
    """Holds the meta table and the variable names of one printing session."""

    def __init__(self, show_names: bool) -> None:
        self.show_names = show_names
        self.meta: list[Constant] = []
        self.meta_index: dict[int, int] = {}
        self.var_names: dict[int, str] = {}
        self.used_names: set[str] = set()

    def module(self, mod: IRModule) -> list[str]:
        lines: list[str] = []
        for key, value in mod.attrs.items():
            lines.append(f"#[{key} = {format_value(value)}]")
        for i, (name, func) in enumerate(mod.functions.items()):
            if i:
                lines.append("")
            lines.extend(self.function(func, f"def @{name}", ""))
        return lines

    def var_name(self, var: Var) -> str:
        name = self.var_names.get(id(var))
        if name is None:
            base = var.name or "v"
            name = base
            k = 1
            while name in self.used_names:
                name = f"{base}_{k}"
                k += 1
            self.used_names.add(name)
            self.var_names[id(var)] = name
        return "%" + name

    def constant(self, c: Constant) -> str:
        if c.data.size <= INLINE_LIMIT:
            return _format_data(c.data)
        idx = self.meta_index.get(id(c))
        if idx is None:
            idx = len(self.meta)
            self.meta_index[id(c)] = idx
            self.meta.append(c)
        return f"meta[{idx}]"

    def function(self, func: Function, head: str, indent: str) -> list[str]:
        outer_names = set(self.used_names)  # parameter names are scoped to the function
        params = [f"{self.var_name(p)}: {p.type}" for p in func.params]
        params.extend(f"{k}={format_value(v)}" for k, v in func.attrs.items())
        lines = [f"{indent}{head}({', '.join(params)}) -> {func.ret_type} {{"]
        lines.extend(self.expr(func.body, indent + "  "))
        lines.append(indent + "}")
        self.used_names = outer_names
        return lines

    def expr(self, root: Expr, indent: str = "") -> list[str]:
        """Lines computing ``root``, ending with a line that names its value."""
        lines: list[str] = []
        refs: dict[int, str] = {}
        counter = 0
        for node in post_order(root):
            if isinstance(node, Var):
                refs[id(node)] = self.var_name(node)
                continue
            if isinstance(node, Constant):
                refs[id(node)] = self.constant(node)
                continue
            fn = node.op if isinstance(node, Call) and isinstance(node.op, Function) else None
            if fn is not None and id(fn) not in refs:  # print a callee once, before its call
                refs[id(fn)] = f"%{counter}"
                fn_lines = self.function(fn, f"%{counter} = fn ", indent)
                fn_lines[-1] += ";"
                lines.extend(fn_lines)
                counter += 1
            ref = f"%{counter}"
            counter += 1
            refs[id(node)] = ref
            if isinstance(node, Function):
                fn_lines = self.function(node, f"{ref} = fn ", indent)
                fn_lines[-1] += ";"
                lines.extend(fn_lines)
                continue
            lines.append(f"{indent}{ref} = {self.rhs(node, refs)}{self.comment(node)};")
        lines.append(indent + refs[id(root)])
        return lines

    def rhs(self, node: Expr, refs: dict[int, str]) -> str:
        if isinstance(node, Call):
            args = [refs[id(a)] for a in node.args]
            args.extend(f"{k}={format_value(v)}" for k, v in node.attrs.items())
            if isinstance(node.op, Function):
                return f"{refs[id(node.op)]}({', '.join(args)})"
            return f"{node.op.name}({', '.join(args)})"
        if isinstance(node, Tuple):
            fields = [refs[id(f)] for f in node.fields]
            return "(" + ", ".join(fields) + ("," if len(fields) == 1 else "") + ")"
        if isinstance(node, TupleGetItem):
            return f"{refs[id(node.tuple_value)]}.{node.index}"
        raise IRError(f"cannot print a {type(node).__name__}")

    def comment(self, node: Expr) -> str:
        text = f"ty={node.type}"
        if self.show_names and isinstance(node, Call) and node.name:
            text += f", name={format_value(node.name)}"
        return f" /* {text} */"
