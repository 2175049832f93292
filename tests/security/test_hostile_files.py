"""Libraries, packages, resources and files: hostile input is refused with an ember error.

Before: ``ember run m0.so`` searched LD_LIBRARY_PATH, dlerror() text raised
UnicodeDecodeError, a package whose mod.so was swapped inspected clean and ran the other
code, a sparse tar member took 1 GiB, an 8 MB npz inflated to 8 GiB, a FIFO hung, and
``-o X.tar`` followed a symlink planted at ``X.tar.tmp``.
"""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

import numpy as np
import pytest

from ember.cli import run_cmd
from ember.cli.main import main
from ember.errors import (
    ArtifactError,
    EmberValueError,
    FrontendError,
    ModuleLoadError,
    SerializationError,
)
from ember.executor import GraphExecutor
from ember.formats.package import read_package
from ember.runtime import cpu, load_artifacts
from ember.runtime.artifact_set import ArtifactSet
from ember.runtime.library_module import LibraryModule
from ember.support.tarball import read_tar, write_tar
from ember.tools.inspectors.sources import read_artifact_source
from ember.tools.package import load_package, write_package

pytestmark = pytest.mark.cc


@pytest.fixture
def package(small_artifacts: ArtifactSet, tmp_path: Path) -> Path:
    """The small model written as a package."""
    return write_package(small_artifacts, tmp_path / "model.tar")


def test_exported_library_loads_by_absolute_path(
    small_artifacts: ArtifactSet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    small_artifacts.export_library(tmp_path / "m0.so")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path / "elsewhere"))
    factory, _ = run_cmd.load_factory(Path("m0.so"))
    libs = [m for m in factory.imports if isinstance(m, LibraryModule)]
    assert libs and all(m.path.is_absolute() for m in libs)


def test_dlopen_errors_are_decoded_safely(tmp_path: Path) -> None:
    bad = Path(os.fsdecode(bytes(tmp_path) + b"/\xff\xfe-lib.so"))
    bad.write_bytes(b"\x7fELF" + b"\x02\x01\x01" + b"\0" * 200)
    with pytest.raises(ModuleLoadError, match="could not load"):
        LibraryModule(bad)


def test_package_with_a_swapped_library_is_refused(
    package: Path, other_artifacts: ArtifactSet, tmp_path: Path
) -> None:
    meta, files = read_package(package)
    other = write_package(other_artifacts, tmp_path / "other.tar")
    _, other_files = read_package(other)
    for keep_hash in (True, False):
        swapped = dict(files, **{"mod.so": other_files["mod.so"]})
        if not keep_hash:  # package.json edited too: the embedded artifacts still disagree
            swapped["package.json"] = read_package(other)[1]["package.json"]
        hostile = write_tar(tmp_path / f"swapped-{keep_hash}.tar", swapped)
        with pytest.raises(ArtifactError, match="mod.so|artifacts"):
            load_package(hostile, tmp_path)
        assert "MISMATCH" in read_artifact_source(hostile).kind
        assert main(["run", str(hostile)]) == 1
    assert "matches the artifact tree" in read_artifact_source(package).kind


def _tar_with(member: tarfile.TarInfo) -> bytes:
    """A tar holding only the header of ``member`` (whatever size it declares) and padding."""
    return member.tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape") + b"\0" * 4096


def test_tar_members_declaring_more_than_the_archive_are_refused(tmp_path: Path) -> None:
    info = tarfile.TarInfo("mod.so")
    info.size = 1 << 30
    path = tmp_path / "big.tar"
    path.write_bytes(_tar_with(info))
    with pytest.raises(SerializationError):
        read_tar(path)
    sparse = tarfile.TarInfo("mod.so")
    sparse.type = tarfile.GNUTYPE_SPARSE
    sparse.size = 1 << 30
    path.write_bytes(_tar_with(sparse))
    with pytest.raises(SerializationError, match="sparse|not a readable"):
        read_tar(path)
    many = {f"f{i}": b"" for i in range(20)}
    with pytest.raises(SerializationError, match="entries"):
        read_tar(write_tar(tmp_path / "many.tar", many), max_entries=10)


def test_npz_bombs_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "bomb.npz"
    np.savez_compressed(path, x=np.zeros(1 << 22, np.float32))  # 16 MB inflated, tiny on disk
    assert path.stat().st_size < 1 << 20
    with pytest.raises(SerializationError, match="limits"):
        run_cmd._load_inputs(path, max_bytes=1 << 20)
    path.write_bytes(b"PK\x03\x04 not a zip")
    with pytest.raises(SerializationError):
        run_cmd._load_inputs(path)


def test_a_fifo_is_never_opened(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "model.tar"
    os.mkfifo(fifo)
    assert main(["run", str(fifo)]) == 2  # refused as a bad argument, before any open
    assert main(["run", str(fifo.with_suffix(".so"))]) == 2
    assert main(["inspect", str(fifo)]) == 1
    with pytest.raises(SerializationError, match="regular file"):
        read_tar(fifo)
    assert "not a regular file" in capsys.readouterr().err


def test_benchmark_arguments_are_checked_before_c(small_artifacts: ArtifactSet) -> None:
    ge = GraphExecutor(load_artifacts(small_artifacts)["default"](cpu(0)))
    ge.set_input("x", np.ones((2, 3), np.float32))
    for kw in ({"min_repeat_ms": 10**15}, {"number": 2**40}, {"repeat": -1}):
        with pytest.raises(EmberValueError):
            ge.benchmark(cpu(0), **kw)


def test_sparse_initializer_dims_are_bounded() -> None:
    onnx = pytest.importorskip("onnx")
    from ember.frontend import from_onnx  # noqa: PLC0415

    helper, tp = onnx.helper, onnx.TensorProto
    values = helper.make_tensor("w", tp.FLOAT, [1], [1.0])
    indices = helper.make_tensor("w_i", tp.INT64, [1], [5])
    sparse = helper.make_sparse_tensor(values, indices, [2**34])
    graph = helper.make_graph(
        [helper.make_node("Identity", ["w"], ["y"])],
        "g",
        [],
        [helper.make_tensor_value_info("y", tp.FLOAT, [2**34])],
        sparse_initializer=[sparse],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(FrontendError, match="sparse"):
        from_onnx(model)
    bad_index = helper.make_sparse_tensor(
        values, helper.make_tensor("w_i", tp.INT64, [1], [9]), [4]
    )
    graph.ClearField("sparse_initializer")
    graph.sparse_initializer.append(bad_index)
    graph.output[0].CopyFrom(helper.make_tensor_value_info("y", tp.FLOAT, [4]))
    with pytest.raises(FrontendError, match="sparse"):
        from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))


def test_outputs_are_written_atomically_without_following_links(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep")
    out = tmp_path / "X.tar"
    os.symlink(victim, tmp_path / "X.tar.tmp")
    write_tar(out, {"a": b"data"})
    assert victim.read_text() == "keep"
    assert read_tar(out) == {"a": b"data"}
    with pytest.raises(SerializationError, match="directory"):
        write_tar(tmp_path, {"a": b""})
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp") and not p.is_symlink()]


def test_run_leaves_no_temporary_directory(
    package: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(scratch))
    factory, _ = run_cmd.load_factory(package)
    assert list(scratch.iterdir()) == []  # removed before any model code runs
    out = tmp_path / "out.npz"
    assert main(["run", str(package), "--outputs", str(out)]) == 0
    assert out.is_file() and list(scratch.iterdir()) == []
