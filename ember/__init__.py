"""ember: a deep-learning model compiler and runtime.

This module holds the public API only: re-exports of names defined in the layers below.
"""

from ember import errors, nd, runtime
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

__version__ = "0.1.0"

__all__ = [
    "Device",
    "__version__",
    "cpu",
    "errors",
    "get_global_func",
    "load_json",
    "load_module",
    "nd",
    "register_func",
    "register_object",
    "runtime",
    "save_json",
]
