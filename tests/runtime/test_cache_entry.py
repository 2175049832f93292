"""Verified cache entries (ember.runtime.cache_entry) built by several processes at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from ember.runtime.cache_entry import HASH_SUFFIX, cached_build, verify_entry


def test_an_entry_being_recorded_is_never_deleted_by_a_concurrent_build(tmp_path: Path) -> None:
    # CI once failed with "[Errno 2] No such file or directory: .../native-....so": a second
    # process found the first one's library before its hash record, deleted it as stale and
    # the first one's record then hashed a missing file. The second build here runs at that
    # moment (inside the first); it fails, as a slow or broken build may.
    out = tmp_path / "lib.so"
    seen: list[bool] = []

    def broken(path: Path) -> None:
        seen.append(out.exists())
        raise OSError("the other process's compiler failed")

    def first(path: Path) -> None:
        path.write_bytes(b"library")
        with pytest.raises(OSError, match="compiler failed"):
            cached_build(out, broken)

    # the first process built the entry earlier but has not recorded it yet
    out.write_bytes(b"library")
    assert cached_build(out, first) == out
    assert seen == [True]  # the entry was still there while the other build ran
    assert out.read_bytes() == b"library" and verify_entry(out)


def test_builds_write_only_a_private_file_and_rename_it_over_the_entry(tmp_path: Path) -> None:
    out = tmp_path / "lib.so"
    paths: list[Path] = []

    def build(path: Path) -> None:
        paths.append(path)
        assert not out.exists()  # nothing appears at the entry before the build ends
        path.write_bytes(b"v1")

    assert cached_build(out, build) == out
    assert paths[0] != out and paths[0].name == out.name and not paths[0].exists()
    assert out.read_bytes() == b"v1" and verify_entry(out)
    assert cached_build(out, build) == out and len(paths) == 1  # verified: not rebuilt
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lib.so", "lib.so" + HASH_SUFFIX]


def test_a_planted_link_is_replaced_not_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    out = tmp_path / "lib.so"
    out.symlink_to(victim)
    assert cached_build(out, lambda p: p.write_bytes(b"built")) == out
    assert victim.read_bytes() == b"keep" and not out.is_symlink()
    assert out.read_bytes() == b"built"


def test_a_failed_build_leaves_no_entry_and_no_litter(tmp_path: Path) -> None:
    out = tmp_path / "lib.so"

    def fail(path: Path) -> None:
        path.write_bytes(b"half")
        raise OSError("compiler failed")

    with pytest.raises(OSError, match="compiler failed"):
        cached_build(out, fail)
    assert list(tmp_path.iterdir()) == []
