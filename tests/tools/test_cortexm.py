"""The portable microcontroller target and its board program: cross-compiled with
arm-none-eabi-gcc, run under qemu-system-arm on an MPS2 board, checked against the
reference evaluator's test vectors; the size report."""

import shutil
import struct
import subprocess
import tarfile

import pytest

import ember
from ember.cli.main import main
from ember.codegen.c.build import c_options
from ember.errors import EmberValueError, ModuleLoadError
from ember.examples.models import make_model
from ember.target.cpu import cpu_info, is_microcontroller
from ember.tools.cortexm import board_for, size_report

TOOLS = ("arm-none-eabi-gcc", "arm-none-eabi-size", "arm-none-eabi-nm", "qemu-system-arm")
needs_board = pytest.mark.skipif(
    any(shutil.which(t) is None for t in TOOLS),
    reason="the Cortex-M toolchain is not installed (apt-get install gcc-arm-none-eabi "
    "libnewlib-arm-none-eabi qemu-system-arm; .ci/run does)",
)
HEAP = {"malloc", "calloc", "realloc", "free", "_malloc_r", "_free_r", "_sbrk"}


def _unpacked_mlf(tmp_path, name: str, target: str = "c -mcpu=cortex-m4"):
    """``ember compile model.onnx --format mlf --target <target>``, unpacked."""
    src = tmp_path / f"{name}.onnx"
    src.write_bytes(make_model(name).model.SerializeToString())
    tar = tmp_path / f"{name}.tar"
    assert main(["compile", str(src), "--format", "mlf", "--target", target, "-o", str(tar)]) == 0
    out = tmp_path / name
    with tarfile.open(tar) as t:
        t.extractall(out, filter="data")
    return out


def _make(directory, *targets: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["make", "-s", *targets], cwd=directory, capture_output=True, text=True, timeout=900
    )


def test_microcontroller_cpus_make_the_c_target_portable():
    opts = c_options(ember.Target.create("c -mcpu=cortex-m4"))
    assert opts.cflags().split() == [
        "-O3",
        "-mcpu=cortex-m4",
        "-mthumb",
        "-mfloat-abi=hard",
        "-fno-math-errno",
        "-fno-trapping-math",
    ]
    assert (opts.openmp, opts.vector_math, opts.num_threads) == (False, False, 1)
    assert "-mfloat-abi=soft" in c_options(ember.Target.create("c -mcpu=cortex-m3")).cflags()
    soft = c_options(ember.Target.create("c -mcpu=cortex-m7 -float-abi=softfp"))
    assert "-mfloat-abi=softfp" in soft.cflags()
    with pytest.raises(EmberValueError, match="float-abi"):
        ember.Target.create("c -mcpu=cortex-m4 -float-abi=double")
    assert cpu_info("cortex-m4").vector_bits == 32 and cpu_info("cortex-m55").vector_bits == 128
    assert is_microcontroller("cortex-m0plus") and not is_microcontroller("cortex-a72")
    assert board_for("cortex-m4").name == "mps2-an386"
    assert board_for("cortex-m0").name == "mps2-an385" and board_for("cortex-a53") is None
    host = c_options(ember.Target.create("c"))
    assert "-mthumb" not in host.cflags() and host.openmp


@pytest.fixture(scope="module")
def kws(tmp_path_factory):
    return _unpacked_mlf(tmp_path_factory.mktemp("kws"), "ds_cnn_kws")


@pytest.mark.cc
def test_a_microcontroller_tar_ships_the_board_and_still_builds_on_the_host(kws):
    for member in ("startup.c", "semihost.h", "board_main.c", "vectors.S"):
        assert (kws / "boards" / "common" / member).is_file(), member
    assert "0x20000000" in (kws / "boards" / "mps2-an386" / "link.ld").read_text()
    makefile = (kws / "Makefile").read_text()
    assert "board-test:" in makefile and "BOARD ?= mps2-an386" in makefile
    assert "make board-test" in (kws / "README.md").read_text()
    out = _make(kws, "test")  # the portable C runs on the host without the Arm flags
    assert out.returncode == 0 and out.stdout.startswith("PASS"), out.stdout + out.stderr


def test_a_microcontroller_tar_does_not_load_on_the_host(kws):
    with pytest.raises(ModuleLoadError, match="make board-test"):
        ember.load_module(kws.with_suffix(".tar"))


@needs_board
def test_keyword_spotter_passes_on_the_board(kws):
    out = _make(kws, "board-test")
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith("PASS") and "guarded" in out.stdout
    header = (kws / "include" / "ember_default.h").read_text()
    size = header.split("#define EMBER_DEFAULT_WORKSPACE_SIZE ")[1].split()[0]
    assert f"arena {size} bytes" in out.stdout
    symbols = subprocess.run(
        ["arm-none-eabi-nm", "build/mps2-an386/run_model.elf"],
        cwd=kws,
        capture_output=True,
        text=True,
        check=True,
    )
    assert not {line.split()[-1] for line in symbols.stdout.splitlines()} & HEAP


@needs_board
def test_a_wrong_answer_fails_on_the_board(kws, tmp_path):
    shutil.copytree(kws, tmp_path / "copy")
    expected = tmp_path / "copy" / "test" / "expected.bin"
    data = bytearray(expected.read_bytes())
    data[:4] = struct.pack("<f", 2.0)  # a softmax output never is
    expected.write_bytes(bytes(data))
    out = _make(tmp_path / "copy", "board-test")
    assert out.returncode != 0 and out.stdout.startswith("FAIL"), out.stdout + out.stderr


@needs_board
def test_size_report_splits_glue_kernels_and_model(kws):
    sizes = size_report(kws)
    assert set(sizes) == {"runtime glue", "kernels", "model", "test vectors", "program"}
    glue, kernels, model = sizes["runtime glue"], sizes["kernels"], sizes["model"]
    assert 0 < glue.text < 8 * 1024 and glue.bss >= 64000  # the arena lives in the glue
    assert kernels.text > 10 * 1024 and kernels.data == kernels.bss == 0
    assert model.text > 90_000  # the constants (90 KB of weights) are in flash
    assert sizes["program"].text < glue.text + kernels.text + model.text + 40 * 1024
    out = _make(kws, "size")
    assert out.returncode == 0 and "kernels:" in out.stdout and "runtime glue:" in out.stdout


@needs_board
@pytest.mark.slow
def test_resnet8_passes_on_the_board(tmp_path):
    directory = _unpacked_mlf(tmp_path, "resnet8")
    out = _make(directory, "board-test")
    assert out.returncode == 0 and out.stdout.startswith("PASS"), out.stdout + out.stderr


@needs_board
@pytest.mark.slow
def test_cortex_m3_soft_float_passes_on_its_board(tmp_path):
    directory = _unpacked_mlf(tmp_path, "dense_autoencoder", "c -mcpu=cortex-m3")
    assert "BOARD ?= mps2-an385" in (directory / "Makefile").read_text()
    out = _make(directory, "board-test")
    assert out.returncode == 0 and out.stdout.startswith("PASS"), out.stdout + out.stderr
