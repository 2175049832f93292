"""LocalSession: the session API in process - files confined to the session directory,
remote arrays, remote modules under the graph and AOT executors."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from rpc_util import local_outputs, model_inputs

import ember
from ember.errors import RPCError
from ember.rpc import LocalSession, RemoteModule, RemoteNDArray, check_name

BAD_NAMES = ["", "..", "../x", "a/../b", "/etc/passwd", "a/b", "a\\b", "a\0b", ".", "x" * 300]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_file_names_must_be_plain(name: str) -> None:
    with pytest.raises(RPCError, match="not a plain file name"):
        check_name(name)


def test_files_upload_download_remove_and_cleanup(tmp_path: Path) -> None:
    src = tmp_path / "blob.bin"
    src.write_bytes(os.urandom(10_000))
    sess = LocalSession()
    directory = Path(sess.directory)
    assert sess.upload(src) == "blob.bin"
    sess.upload(b"abc", "small.txt")
    assert sess.listdir() == ["blob.bin", "small.txt"]
    assert sess.download("blob.bin") == src.read_bytes()
    sess.remove("small.txt")
    assert sess.listdir() == ["blob.bin"]
    for name in BAD_NAMES:
        with pytest.raises(RPCError, match="not a plain file name"):
            sess.upload(b"x", name)
    with pytest.raises(RPCError, match="no file 'missing'"):
        sess.download("missing")
    sess.close()
    sess.close()
    assert not directory.exists()
    with pytest.raises(RPCError, match="closed session"):
        sess.listdir()


def test_symlinks_in_the_session_directory_are_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    with LocalSession() as sess:
        os.symlink(outside, Path(sess.directory) / "link")
        for call in (
            lambda: sess.download("link"),
            lambda: sess.remove("link"),
            lambda: sess.upload(b"evil", "link"),
            lambda: sess.load_module("link"),
        ):
            with pytest.raises(RPCError, match="not a regular file"):
                call()
    assert outside.read_text() == "keep"


def test_upload_limit_and_chunk_order() -> None:
    with LocalSession(max_upload=100) as sess:
        with pytest.raises(RPCError, match="exceeds the limit of 100 bytes"):
            sess.upload(b"x" * 101, "big")
        assert "big" not in sess.listdir()
        sess.upload(b"abc", "f")
        with pytest.raises(RPCError, match="chunk at 5, file has 3 bytes"):
            sess._request(ember.rpc.protocol.Msg.UPLOAD, ("f", 5, b"x"), "upload")


def test_remote_arrays_live_on_the_server() -> None:
    with LocalSession() as sess:
        dev = sess.cpu(0)
        x = np.arange(6, dtype="float32").reshape(2, 3)
        arr = ember.nd.array(x, dev)
        assert isinstance(arr, RemoteNDArray) and arr.shape == (2, 3) and arr.dtype == "float32"
        assert np.array_equal(arr.numpy(), x)
        arr[:] = 7
        assert arr.numpy().sum() == 42
        empty = ember.nd.empty((4,), "int32", dev)
        assert empty.numpy().shape == (4,)
        assert str(dev).startswith("remote[") and dev.local == ember.cpu(0)
        echo = sess.get_function("rpc.echo")
        assert np.array_equal(echo(arr).numpy(), arr.numpy())
        count = len(sess.handler.objects)
        del arr, empty
        echo(1)
        assert len(sess.handler.objects) < count


def test_unknown_functions_and_stale_handles_are_errors() -> None:
    with LocalSession() as sess:
        with pytest.raises(RPCError, match="get_function"):
            sess.get_function("no.such.function")
        with pytest.raises(RPCError, match="no module with handle 999"):
            RemoteModule(sess, 999, "x").function_names()


@pytest.mark.cc
@pytest.mark.parametrize("kind", ["graph", "aot"])
def test_remote_executors_match_a_local_run(kind: str, graph_lib: Path, aot_lib: Path) -> None:
    lib = graph_lib if kind == "graph" else aot_lib
    want = local_outputs(lib, kind, model_inputs())
    cls = ember.AotExecutor if kind == "aot" else ember.GraphExecutor
    with LocalSession() as sess:
        sess.upload(lib, "model.so")
        dev = sess.cpu(0)
        ex = cls(sess.load_module("model.so")["default"](dev))
        ex.set_input(**model_inputs())
        ex.run()
        got = [ex.get_output(i).numpy() for i in range(ex.get_num_outputs())]
        assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))
        assert ex.get_input_info()["shape"]["x"] in ([2, 64], (2, 64))
        result = ex.benchmark(dev, repeat=2, number=3)
        assert len(result.results) == 2 and result.mean > 0


def test_free_ignores_handles_that_are_not_integers() -> None:
    with LocalSession() as sess:
        frame = ember.rpc.protocol.pack_frame(ember.rpc.protocol.Msg.FREE, 0, (["x", [1], 5],))
        assert sess.handler.handle_frame(frame[4:]) is None
        assert sess.get_function("rpc.echo")(2) == 2
