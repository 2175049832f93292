"""Loop-IR passes: PrimFunc -> PrimFunc, one pass per file (file name = function name)."""

from __future__ import annotations

from ember.tir.transform.unroll_loops import unroll_loops
from ember.tir.transform.vectorize_loops import vectorize_loops

__all__ = ["unroll_loops", "vectorize_loops"]
