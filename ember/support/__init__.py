"""Leaf utilities shared by every layer: the registry class, hashing, toolchain, tar."""
