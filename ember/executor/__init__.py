"""Executors: run a compiled model from the runtime alone (graph executor, metadata module).

Importing this package calls :func:`.metadata_module.register` once, which registers
through the public calls: the global function ``runtime.module.loadbinary_metadata`` (the
loader step 4 of the loading process calls for ``metadata`` artifacts), the ``"graph"``
executor factory and the ``params.bin`` artifact inspector.
"""

from ember.executor import aot_executor, metadata_module
from ember.executor.aot_executor import AotExecutor, AotExecutorModule
from ember.executor.graph_executor import GraphExecutor, create
from ember.executor.graph_runtime import GraphExecutorModule
from ember.executor.metadata_module import (
    EXECUTOR_FACTORIES,
    MetadataModule,
    load_metadata_module,
    make_metadata_artifacts,
    register_executor_factory,
)
from ember.executor.profile import ProfileReport, ProfileRow

metadata_module.register()
aot_executor.register()

__all__ = [
    "AotExecutor",
    "AotExecutorModule",
    "EXECUTOR_FACTORIES",
    "GraphExecutor",
    "GraphExecutorModule",
    "MetadataModule",
    "ProfileReport",
    "ProfileRow",
    "create",
    "load_metadata_module",
    "make_metadata_artifacts",
    "register_executor_factory",
]
