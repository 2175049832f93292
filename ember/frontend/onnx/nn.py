"""The nn family of ONNX handlers; importing this module registers all of them."""

from ember.frontend.onnx import nn_conv, nn_image, nn_norm, nn_pool, nn_rnn  # noqa: F401
