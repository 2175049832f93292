"""Leaf utilities shared by every layer: the registry class, the dtype table, hashing, toolchain,
tar."""
