"""Executors: run a compiled model from the runtime alone (graph executor, metadata module).

Importing this package registers one global function through the public
``register_func``: ``runtime.module.loadbinary_metadata``, the loader step 4 of the
loading process calls for ``metadata`` artifacts (see :mod:`.metadata_module`).
"""

from ember.executor import metadata_module
from ember.executor.graph_executor import GraphExecutor, create
from ember.executor.graph_runtime import GraphExecutorModule
from ember.executor.metadata_module import (
    MetadataModule,
    load_metadata_module,
    make_metadata_artifacts,
)
from ember.executor.profile import ProfileReport, ProfileRow

metadata_module.register()

__all__ = [
    "GraphExecutor",
    "GraphExecutorModule",
    "MetadataModule",
    "ProfileReport",
    "ProfileRow",
    "create",
    "load_metadata_module",
    "make_metadata_artifacts",
]
