"""Deterministic tar writing and hostile-tar refusal."""

import io
import tarfile

import pytest

from ember.errors import SerializationError
from ember.support.tarball import read_tar, tar_bytes, write_tar


def test_deterministic_and_round_trip(tmp_path):
    files = {"b/x.txt": b"x" * 1000, "a.json": b"{}"}
    assert tar_bytes(files) == tar_bytes(dict(reversed(list(files.items()))))
    path = write_tar(tmp_path / "t.tar", files)
    assert read_tar(path) == files
    with tarfile.open(path) as tar:
        assert [m.name for m in tar] == ["a.json", "b/x.txt"]
        assert all(m.mtime == 0 and m.uid == 0 for m in tar)


def _raw_tar(tmp_path, build):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        build(tar)
    p = tmp_path / "evil.tar"
    p.write_bytes(buf.getvalue())
    return p


@pytest.mark.parametrize("name", ["../escape", "/etc/passwd", "a/../../b", "a\\b"])
def test_path_traversal_refused(tmp_path, name):
    def build(tar):
        info = tarfile.TarInfo(name)
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))

    with pytest.raises(SerializationError, match="unsafe entry name"):
        read_tar(_raw_tar(tmp_path, build))


def test_links_duplicates_and_limits_refused(tmp_path):
    def link(tar):
        info = tarfile.TarInfo("lnk")
        info.type = tarfile.SYMTYPE
        info.linkname = "/etc/passwd"
        tar.addfile(info)

    with pytest.raises(SerializationError, match="not a regular file"):
        read_tar(_raw_tar(tmp_path, link))

    def dup(tar):
        for _ in range(2):
            info = tarfile.TarInfo("same")
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))

    with pytest.raises(SerializationError, match="duplicate"):
        read_tar(_raw_tar(tmp_path, dup))
    big = write_tar(tmp_path / "big.tar", {"a": b"x" * 100, "b": b"y"})
    with pytest.raises(SerializationError, match="exceed"):
        read_tar(big, max_total_bytes=50)
    with pytest.raises(SerializationError, match="more than 1 entries"):
        read_tar(big, max_entries=1)


def test_truncated_or_garbage_refused(tmp_path):
    good = tar_bytes({"a": b"x" * 5000})
    (tmp_path / "cut.tar").write_bytes(good[:1500])
    with pytest.raises(SerializationError):
        read_tar(tmp_path / "cut.tar")
    (tmp_path / "junk.tar").write_bytes(b"\x00garbage" * 10)
    with pytest.raises(SerializationError):
        read_tar(tmp_path / "junk.tar")
