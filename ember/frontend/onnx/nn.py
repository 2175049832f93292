"""The nn family of ONNX handlers; importing this module registers all of them."""

from ember.frontend.onnx import nn_conv  # noqa: F401
