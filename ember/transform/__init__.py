"""Graph passes, IRModule -> IRModule, one per file (file name = function name), and the
pass infrastructure. ``optimize`` runs the standard pipeline; ``fuse_ops`` is run by the
build driver right before lowering."""

from ember.transform.bind_params import bind_params
from ember.transform.convert_layout import convert_layout
from ember.transform.dead_code_elimination import dead_code_elimination
from ember.transform.eliminate_common_subexpr import eliminate_common_subexpr
from ember.transform.fold_constant import fold_constant
from ember.transform.fold_weight_fills import fold_weight_fills
from ember.transform.fuse_ops import fuse_ops
from ember.transform.optimize import optimize
from ember.transform.pass_manager import (
    PASSES,
    STANDARD_PIPELINE,
    Pass,
    PassContext,
    PassManager,
    PassRecord,
    PassReport,
    Sequential,
    get_pass,
    module_pass,
    pipeline,
    register_pass,
    standard_pipeline,
)
from ember.transform.simplify import simplify

__all__ = [
    "PASSES",
    "STANDARD_PIPELINE",
    "Pass",
    "PassContext",
    "PassManager",
    "PassRecord",
    "PassReport",
    "Sequential",
    "bind_params",
    "convert_layout",
    "dead_code_elimination",
    "eliminate_common_subexpr",
    "fold_constant",
    "fold_weight_fills",
    "fuse_ops",
    "get_pass",
    "module_pass",
    "optimize",
    "pipeline",
    "register_pass",
    "simplify",
    "standard_pipeline",
]
