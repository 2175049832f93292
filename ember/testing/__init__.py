"""Testing helpers: compile an ONNX model with ember, run it, compare with onnxruntime."""

from ember.testing.runners import (
    ORT_MAX_IR_VERSION,
    assert_matches_onnxruntime,
    compile_onnx,
    run_artifacts,
    run_onnx_compiled,
    run_onnxruntime,
)

__all__ = [
    "ORT_MAX_IR_VERSION",
    "assert_matches_onnxruntime",
    "compile_onnx",
    "run_artifacts",
    "run_onnx_compiled",
    "run_onnxruntime",
]
