"""Formats: pure (de)serializers for graph JSON, parameter blobs and model metadata.

Nothing here imports a compiler layer or the runtime; every reader validates and raises
``ember.errors.SerializationError`` on bad input.
"""

from ember.formats.graph_json import (
    GraphJSON,
    Node,
    NodeEntry,
    OpAttrs,
    dump_graph_json,
    load_graph_json,
)
from ember.formats.params import load_params, save_params

__all__ = [
    "GraphJSON",
    "Node",
    "NodeEntry",
    "OpAttrs",
    "dump_graph_json",
    "load_graph_json",
    "load_params",
    "save_params",
]
