"""``ember inspect``: the fused graph with ONNX node names, JSON views, the HTML report
(opened in headless Chromium and checked by screenshot and DOM)."""

import json
import shutil
import struct
import subprocess
import zlib

import onnx
import pytest
from names_models import two_output_model

from ember.cli.main import main

pytestmark = pytest.mark.cc

WIDTH, HEIGHT = 1200, 900


@pytest.fixture(name="built", scope="module")
def fixture_built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("inspect")
    onnx.save(two_output_model(), tmp / "m.onnx")
    for executor in ("graph", "aot"):
        out = tmp / f"{executor}.tar"
        args = ["compile", str(tmp / "m.onnx"), "-o", str(out), "--executor", executor]
        assert main([*args, "--quiet"]) == 0
    assert main(["run", str(tmp / "graph.tar"), "--profile-json", str(tmp / "p.json")]) == 0
    return tmp


@pytest.mark.parametrize("executor", ["graph", "aot"])
def test_show_graph_names_the_onnx_nodes_of_each_kernel(built, capsys, executor):
    capsys.readouterr()
    assert main(["inspect", str(built / f"{executor}.tar"), "--show", "graph"]) == 0
    text = capsys.readouterr().out
    assert "onnx nodes: conv_a, relu_a" in text and "op types:   Conv, Relu" in text
    assert "outputs: probs = " in text and "pooled = " in text


def test_every_view_as_json(built, capsys):
    pkg = str(built / "graph.tar")
    capsys.readouterr()
    assert main(["inspect", pkg, "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert {a["file_name"] for a in listing["artifacts"]} >= {"lib0.c", "graph.json"}
    assert main(["inspect", pkg, "--show", "graph", "--json"]) == 0
    graph = json.loads(capsys.readouterr().out)
    assert graph["outputs"] == ["probs", "pooled"]
    assert any(k["onnx_nodes"] == ["conv_a", "relu_a"] for k in graph["graph"])
    assert main(["inspect", pkg, "--show", "metadata.json", "--json"]) == 0
    meta = json.loads(capsys.readouterr().out)
    assert [o["name"] for o in meta["content"]["outputs"]] == ["probs", "pooled"]
    assert main(["inspect", pkg, "--show", "lib0.c", "--json"]) == 0
    assert "ember_sigmoid" in json.loads(capsys.readouterr().out)["text"]


def _png_size_and_colors(data: bytes) -> tuple[int, int, int]:
    """Width, height and the number of distinct byte values of the decoded pixel rows."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    pos, idat = 8, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        if data[pos + 4 : pos + 8] == b"IDAT":
            idat += data[pos + 8 : pos + 8 + length]
        pos += 12 + length
    return width, height, len(set(zlib.decompress(idat)))


def _chromium(tmp_path, *args: str) -> subprocess.CompletedProcess:
    exe = shutil.which("chromium")
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
        f"--window-size={WIDTH},{HEIGHT}",
    ]
    return subprocess.run(
        [exe, *flags, *args], capture_output=True, text=True, timeout=180, check=True
    )


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium")
@pytest.mark.parametrize("executor", ["graph", "aot"])
def test_html_report_in_headless_chromium(built, tmp_path, executor):
    page = tmp_path / "report.html"
    args = ["inspect", str(built / f"{executor}.tar"), "--html", str(page)]
    assert main([*args, "--profile", str(built / "p.json")]) == 0
    html = page.read_text()
    assert "<script" not in html and "http://" not in html.replace("http://www.w3.org", "")
    shot = tmp_path / "shot.png"
    _chromium(tmp_path, f"--screenshot={shot}", page.as_uri())
    width, height, colors = _png_size_and_colors(shot.read_bytes())
    assert (width, height) == (WIDTH, HEIGHT) and colors > 8  # not a blank page
    dom = _chromium(tmp_path, "--dump-dom", page.as_uri()).stdout
    for name in ("ember_fused_nn_conv_add_relu", "ember_sigmoid", "conv_a", "relu_a", "gap_a"):
        assert name in dom
    assert 'id="kernels"' in dom and 'id="memory-map"' in dom and "<svg" in dom
    assert 'id="op-types"' in dom and "Conv+Relu" in dom  # the profile's totals
