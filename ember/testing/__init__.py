"""Public testing helpers: build small ONNX models, run them compiled by ember, through
ember's reference evaluator, or in onnxruntime, and compare.

``onnx`` is a dependency of ember; ``onnxruntime`` is a test-only one, imported only by
:func:`run_onnxruntime` (and the functions that call it).

Example::

    from onnx import helper
    from ember.testing import assert_matches_onnxruntime, build_model, random_input

    x = random_input((2, 3), "float32", seed=0)
    model = build_model([helper.make_node("Relu", ["x"], ["y"])], {"x": x}, ["y"], opset=14)
    assert_matches_onnxruntime(model, {"x": x}, rtol=1e-5, atol=1e-6)
"""

from ember.testing.onnx_models import (
    ORT_MAX_IR_VERSION,
    InputSpec,
    build_model,
    elem_type,
    node,
    random_input,
)
from ember.testing.runners import (
    assert_matches_onnxruntime,
    compile_onnx,
    run_artifacts,
    run_onnx_compiled,
    run_onnx_reference,
    run_onnxruntime,
)

__all__ = [
    "ORT_MAX_IR_VERSION",
    "InputSpec",
    "assert_matches_onnxruntime",
    "build_model",
    "compile_onnx",
    "elem_type",
    "node",
    "random_input",
    "run_artifacts",
    "run_onnx_compiled",
    "run_onnx_reference",
    "run_onnxruntime",
]
