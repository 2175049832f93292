"""Model Library Format: deterministic export, validated load, standalone make test, and
hostile tars refused."""

import io
import subprocess
import sys
import tarfile

import numpy as np
import pytest

import ember
from ember.errors import EmberError, SerializationError
from ember.examples.models import make_model
from ember.formats.mlf import check_metadata
from ember.tools.mlf import TestVectors, read_mlf

pytestmark = pytest.mark.cc
DEV = ember.cpu(0)


@pytest.fixture(scope="module")
def kws(tmp_path_factory):
    """The DS-CNN keyword spotter as a c-interface MLF tar with onnxruntime test vectors."""
    case = make_model("ds_cnn_kws")
    mod, params = ember.frontend.from_onnx(case.model, shape=case.shapes)
    lowered = ember.lower(mod, "c", params, executor="aot -interface-api=c", mod_name="kws")
    want = ember.testing.run_onnxruntime(case.model, case.inputs)
    vectors = TestVectors(case.inputs, want, rtol=1e-4, atol=1e-5)
    path = tmp_path_factory.mktemp("mlf") / "kws.tar"
    ember.export_model_library_format(lowered, path, test_vectors=vectors)
    return path, lowered, case, vectors


def test_export_is_deterministic_and_valid(kws, tmp_path):
    path, lowered, _, vectors = kws
    again = ember.export_model_library_format(lowered, tmp_path / "again.tar", test_vectors=vectors)
    assert path.read_bytes() == again.read_bytes()
    with tarfile.open(path) as tar:
        names = set(tar.getnames())
        top = check_metadata(tar.extractfile("metadata.json").read())
    for member in (
        "codegen/host/src/lib0.c",
        "include/ember_kws.h",
        "parameters/kws.params",
        "executor-config/graph/kws.graph",
        "src/kws.ir",
        "runtime/src/runtime.c",
        "runtime/include/ember/runtime_api.h",
        "Makefile",
        "main.c",
        "README.md",
        "test/inputs.bin",
    ):
        assert member in names, member
    assert top["model_name"] == "kws" and top["interface_api"] == "c"
    assert top["memory_map"]["workspace_size_bytes"] == lowered.aot.memory.size
    assert set(top["files"]) == names - {"metadata.json"}


def test_load_module_of_the_tar_in_a_fresh_process(kws):
    path, _, case, vectors = kws
    code = (
        "import sys, numpy as np, ember\n"
        f"top = ember.load_module({str(path)!r})\n"
        "ex = ember.AotExecutor(top['kws'](ember.cpu(0)))\n"
        f"ex.set_input(**dict(np.load(sys.argv[1])))\n"
        "ex.run()\n"
        "np.save(sys.argv[2], ex.get_output(0).numpy())\n"
    )
    inputs = path.parent / "in.npz"
    np.savez(inputs, **case.inputs)
    out = path.parent / "out.npy"
    subprocess.run([sys.executable, "-c", code, str(inputs), str(out)], check=True)
    np.testing.assert_allclose(np.load(out), vectors.expected[0], rtol=1e-4, atol=1e-5)


def test_standalone_make_test_passes(kws, tmp_path):
    path, _, _, _ = kws
    with tarfile.open(path) as tar:
        tar.extractall(tmp_path, filter="data")
    out = subprocess.run(["make", "-s", "test"], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip().startswith("PASS") and "guarded" in out.stdout
    # one static arena of exactly the planned size (a guard after it stays untouched) ...
    planned = kws[1].aot.memory.size
    assert f"arena {planned} bytes" in out.stdout
    header = (tmp_path / "include" / "ember_kws.h").read_text()
    assert f"#define EMBER_KWS_WORKSPACE_SIZE {planned}" in header
    # ... and no heap: none of the allocation functions is linked
    symbols = subprocess.run(
        ["nm", "-u", "run_model"], cwd=tmp_path, capture_output=True, text=True
    )
    linked = {
        line.split()[-1].split("@")[0] for line in symbols.stdout.splitlines() if line.strip()
    }
    assert not linked & {"malloc", "calloc", "realloc", "free", "posix_memalign", "aligned_alloc"}


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_standalone_check_fails_a_finite_output_against_nan_or_inf(kws, tmp_path, value):
    """Regression: the tolerance check used to pass anything when the expected value was
    NaN or infinite (the comparison with NaN is false)."""
    path, _, _, _ = kws
    with tarfile.open(path) as tar:
        tar.extractall(tmp_path, filter="data")
    expected = tmp_path / "test" / "expected.bin"
    data = bytearray(expected.read_bytes())
    data[:4] = np.float32(value).tobytes()  # the first output element (float32)
    expected.write_bytes(bytes(data))
    out = subprocess.run(["make", "-s", "test"], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode != 0 and "FAIL" in out.stdout, out.stdout + out.stderr


def _tar(members: dict, links: tuple[str, ...] = ()) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name in links:
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = "/etc/passwd"
            tar.addfile(info)
    return buf.getvalue()


def _members(path) -> dict:
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda m: {**m, "../evil": b"x"}, "unsafe entry"),
        (lambda m: {**m, "/abs": b"x"}, "unsafe entry"),
        (lambda m: {**m, "extra.c": b"int x;"}, "unlisted"),
        (lambda m: {**m, "main.c": b"int main(){}"}, "sha256"),
        (lambda m: {k: v for k, v in m.items() if k != "Makefile"}, "missing"),
        (lambda m: {**m, "metadata.json": b"{"}, "not valid JSON"),
        (lambda m: {**m, "metadata.json": b'{"version": 2}'}, "version 2"),
        (lambda m: {**m, "metadata.json": b'{"version": 1}'}, "required"),
        (lambda m: {k: v for k, v in m.items() if k != "metadata.json"}, "no metadata.json"),
    ],
)
def test_hostile_tars_are_refused(kws, tmp_path, change, message):
    bad = tmp_path / "bad.tar"
    bad.write_bytes(_tar(change(_members(kws[0]))))
    with pytest.raises(EmberError, match=message):
        read_mlf(bad)


def test_links_in_a_tar_are_refused(kws, tmp_path):
    bad = tmp_path / "link.tar"
    bad.write_bytes(_tar(_members(kws[0]), links=("codegen/host/src/lib9.c",)))
    with pytest.raises(SerializationError, match="not a regular file"):
        read_mlf(bad)


def test_cli_writes_mlf_with_test_vectors(tmp_path):
    case = make_model("dense_autoencoder")
    src = tmp_path / "ae.onnx"
    src.write_bytes(case.model.SerializeToString())
    out = tmp_path / "ae.tar"
    from ember.cli.main import main

    assert main(["compile", str(src), "--format", "mlf", "-o", str(out), "--quiet"]) == 0
    artifacts, top = read_mlf(out)
    assert top["test_vectors"]["rtol"] == 1e-4 and top["executors"] == ["aot"]
    assert top["metadata"]["interface_api"] == "c"
    assert any(a.file_name == "ember_default_interface.c" for a in artifacts)
