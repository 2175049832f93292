"""IRModule: a named collection of graph IR functions; ``main`` is the entry point."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from ember.errors import IRError
from ember.ir.expr import Function


@dataclass(frozen=True, eq=False)
class IRModule:
    """An immutable mapping of global names to functions, plus module attributes."""

    functions: Mapping[str, Function]
    attrs: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "functions", dict(sorted(self.functions.items())))
        object.__setattr__(self, "attrs", dict(sorted(self.attrs.items())))

    @staticmethod
    def from_expr(main: Function, **attrs: object) -> IRModule:
        """A module whose only function is ``main``."""
        return IRModule({"main": main}, attrs)

    @property
    def main(self) -> Function:
        """The entry function."""
        return self["main"]

    def __getitem__(self, name: str) -> Function:
        try:
            return self.functions[name]
        except KeyError:
            known = ", ".join(self.functions) or "none"
            raise IRError(f"IRModule has no function '{name}'; functions: {known}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self.functions)

    def with_function(self, name: str, func: Function) -> IRModule:
        """A copy with ``name`` bound to ``func``."""
        funcs = dict(self.functions)
        funcs[name] = func
        return IRModule(funcs, self.attrs)

    def __str__(self) -> str:
        from ember.ir.printer import astext

        return astext(self)
