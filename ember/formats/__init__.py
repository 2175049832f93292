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
from ember.formats.metadata import (
    METADATA_FORMAT_VERSION,
    FunctionInfo,
    ModelMetadata,
    ParameterInfo,
    graph_metadata,
)
from ember.formats.params import load_params, save_params

__all__ = [
    "METADATA_FORMAT_VERSION",
    "FunctionInfo",
    "GraphJSON",
    "ModelMetadata",
    "Node",
    "NodeEntry",
    "OpAttrs",
    "ParameterInfo",
    "dump_graph_json",
    "graph_metadata",
    "load_graph_json",
    "load_params",
    "save_params",
]
