"""String ops (docs/strings.md): comparisons and transforms of ``string`` tensors.

``string`` elements are UTF-8 text; the numpy references work on object arrays of str (what
onnx's reference implementation and onnxruntime use). ``string_equal`` and
``string_concat`` broadcast like the binary ops; ``regex_full_match`` takes a POSIX extended
pattern (docs/strings.md says how it differs from ONNX's RE2 syntax).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ember.ir.op import Attr, Attrs, OpDef, OpPattern, register_op
from ember.ir.ops.common import broadcast_shapes, check_dtype
from ember.ir.types import TensorType, Type
from ember.support.posix_regex import full_match

STRING = frozenset({"string"})


def _pair_type(name: str, out_dtype: str) -> OpDef:
    def rule(types: Sequence[Type], attrs: Attrs) -> Type:
        a = check_dtype(types[0], STRING, f"lhs of '{name}'")
        b = check_dtype(types[1], STRING, f"rhs of '{name}'")
        return TensorType(broadcast_shapes(a.shape, b.shape), out_dtype)

    def ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        a, b = (np.asarray(x, dtype=object) for x in xs)
        if name == "string_equal":
            return np.asarray(np.equal(a, b), dtype=bool)
        return np.asarray(np.add(a, b), dtype=object)

    doc = "a == b on strings (bool)" if out_dtype == "bool" else "a + b: strings concatenated"
    return OpDef(name, 2, rule, ref, OpPattern.OPAQUE, doc=doc)


register_op(_pair_type("string_equal", "bool"))
register_op(_pair_type("string_concat", "string"))


def _full_match_type(types: Sequence[Type], attrs: Attrs) -> Type:
    x = check_dtype(types[0], STRING, "input of 'regex_full_match'")
    return TensorType(x.shape, "bool")


def _full_match_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    flat = [str(s) for s in np.asarray(xs[0]).reshape(-1).tolist()]
    return full_match(str(attrs["pattern"]), flat).reshape(np.shape(xs[0]))


register_op(
    OpDef(
        "regex_full_match",
        1,
        _full_match_type,
        _full_match_ref,
        OpPattern.OPAQUE,
        {"pattern": Attr("str")},
        doc="whether each string matches the POSIX extended pattern as a whole",
    )
)


def _case_type(types: Sequence[Type], attrs: Attrs) -> Type:
    x = check_dtype(types[0], STRING, "input of 'string_change_case'")
    return TensorType(x.shape, "string")


def _case_ref(xs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    flat = [str(s).upper() if attrs["upper"] else str(s).lower() for s in xs[0].reshape(-1)]
    return np.array([*flat, None], dtype=object)[:-1].reshape(xs[0].shape)


register_op(
    OpDef(
        "string_change_case",
        1,
        _case_type,
        _case_ref,
        OpPattern.OPAQUE,
        {"upper": Attr("bool")},
        doc="each string upper-cased (upper) or lower-cased",
    )
)
