"""The float32 tile kernels on the llvm kinds: the runtime library's copy is the generators'
text (ember.codegen.llvm.tiles) and computes what the c back end's copy does bit for bit;
the llvm kinds call it exactly where their target has AVX2 and FMA (ember.codegen.llvm.cpu),
cross targets still give object files, and builds stay byte-identical."""

from __future__ import annotations

import ctypes
import re
from pathlib import Path

import numpy as np
import pytest
from c_source_lib import build_c_library
from packed_conv_lowering import lower_conv_bias_relu
from tiles_suite import calls_tile_kernel

import ember
from ember.codegen.c.f32_kernels import F32_KERNELS_C
from ember.codegen.c.f32_lanes import LANES_KERNEL_C
from ember.codegen.c.f32_narrow import F32_NARROW_C
from ember.codegen.llvm.cpu import llvm_cpu
from ember.codegen.llvm.jit import RUNTIME_SYMBOLS
from ember.codegen.llvm.tiles import (
    AVX512_KERNEL_NAMES,
    HEADER_PATH,
    TILE_KERNEL_NAMES,
    header_text,
    tile_symbol,
)
from ember.ir import Function, IRModule, TensorType, Var, call
from ember.ops.nn_conv_f32 import loop_tiles_win, use_tile_kernel
from ember.runtime import libruntime
from ember.target import Target
from ember.target.cpu import GENERIC, X86_AVX2, X86_AVX512, X86_SSE, cpu_info
from ember.transform import PassContext

pytestmark = pytest.mark.cc


def test_runtime_header_is_the_generators_text() -> None:
    assert HEADER_PATH.read_text(encoding="utf-8") == header_text(), (
        f"{HEADER_PATH} is stale: run `python -m ember.codegen.llvm` and commit it"
    )
    assert set(TILE_KERNEL_NAMES) <= set(RUNTIME_SYMBOLS)  # llvmjit registers their addresses
    assert set(AVX512_KERNEL_NAMES) <= set(RUNTIME_SYMBOLS)


def test_runtime_exports_both_copies_of_the_kernels() -> None:
    """The library carries the AVX2 kernels and their AVX-512 copies (loading it executes
    neither, so it loads on any x86-64 CPU); code names the copy its CPU runs."""
    lib = libruntime.load()
    for name in TILE_KERNEL_NAMES:
        assert tile_symbol(name, False) == name
        assert tile_symbol(name, True) == f"{name}_avx512" in AVX512_KERNEL_NAMES
        assert getattr(lib, name) and getattr(lib, f"{name}_avx512")
    assert tile_symbol("ember_rng_uniform", True) == "ember_rng_uniform"  # not a tile kernel


def test_every_included_runtime_file_is_part_of_the_build_hash() -> None:
    """runtime.c's local includes and theirs (thread_pool.h includes pool_learn.h, which
    includes pool_adapt.h) are exactly the files hashed into the runtime's cache key."""
    src = libruntime.source_path().parent
    found: set[str] = set()
    todo = [libruntime.source_path().name]
    while todo:
        text = (src / todo.pop()).read_text(encoding="utf-8")
        for name in re.findall(r'^#include "([^"]+)"', text, flags=re.MULTILINE):
            if "/" not in name and name not in found:  # not ember/runtime_api.h
                found.add(name)
                todo.append(name)
    assert sorted(found) == sorted(libruntime.INCLUDED_SOURCES)


_CALL = """
#include <string.h>
int32_t call(int32_t which, float* acc, const float* x, const float* w, const int32_t* a) {
  if (which == 3)
    return ember_f32_lanes_tile(acc, x, w, a[0], a[1], a[2], a[3], a[4], a[5], a[15], a[6],
                                a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14]);
  int32_t (*f)(float*, const float*, const float*, int64_t, int64_t, int32_t, int32_t,
               int32_t, int32_t, int32_t, int32_t, int32_t, int32_t, int32_t, int32_t,
               int32_t, int32_t, int32_t) =
      which == 0 ? ember_f32_conv_tile : which == 1 ? ember_f32_conv_tile8 : ember_f32_conv_tile24;
  return f(acc, x, w, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11],
           a[12], a[13], a[14]);
}
"""

#: (kernel, lanes) as _CALL numbers them.
_KERNELS = [("ember_f32_conv_tile", 16), ("ember_f32_conv_tile8", 8)]
_KERNELS += [("ember_f32_conv_tile24", 24), ("ember_f32_lanes_tile", 16)]


def _args(lanes: int, ncols: int, channels_outer: bool) -> list[int]:
    """xoff, woff, ncols, tcols, cx, cr and three reduction loops (extent, x and w strides):
    rows of 4 positions, 3 x 2 x 300 steps (chunks of the innermost loop) or 61 channels
    outer x 3 x 3 taps (chunks of the outermost)."""
    if channels_outer:
        return [3, 0, ncols, 4, 8, 70, 61, 1, 9 * lanes, 3, 70, 3 * lanes, 3, 8, lanes]
    return [5, 8, ncols, 4, 2, 50, 3, 400, 600 * lanes, 2, 1, 300 * lanes, 300, 3, lanes]


def _avx512_host() -> bool:
    return cpu_info("native") == X86_AVX512


@pytest.mark.parametrize("mcpu", ["haswell", "skylake-avx512"])
@pytest.mark.parametrize("channels_outer", [False, True], ids=["taps", "channels"])
@pytest.mark.parametrize("ncols", [3, 6, 19])
@pytest.mark.parametrize("which", range(len(_KERNELS)), ids=[k for k, _ in _KERNELS])
def test_runtime_kernels_equal_the_c_back_ends_bitwise(
    tmp_path: Path, which: int, ncols: int, channels_outer: bool, mcpu: str
) -> None:
    """The runtime's export for ``mcpu`` (the AVX2 kernels, or their AVX-512 copies) against
    the kernels' text compiled as the c back end compiles it for that CPU (-march), on the
    same random data."""
    avx512 = mcpu == "skylake-avx512"
    if avx512 and not _avx512_host():
        pytest.skip("needs an AVX-512 host")
    name, lanes = _KERNELS[which]
    source = F32_KERNELS_C + F32_NARROW_C + LANES_KERNEL_C + _CALL
    c_copy = build_c_library(tmp_path, source, mcpu).call
    runtime = getattr(libruntime.load(), tile_symbol(name, avx512))
    ints = _args(lanes, ncols, channels_outer)
    rng = np.random.default_rng(which)
    x = rng.standard_normal(8000).astype(np.float32)
    w = rng.standard_normal(3 * 2 * 300 * lanes + 64).astype(np.float32)
    start = rng.standard_normal(ncols * lanes).astype(np.float32)
    ptr = ctypes.POINTER(ctypes.c_float)
    results = []
    for zero in (0, 1) if name == "ember_f32_lanes_tile" else (0,):
        for fn in ("c", "runtime"):
            acc = start.copy()
            data = (acc.ctypes.data_as(ptr), x.ctypes.data_as(ptr), w.ctypes.data_as(ptr))
            if fn == "c":
                a32 = np.array([*ints, zero], np.int32)
                rc = c_copy(which, *data, a32.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)))
            else:
                rest = [*ints[:6], zero, *ints[6:]] if which == 3 else ints
                runtime.restype = ctypes.c_int32
                runtime.argtypes = (
                    [ptr] * 3 + [ctypes.c_int64] * 2 + [ctypes.c_int32] * (len(rest) - 2)
                )
                rc = runtime(*data, *rest)
            assert rc == 0
            results.append(acc)
    for got, want in zip(results[1::2], results[0::2], strict=True):
        assert got.tobytes() == want.tobytes()
        assert not np.array_equal(got, start)


@pytest.mark.parametrize(
    ("spec", "attrs", "record"),
    [
        ("llvm -mcpu=haswell", {}, X86_AVX2),
        ("llvm -mcpu=haswell", {"mattr": "-fma"}, X86_SSE),
        ("llvm -mcpu=haswell", {"mattr": "-avx"}, X86_SSE),
        ("llvm -mcpu=x86-64", {"mattr": "+avx2,+fma"}, X86_AVX2),
        ("llvm -mcpu=x86-64", {"mattr": "+avx2"}, X86_SSE),
        ("llvm -mcpu=skylake-avx512", {}, X86_AVX512),
        ("llvm -mcpu=skylake-avx512", {"mattr": "-avx512f"}, X86_AVX2),
        ("llvm -mcpu=skylake-avx512", {"mattr": "-fma"}, X86_SSE),
        ("llvm -mtriple=aarch64-linux-gnu", {}, GENERIC),  # native on another triple: generic
        ("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72", {}, cpu_info("cortex-a72")),
        ("llvm -mtriple=thumbv7em-none-eabi -mcpu=cortex-m7", {}, cpu_info("cortex-m7")),
        ("llvmjit", {}, cpu_info("native")),
    ],
)
def test_cpu_record_follows_triple_and_features(spec: str, attrs: dict, record: object) -> None:
    target = Target.create(spec).with_attrs(attrs)
    assert target.cpu == record
    kernel = record == X86_AVX2
    assert use_tile_kernel(target, "float32") is kernel
    shapes = ((1, 32, 7, 7), (1, 32, 3, 3, 24))  # blocks of 24: the kernel on every size
    text, *_ = lower_conv_bias_relu(*shapes, target, padding=(1,) * 4)  # type: ignore[arg-type]
    # the narrow kernels on AVX-512 too (ember.ops.nn_conv_narrow.narrow_avx512)
    assert ("ember_f32_conv_tile24" in text) is (kernel or record == X86_AVX512)
    assert llvm_cpu("", "native", "") == cpu_info("native")  # the c kind's record


@pytest.mark.parametrize(
    ("spec", "xshape", "block", "kernel"),
    [
        ("c -mcpu=haswell", (1, 32, 7, 7), 16, True),
        ("llvm -mcpu=haswell", (1, 32, 7, 7), 16, False),  # LLVM's own tiles win (resnet8)
        ("llvm -mcpu=haswell", (1, 32, 48, 48), 16, True),  # large images: the kernel
        ("llvm -mcpu=haswell", (1, 32, 7, 7), 8, True),  # narrow blocks: the kernel
        # AVX-512: the runtime's AVX-512 copy on images up to LLVM_AVX512_KERNEL_POSITIONS
        ("llvm -mcpu=skylake-avx512", (1, 32, 7, 7), 16, True),
        ("llvm -mcpu=skylake-avx512", (1, 32, 14, 14), 16, False),
        ("llvm -mcpu=skylake-avx512", (1, 32, 48, 48), 16, False),
        ("llvm -mcpu=skylake-avx512", (1, 32, 48, 48), 24, True),
        ("c -mcpu=skylake-avx512", (1, 32, 14, 14), 16, True),
    ],
)
def test_llvm_keeps_its_loop_tiles_on_small_16_channel_layers(
    spec: str, xshape: tuple[int, ...], block: int, kernel: bool
) -> None:
    wshape = (1, xshape[1], 3, 3, block)
    text, *_ = lower_conv_bias_relu(xshape, wshape, spec, padding=(1,) * 4)
    assert ("ember_f32_conv_tile" in text) is kernel
    target = Target.create(spec)
    assert loop_tiles_win(target, block, xshape[2] * xshape[3]) is (not kernel)


def test_llvm_takes_the_kernel_on_large_layers_of_small_images() -> None:
    """Regression: 16-channel blocks below 2048 positions kept LLVM's loop-IR tiles whatever
    the layer's size, so ResNet-50's layers at 28x28 and below (1x1 stride-2 downsamples,
    512 channels at 7x7) ran 1.3-1.8x c's time; only small layers (resnet8's) keep them."""
    xshape, wshape = (1, 64, 14, 14), (32, 64, 3, 3, 16)  # 512 channels x 196 positions
    text, *_ = lower_conv_bias_relu(xshape, wshape, "llvm -mcpu=haswell", padding=(1,) * 4)
    assert "ember_f32_conv_tile" in text
    target = Target.create("llvm -mcpu=haswell")
    assert not loop_tiles_win(target, 16, 196, 512 * 196)
    assert loop_tiles_win(target, 16, 196, 16 * 196)


#: the direct kernels on AVX-512 too (Winograd takes 3x3 32 -> 24 convs: 24 padded to 32)
_DIRECT = PassContext(config={"nn.conv_winograd": False})


def _conv_model() -> tuple[IRModule, dict[str, np.ndarray]]:
    """A 3x3 convolution 32 -> 24 channels (blocks of 24: the kernel on c and llvm; built
    with _DIRECT)."""
    x = Var("x", TensorType((1, 32, 12, 12), "float32"))
    w = Var("w", TensorType((24, 32, 3, 3), "float32"))
    conv = call("nn.conv", x, w, padding=(1, 1, 1, 1))
    rng = np.random.default_rng(7)
    params = {"w": (rng.standard_normal((24, 32, 3, 3)) / 17).astype("float32")}
    return IRModule.from_expr(Function((x, w), call("relu", conv))), params


@pytest.mark.parametrize("mcpu", ["haswell", "skylake-avx512"])
def test_llvm_builds_calling_the_kernels_are_byte_identical_and_run_as_c(mcpu: str) -> None:
    """On AVX2 (``-mcpu=haswell``) and AVX-512 (``-mcpu=skylake-avx512``: the runtime's
    AVX-512 copies) llvm, llvmjit and c call the same kernel: bitwise equal outputs."""
    avx512 = mcpu == "skylake-avx512"
    if cpu_info("native") not in (X86_AVX2, X86_AVX512) or (avx512 and not _avx512_host()):
        pytest.skip(f"needs a host that runs -mcpu={mcpu}")
    mod, params = _conv_model()
    first, second = (
        ember.build(mod, f"llvm -mcpu={mcpu}", params, pass_context=_DIRECT) for _ in range(2)
    )
    assert calls_tile_kernel(first)
    assert [a.content for a in first] == [a.content for a in second]
    x = np.random.default_rng(8).standard_normal((1, 32, 12, 12)).astype("float32")
    outs = []
    others = [
        ember.build(mod, f"{kind} -mcpu={mcpu}", params, pass_context=_DIRECT)
        for kind in ("c", "llvmjit")
    ]
    for arts in (first, *others):
        dev = ember.cpu(0)
        gmod = ember.GraphExecutor(ember.load_artifacts(arts, dev)["default"](dev))
        gmod.set_input("x", x)
        gmod.run()
        outs.append(gmod.get_output(0).numpy())
    assert outs[0].tobytes() == outs[1].tobytes() == outs[2].tobytes()


@pytest.mark.parametrize(
    "spec",
    [
        "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72",
        "llvm -mtriple=thumbv7em-none-eabi -mcpu=cortex-m7",
        "llvm -mtriple=x86_64-linux-gnu -mcpu=haswell",  # cross x86: objects that call them
    ],
)
def test_cross_targets_give_object_files(spec: str) -> None:
    mod, params = _conv_model()
    arts = ember.build(mod, spec, params)
    objects = [a for a in arts if a.file_name.endswith(".o")]
    assert objects and all(a.content[:4] == b"\x7fELF" for a in objects)
    assert calls_tile_kernel(objects) is spec.endswith("haswell")


@pytest.mark.parametrize(
    ("mcpu", "avx512"), [("haswell", False), ("x86-64-v4", True), ("skylake-avx512", True)]
)
def test_llvm_calls_the_copy_its_cpu_runs(mcpu: str, avx512: bool) -> None:
    """The object of an llvm target names the kernels' AVX-512 copies exactly when its CPU
    has AVX-512 (compiled, not run: any x86-64 host)."""
    mod, params = _conv_model()
    spec = f"llvm -mtriple=x86_64-linux-gnu -mcpu={mcpu}"
    arts = ember.build(mod, spec, params, pass_context=_DIRECT)
    blob = b"".join(a.content for a in arts if a.file_name.endswith(".o"))
    assert b"ember_f32_conv_tile24" in blob
    assert (b"ember_f32_conv_tile24_avx512" in blob) is avx512
