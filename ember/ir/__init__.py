"""Graph IR: typed, immutable expressions, the op registry, IRModule."""

from ember.ir.evaluate import evaluate, evaluate_expr
from ember.ir.expr import (
    Call,
    Constant,
    Expr,
    Function,
    Tuple,
    TupleGetItem,
    Var,
    call,
    children,
    const,
    post_order,
    rewrite,
)
from ember.ir.module import IRModule
from ember.ir.op import Attr, Attrs, OpDef, OpPattern, get_op, list_ops, register_op
from ember.ir.printer import astext
from ember.ir.structural import structural_equal, structural_hash
from ember.ir.types import DTYPES, TensorType, TupleType, Type, canonical_dtype
from ember.ir.verify import verify

__all__ = [
    "Attr",
    "Attrs",
    "Call",
    "Constant",
    "DTYPES",
    "Expr",
    "Function",
    "IRModule",
    "OpDef",
    "OpPattern",
    "TensorType",
    "Tuple",
    "TupleGetItem",
    "TupleType",
    "Type",
    "Var",
    "astext",
    "call",
    "canonical_dtype",
    "evaluate",
    "evaluate_expr",
    "children",
    "const",
    "get_op",
    "list_ops",
    "post_order",
    "register_op",
    "rewrite",
    "structural_equal",
    "structural_hash",
    "verify",
]
