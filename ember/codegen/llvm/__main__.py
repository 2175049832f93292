"""``python -m ember.codegen.llvm``: regenerate the runtime library's copy of the float32
tile kernels (ember/runtime/src/f32_tiles.h, see ember.codegen.llvm.tiles)."""

from __future__ import annotations

from ember.codegen.llvm.tiles import HEADER_PATH, write_header

if __name__ == "__main__":
    print(f"{HEADER_PATH}: {'written' if write_header() else 'up to date'}")
