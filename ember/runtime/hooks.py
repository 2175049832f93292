"""Late-bound runtime operations: low classes call them, the modules above register them.

``ArtifactSet`` and ``Module`` sit low in the runtime yet offer TVM's methods
``export_library`` and ``load_module``, whose work is done by modules above them
(:mod:`ember.runtime.export`, :mod:`ember.runtime.loading`). Those modules register the
implementation here by name when imported. Importing any ``ember.runtime`` module runs
``ember/runtime/__init__.py`` first, which imports both, so the hooks are in place before
user code can call the methods. Example::

    register_hook(EXPORT_LIBRARY, export_library)      # in export.py
    call_hook(EXPORT_LIBRARY, artifact_set, "lib.so")  # in ArtifactSet.export_library
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ember.support.registry import Registry

#: ``export_library(ArtifactSet | Module, path) -> Path``, registered by export.py.
EXPORT_LIBRARY = "export_library"
#: ``load_artifacts(ArtifactSet, device, trust_native) -> Module``, registered by loading.py.
LOAD_ARTIFACTS = "load_artifacts"
#: ``(kind "array"|"empty", source|shape, device, dtype) -> remote array``, by ember.rpc.
REMOTE_NDARRAY = "remote_ndarray"

#: The registered implementations, by name.
RUNTIME_HOOKS: Registry[Callable[..., Any]] = Registry("runtime hook")


def register_hook(name: str, func: Callable[..., Any], override: bool = False) -> None:
    """Register ``func`` as the implementation of the late-bound operation ``name``."""
    RUNTIME_HOOKS.register(name, func, override=override)


def call_hook(name: str, *args: Any) -> Any:
    """Call the implementation registered under ``name``; a miss names the known hooks."""
    return RUNTIME_HOOKS.get(name)(*args)
