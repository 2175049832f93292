"""ONNX handlers of the string family (docs/strings.md): StringConcat, RegexFullMatch,
StringNormalizer (StringSplit, whose shape depends on values, is in dynamic.py).

Equal on strings is in binary.py (it becomes ``string_equal``); LabelEncoder with string
keys or values is in ml.py.
"""

from __future__ import annotations

import numpy as np

from ember.frontend.onnx.common import arg
from ember.frontend.onnx.context import ConvertContext, NodeView
from ember.frontend.onnx.dynamic import evaluate_node
from ember.frontend.onnx.registry import onnx_op
from ember.ir.expr import Constant, Expr, call
from ember.support import posix_regex

STRING_TYPES = frozenset({"string"})


@onnx_op("StringConcat", since=20, dtypes=STRING_TYPES)
def string_concat(ctx: ConvertContext, node: NodeView) -> Expr:
    """StringConcat(X, Y): X[i] + Y[i], broadcast."""
    return call("string_concat", arg(ctx, node, 0), arg(ctx, node, 1), name=node.name)


@onnx_op("RegexFullMatch", since=20, dtypes=STRING_TYPES)
def regex_full_match(ctx: ConvertContext, node: NodeView) -> Expr:
    """RegexFullMatch(X, pattern): whether each string matches the pattern as a whole.

    ember matches with the C library's POSIX extended regular expressions, not RE2: the
    pattern is rewritten where POSIX has an equivalent, else refused (docs/strings.md).
    """
    pattern = posix_regex.from_re2(str(node.attr("pattern", "")))
    posix_regex.check(pattern)
    return call("regex_full_match", arg(ctx, node, 0), pattern=pattern, name=node.name)


@onnx_op("StringNormalizer", since=10, dtypes=STRING_TYPES)
def string_normalizer(ctx: ConvertContext, node: NodeView) -> Expr:
    """StringNormalizer: case change compiled; with stopwords the output shape depends on the
    values, so X must then be constant and the node is evaluated at build time."""
    x = arg(ctx, node, 0)
    if node.attr("stopwords", []):
        what = "X (with stopwords, its values set the output shape of StringNormalizer)"
        ctx.require_const(x, what)
        (out,) = evaluate_node(ctx, node, ("X",))
        assert isinstance(out, Constant)
        return Constant(np.asarray(out.data, dtype=object))  # onnx's reference gives 'U' arrays
    action = str(node.attr("case_change_action", "NONE"))
    if action not in ("LOWER", "UPPER", "NONE"):
        ctx.fail(node, f"case_change_action {action!r} is not one of LOWER, UPPER, NONE")
    if action == "NONE":
        return x
    return call("string_change_case", x, upper=action == "UPPER", name=node.name)
