"""The einsum op: Einstein summation with numpy's equation syntax (``ij,jk->ik``, ``...``
broadcast dimensions, implicit output when ``->`` is absent)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ember.errors import IRError
from ember.ir.op import Attr, Attrs, OpDef, OpPattern, register_op
from ember.ir.ops.common import broadcast_shapes, check_data_dtype, tensor_arg, widen
from ember.ir.types import TensorType, Type


def parse_equation(equation: str, num_inputs: int) -> tuple[list[str], str]:
    """Split ``equation`` into input terms and the output term (``.`` marks an ellipsis).

    Each ``...`` becomes a single ``.``; the implicit output is the ellipsis followed by
    the letters used exactly once, in alphabetical order.
    """
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = [t.replace("...", ".") for t in lhs.split(",")]
    if len(terms) != num_inputs:
        raise IRError(f"equation {equation!r} has {len(terms)} operands, got {num_inputs} inputs")
    for term in terms + [rhs.replace("...", ".")]:
        bad = [ch for ch in term if not (ch.isalpha() or ch == ".")]
        if bad or term.count(".") > 1:
            raise IRError(f"equation {equation!r}: malformed term {term!r}")
    if arrow:
        out = rhs.replace("...", ".")
    else:
        letters = "".join(terms).replace(".", "")
        once = sorted(ch for ch in set(letters) if letters.count(ch) == 1)
        out = ("." if any("." in t for t in terms) else "") + "".join(once)
    return terms, out


def _einsum_type(types: Sequence[Type], attrs: Attrs) -> Type:
    tensors = [tensor_arg(types, i, f"input {i}") for i in range(len(types))]
    for i, t in enumerate(tensors[1:], start=1):
        check_data_dtype(tensors[0], t, f"input {i}")
    terms, out = parse_equation(attrs["equation"], len(tensors))
    sizes: dict[str, int] = {}
    ellipsis: tuple[int, ...] = ()
    for term, ty in zip(terms, tensors, strict=True):
        named = len(term.replace(".", ""))
        if ("." in term and ty.ndim < named) or ("." not in term and ty.ndim != named):
            raise IRError(f"term {term!r} does not match the rank of input {ty}")
        dot = term.find(".")
        n_ell = ty.ndim - named
        if dot >= 0:
            ellipsis = broadcast_shapes(ellipsis, ty.shape[dot : dot + n_ell], what="ellipsis dims")
        dims = list(ty.shape)
        if dot >= 0:
            dims[dot : dot + n_ell] = []
        for ch, d in zip(term.replace(".", ""), dims, strict=True):
            if sizes.setdefault(ch, d) != d:
                raise IRError(
                    f"index {ch!r} has sizes {sizes[ch]} and {d} in {attrs['equation']!r}"
                )
    shape: list[int] = []
    for ch in out:
        if ch == ".":
            shape.extend(ellipsis)
        elif ch not in sizes:
            raise IRError(f"output index {ch!r} of {attrs['equation']!r} is not in any input")
        else:
            shape.append(sizes[ch])
    return TensorType(tuple(shape), tensors[0].dtype)


def _einsum_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    eq = attrs["equation"].replace(" ", "")
    out = np.einsum(eq, *(widen(x) for x in xs), optimize=len(xs) > 2)
    return np.asarray(out).astype(xs[0].dtype, copy=False)


register_op(
    OpDef(
        name="einsum",
        num_inputs=(1, None),
        infer_type=_einsum_type,
        reference=_einsum_ref,
        pattern=OpPattern.OUT_ELEMWISE_FUSABLE,
        attrs={"equation": Attr("str", doc="numpy einsum equation, e.g. 'bij,bjk->bik'")},
        doc="Einstein summation over the inputs (numpy.einsum semantics).",
    )
)
