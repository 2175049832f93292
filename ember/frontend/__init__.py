"""Frontends: model formats -> graph IR."""

from ember.frontend.onnx.importer import from_onnx

__all__ = ["from_onnx"]
