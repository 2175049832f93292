"""Lowering: a fused graph IRModule -> loop-IR kernels plus the graph the executor runs."""
