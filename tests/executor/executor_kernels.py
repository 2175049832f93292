"""Small hand-written C kernels in the runtime's packed ABI, and graphs that use them."""

from __future__ import annotations

from pathlib import Path

from ember.formats.graph_json import GraphJSON, Node, NodeEntry, OpAttrs
from ember.runtime.libruntime import include_dir
from ember.support.toolchain import compile_shared

KERNELS_C = r"""
#include <ember/runtime_api.h>

static int64_t numel(const DLTensor* t) {
  int64_t n = 1;
  for (int32_t i = 0; i < t->ndim; ++i) n *= t->shape[i];
  return n;
}

static int check(const char* who, EmberValue* args, int32_t* codes, int32_t n, int32_t want) {
  if (n != want) { EmberAPISetLastError("wrong number of arguments"); return -1; }
  for (int32_t i = 0; i < n; ++i) {
    if (codes[i] != EMBER_DLTENSOR_HANDLE && codes[i] != EMBER_NDARRAY_HANDLE) {
      EmberAPISetLastError("argument is not a tensor"); return -1;
    }
    DLTensor* t = (DLTensor*)args[i].v_handle;
    if (t->dtype.code != kDLFloat || t->dtype.bits != 32) {
      EmberAPISetLastError("expected float32"); return -1;
    }
  }
  (void)who;
  return 0;
}

EMBER_DLL int32_t k_add(EmberValue* args, int32_t* codes, int32_t n, EmberValue* rv,
                        int32_t* rc, void* rh) {
  if (check("add", args, codes, n, 3)) return -1;
  DLTensor* a = (DLTensor*)args[0].v_handle;
  DLTensor* b = (DLTensor*)args[1].v_handle;
  DLTensor* c = (DLTensor*)args[2].v_handle;
  const float* x = (const float*)a->data;
  const float* y = (const float*)b->data;
  float* z = (float*)c->data;
  for (int64_t i = 0; i < numel(c); ++i) z[i] = x[i] + y[i];
  return 0;
}

EMBER_DLL int32_t k_relu(EmberValue* args, int32_t* codes, int32_t n, EmberValue* rv,
                         int32_t* rc, void* rh) {
  if (check("relu", args, codes, n, 2)) return -1;
  DLTensor* a = (DLTensor*)args[0].v_handle;
  DLTensor* b = (DLTensor*)args[1].v_handle;
  const float* x = (const float*)a->data;
  float* y = (float*)b->data;
  for (int64_t i = 0; i < numel(b); ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
  return 0;
}

/* y = 2 * x; also asserts it was given flattened (1-D) tensors when asked to. */
EMBER_DLL int32_t k_double_flat(EmberValue* args, int32_t* codes, int32_t n, EmberValue* rv,
                                int32_t* rc, void* rh) {
  if (check("double", args, codes, n, 2)) return -1;
  DLTensor* a = (DLTensor*)args[0].v_handle;
  DLTensor* b = (DLTensor*)args[1].v_handle;
  if (a->ndim != 1 || b->ndim != 1) { EmberAPISetLastError("expected 1-D tensors"); return -1; }
  const float* x = (const float*)a->data;
  float* y = (float*)b->data;
  for (int64_t i = 0; i < numel(b); ++i) y[i] = 2.0f * x[i];
  return 0;
}

/* (x[2n]) -> first half, second half */
EMBER_DLL int32_t k_split(EmberValue* args, int32_t* codes, int32_t n, EmberValue* rv,
                          int32_t* rc, void* rh) {
  if (check("split", args, codes, n, 3)) return -1;
  DLTensor* a = (DLTensor*)args[0].v_handle;
  DLTensor* b = (DLTensor*)args[1].v_handle;
  DLTensor* c = (DLTensor*)args[2].v_handle;
  const float* x = (const float*)a->data;
  int64_t h = numel(b);
  for (int64_t i = 0; i < h; ++i) {
    ((float*)b->data)[i] = x[i];
    ((float*)c->data)[i] = x[h + i];
  }
  return 0;
}

EMBER_DLL int32_t k_fail(EmberValue* args, int32_t* codes, int32_t n, EmberValue* rv,
                         int32_t* rc, void* rh) {
  EmberAPISetLastError("k_fail: deliberate failure for the test");
  return -1;
}
"""


def build_kernels(directory: Path) -> Path:
    """Compile the test kernels into ``directory/libkernels.so``."""
    src = directory / "kernels.c"
    src.write_text(KERNELS_C)
    return compile_shared([src], directory / "libkernels.so", include_dirs=[include_dir()])


def op(name: str, func: str, inputs: list[NodeEntry], outputs: int = 1, flat: int = 0) -> Node:
    """A kernel node."""
    return Node("tvm_op", name, tuple(inputs), OpAttrs(func, len(inputs), outputs, flat))


def three_node_graph(storage: list[int] | None = None) -> GraphJSON:
    """out = relu(relu(x) + w): inputs x, w (a parameter), three kernels."""
    nodes = [
        Node("null", "x"),
        Node("null", "w"),
        op("relu0", "k_relu", [NodeEntry(0)]),
        op("add0", "k_add", [NodeEntry(2), NodeEntry(1)]),
        op("relu1", "k_relu", [NodeEntry(3)]),
    ]
    return GraphJSON.create(
        nodes,
        heads=[NodeEntry(4)],
        shape=[[2, 3]] * 5,
        dltype=["float32"] * 5,
        storage_id=storage if storage is not None else [0, 1, 2, 3, 2],
    )
