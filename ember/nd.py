"""ember.nd: the NDArray constructors under TVM's spelling (``ember.nd.array`` ...)."""

from ember.runtime.dlpack import from_dlpack, to_numpy
from ember.runtime.ndarray import NDArray, array, empty

__all__ = ["NDArray", "array", "empty", "from_dlpack", "to_numpy"]
