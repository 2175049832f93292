"""Every flag's bad values: one line on stderr, exit code 2, no traceback, and for
``ember compile`` the refusal comes before the compile runs."""

from __future__ import annotations

import shlex
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ember.cli.main import main

pytestmark = pytest.mark.cc


def _model() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding m.onnx, its package m.tar and a few input files."""
    root = tmp_path_factory.mktemp("flags")
    onnx.save(_model(), root / "m.onnx")
    assert main(["compile", str(root / "m.onnx"), "-o", str(root / "m.tar"), "--quiet"]) == 0
    np.savez(root / "other.npz", z=np.zeros((2, 3), "float32"))
    np.savez(root / "wrong.npz", x=np.zeros((1, 7), "float32"))
    np.savez(root / "flat.npz", x=np.zeros((6,), "float32"))
    np.save(root / "x.npy", np.ones((2, 3), "float32"))
    (root / "afile").write_text("not a directory")
    (root / "adir").mkdir()
    return root


# (arguments with {d} for the work directory, a fragment of the one-line message)
CASES = [
    ("compile", "pass the ONNX model"),
    ("compile {d}/none.onnx", "no such file"),
    ("compile {d}/adir", "not a regular file"),
    ("compile {d}/m.onnx -o {d}/nodir/x.tar", "does not exist; create it first"),
    ("compile {d}/m.onnx -o {d}/adir", "is a directory"),
    ("compile {d}/m.onnx --opt-level 5", "expected an integer 0-3, got 5"),
    ("compile {d}/m.onnx --opt-level two", "expected an integer, got 'two'"),
    ("compile {d}/m.onnx --input-shape x", "expected NAME:D1,D2,..."),
    ("compile {d}/m.onnx --input-shape x:a,b", "dimensions must be integers"),
    ("compile {d}/m.onnx --input-shape x:-1,3", "dimensions must be >= 0"),
    ("compile {d}/m.onnx --format zip", "invalid choice: 'zip'"),
    ("compile {d}/m.onnx --seed -1", "expected an integer"),
    ("compile {d}/m.onnx --executor nope", "unknown executor 'nope'"),
    ("compile {d}/m.onnx --target cuda", "--list-targets"),
    ("compile {d}/m.onnx --target 'c -opt-level=9'", "must be 0-3"),
    ("compile {d}/m.onnx --mod-name 1x", "pass a C identifier"),
    ("compile {d}/m.onnx --save-artifacts {d}/afile", "exists and is not a directory"),
    ("compile {d}/m.onnx --bogus", "unrecognized arguments: --bogus"),
    ("run", "the following arguments are required: package"),
    ("run {d}/none.tar", "no such file"),
    ("run {d}/adir", "not a regular file"),
    ("run {d}/m.tar --inputs {d}/none.npz", "--inputs {d}/none.npz: no such file"),
    ("run {d}/m.tar --inputs {d}/adir", "not a regular file"),
    ("run {d}/m.tar --inputs {d}/other.npz", "are not model inputs"),
    ("run {d}/m.tar --inputs {d}/wrong.npz", "--input-shape x:1,7"),
    ("run {d}/m.tar --inputs {d}/flat.npz", "reshaped to (2, 3)"),
    ("run {d}/m.tar --outputs {d}/nodir/o.npz", "does not exist"),
    ("run {d}/m.tar --outputs {d}/adir", "is a directory"),
    ("run {d}/m.tar --repeat 0", "--repeat: expected an integer 1-"),
    ("run {d}/m.tar --number -1", "--number: expected an integer 1-"),
    ("run {d}/m.tar --max-seconds 0", "expected a number > 0"),
    ("run {d}/m.tar --max-seconds inf", "expected a number > 0"),
    ("run {d}/m.tar --print-top -1", "--print-top: expected an integer 0-"),
    ("run {d}/m.tar --threads 2000", "--threads: expected an integer 0-1024"),
    ("run {d}/m.tar --threads x", "expected an integer, got 'x'"),
    ("run {d}/m.tar --seed -5", "--seed: expected an integer"),
    ("rpc server --port abc", "--port: expected an integer, got 'abc'"),
    ("rpc server --port 70000", "expected an integer 0-65535, got 70000"),
    ("rpc server --max-sessions 0", "--max-sessions: expected an integer 1-"),
    ("rpc server --max-frame 0", "--max-frame: expected an integer 1-"),
    ("rpc server --idle-timeout -1", "expected a number > 0"),
    ("rpc server --work-dir {d}/nodir", "no such directory"),
    ("rpc server --token-file {d}/none", "no such regular file"),
    ("rpc tracker --port -5", "expected an integer 0-65535"),
    ("rpc tracker --max-lifetime 0", "expected a number > 0"),
    ("rpc status --tracker nohost", "expected HOST:PORT"),
    ("rpc status --token-file {d}/adir", "no such regular file"),
    ("rpc", "required: {server,tracker,status}"),
    ("--bogus", "unrecognized arguments: --bogus"),
    ("frobnicate", "invalid choice: 'frobnicate'"),
]


@pytest.mark.parametrize(("argv", "message"), CASES, ids=[c[0] for c in CASES])
def test_bad_value_is_one_line_and_exit_2(
    work: Path, argv: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    words = shlex.split(argv.replace("{d}", str(work)))
    try:
        code = main(words)
    except SystemExit as exc:  # refused by the parser itself
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("ember") and err.count("\n") == 1, err
    assert "Traceback" not in err
    assert message.replace("{d}", str(work)) in err
    assert ".reshape" not in err and "from_onnx" not in err  # CLI advice, not Python's


def test_output_path_is_checked_before_compiling(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("the model was imported before -o was checked")

    monkeypatch.setattr("ember.cli.compile_cmd.from_onnx", fail)
    assert main(["compile", str(work / "m.onnx"), "-o", str(work / "nodir" / "m.tar")]) == 2


def test_a_single_npy_feeds_the_one_input(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = work / "out.npz"
    assert (
        main(["run", str(work / "m.tar"), "--inputs", str(work / "x.npy"), "--outputs", str(out)])
        == 0
    )
    (got,) = np.load(out).values()
    np.testing.assert_array_equal(got, np.ones((2, 3), "float32"))


def test_print_time_is_bounded(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "run",
        str(work / "m.tar"),
        "--print-time",
        "--number",
        "1000000",
        "--max-seconds",
        "0.05",
    ]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "timing 5 x" in captured.err and "--max-seconds" in captured.err
    assert "latency ms" in captured.out


def test_version_and_list_targets(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith("ember ")
    assert main(["compile", "--list-targets"]) == 0
    listing = capsys.readouterr().out
    assert "c: " in listing and "-mcpu=<str>" in listing and "-opt-level=<int>" in listing


def test_help_is_not_a_traceback_and_inspect_mentions_tars(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["inspect", "--help"])
    assert "package (.tar)" in capsys.readouterr().out


def test_print_time_lowers_repeat_too(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", str(work / "m.tar"), "--print-time", "--repeat", "1000000", "--number", "1"]
    assert main([*argv, "--max-seconds", "1e-7"]) == 0
    assert "timing 1 x 1 runs" in capsys.readouterr().err
