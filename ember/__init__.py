"""ember: a deep-learning model compiler and runtime.

This module holds the public API only: re-exports of names defined in the layers below.
"""

from ember import errors

__version__ = "0.1.0"

__all__ = ["errors", "__version__"]
