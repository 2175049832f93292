"""ember.runtime: what a deployed model needs and nothing from the compiler.

PackedFunc and the global registry, NDArray/Device/DLPack, Module (Python and shared
library), time_evaluator, the Object system and its JSON format, artifacts and the
code-loading process. The modules form an acyclic graph; where a lower one needs a higher
one, the higher one registers itself on import, and this file imports them all (importing
``export`` registers the blob-aware library loader and the ``export_library`` hook,
``loading`` the ``load_module`` hook; see docs/runtime.md).
Importing this package compiles nothing; the C runtime is built on first use. It must
never import ember.ir, ember.transform, ember.tir, ember.codegen or ember.frontend
(tests/test_layering.py).
"""

from ember.runtime.artifact import Artifact, InMemoryArtifact
from ember.runtime.artifact_set import ArtifactSet
from ember.runtime.c_api import TypeCode, check_call
from ember.runtime.device import Device, cpu, device
from ember.runtime.dlpack import from_dlpack, to_numpy
from ember.runtime.dtype import DataType, dtype
from ember.runtime.export import export_library
from ember.runtime.library_module import LibraryModule, load_module
from ember.runtime.libruntime import include_dir
from ember.runtime.loading import load_artifacts
from ember.runtime.module import Module, ModuleFromFuncs, PythonModule
from ember.runtime.ndarray import NDArray, array, empty
from ember.runtime.object import (
    Object,
    get_type,
    list_fields,
    register_object,
    type_index_of,
    type_key_of,
)
from ember.runtime.object_json import load_json, save_json
from ember.runtime.packed_func import CPackedFunc, PackedFunc, PyPackedFunc, as_packed_func
from ember.runtime.registry import (
    get_global_func,
    list_global_funcs,
    register_c_func,
    register_func,
    remove_global_func,
)
from ember.runtime.threads import get_num_threads, num_threads, set_num_threads
from ember.runtime.time_evaluator import BenchmarkResult, TimeEvaluator

__all__ = [
    "Artifact",
    "ArtifactSet",
    "InMemoryArtifact",
    "export_library",
    "load_artifacts",
    "BenchmarkResult",
    "CPackedFunc",
    "DataType",
    "Device",
    "LibraryModule",
    "Module",
    "ModuleFromFuncs",
    "NDArray",
    "Object",
    "PackedFunc",
    "PyPackedFunc",
    "PythonModule",
    "TimeEvaluator",
    "TypeCode",
    "array",
    "as_packed_func",
    "check_call",
    "cpu",
    "device",
    "dtype",
    "empty",
    "from_dlpack",
    "get_global_func",
    "get_num_threads",
    "get_type",
    "include_dir",
    "list_fields",
    "list_global_funcs",
    "load_json",
    "load_module",
    "num_threads",
    "register_c_func",
    "register_func",
    "register_object",
    "remove_global_func",
    "save_json",
    "set_num_threads",
    "to_numpy",
    "type_index_of",
    "type_key_of",
]
