"""ember: a deep-learning model compiler and runtime.

This module holds the public API only: re-exports of names defined in the layers below.
Runtime names, and the executors (which register the metadata loader), are imported
eagerly; compiler names (``build``, ``frontend``, ``ir`` ...) resolve on first use through
the static table ``_LAZY``, so ``import ember.runtime`` in a deployment never loads the
compiler (see tests/test_layering.py).
"""

from __future__ import annotations

import importlib
from typing import Any

from ember import errors, executor, nd, runtime
from ember.executor import AotExecutor, GraphExecutor
from ember.runtime import (
    Device,
    cpu,
    get_global_func,
    load_json,
    load_module,
    register_func,
    register_object,
    save_json,
)
from ember.runtime.artifact import Artifact, InMemoryArtifact
from ember.runtime.artifact_set import ArtifactSet
from ember.runtime.export import export_library
from ember.runtime.loading import load_artifacts
from ember.tools.mlf import TestVectors  # importing it registers the tar loader

__version__ = "0.1.0"

#: public compiler-side names: attribute -> (module, attribute or None for the module itself).
_LAZY: dict[str, tuple[str, str | None]] = {
    "build": ("ember.driver", "build"),
    "lower": ("ember.driver", "lower"),
    "Lowered": ("ember.driver", "Lowered"),
    "Executor": ("ember.driver", "Executor"),
    "export_model_library_format": ("ember.driver.mlf", "export_model_library_format"),
    "Target": ("ember.target", "Target"),
    "register_target_kind": ("ember.target", "register_target_kind"),
    "import_onnx": ("ember.frontend", "from_onnx"),
    "frontend": ("ember.frontend", None),
    "ir": ("ember.ir", None),
    "transform": ("ember.transform", None),
    "tir": ("ember.tir", None),
    "te": ("ember.tir.te", None),
    "build_c": ("ember.codegen.c", "build_c"),
    "target": ("ember.target", None),
    "ops": ("ember.ops", None),
}


def __getattr__(name: str) -> Any:
    try:
        module_name, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'ember' has no attribute '{name}'") from None
    module = importlib.import_module(module_name)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "TestVectors",
    "AotExecutor",
    "Artifact",
    "ArtifactSet",
    "Device",
    "GraphExecutor",
    "InMemoryArtifact",
    "__version__",
    "cpu",
    "errors",
    "executor",
    "export_library",
    "get_global_func",
    "load_artifacts",
    "load_json",
    "load_module",
    "nd",
    "register_func",
    "register_object",
    "runtime",
    "save_json",
    *_LAZY,
]
