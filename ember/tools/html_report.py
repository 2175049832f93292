"""``ember inspect --html report.html``: one self-contained page about a build.

The page holds the fused graph (one row per kernel: the ONNX nodes fused into it, their
op types, its outputs), the time of each kernel and the totals per op type when a profile
written by ``ember run --profile-json`` is given, and the memory map drawn as an inline
SVG (:mod:`ember.tools.memory_svg`: the AOT workspace when the build has a
``memory_map.json``, else the graph executor's storage plan). No script, no external
file, no date: the same inputs give the same bytes::

    page = html_report("model.tar", source.kind, graph, memory_map, profile)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from ember.formats.graph_json import GraphJSON
from ember.formats.memory_map import MemoryMap
from ember.tools.inspectors.graph_view import kernel_rows
from ember.tools.memory_svg import memory_map_svg

_STYLE = """
body { font-family: sans-serif; margin: 24px; color: #222; background: #fff; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 28px; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #eef2f7; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.bar { background: #4e79a7; height: 10px; display: inline-block; }
code { font-size: 12px; }
"""


def _cell(text: str, cls: str = "") -> str:
    attr = f' class="{cls}"' if cls else ""
    return f"<td{attr}>{escape(text)}</td>"


def _kernel_table(graph: GraphJSON, times: Mapping[str, float], total_us: float) -> list[str]:
    timed = bool(times)
    head = ["Step", "Kernel", "ONNX nodes", "Op types", "Outputs"]
    head += ["Time (us)", "Share"] if timed else []
    out = ['<table id="kernels">', "<tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"]
    for step, row in enumerate(kernel_rows(graph)):
        shapes = "; ".join(f"{o['shape']} {o['dtype']}" for o in row["outputs"])
        cells = [
            _cell(str(step), "num"),
            f'<td><code class="kernel-name">{escape(row["name"])}</code></td>',
            "<td>"
            + ", ".join(f'<span class="onnx-node">{escape(n)}</span>' for n in row["onnx_nodes"])
            + "</td>",
            _cell(", ".join(row["op_types"]) or ", ".join(row["ops"])),
            _cell(shapes),
        ]
        if timed:
            us = times.get(row["name"], 0.0)
            pct = 100.0 * us / total_us if total_us else 0.0
            cells.append(_cell(f"{us:.2f}", "num"))
            cells.append(
                f'<td><span class="bar" style="width:{pct * 2:.1f}px"></span> {pct:.1f}%</td>'
            )
        out.append(
            f'<tr class="kernel" data-name="{escape(row["name"])}">' + "".join(cells) + "</tr>"
        )
    out.append("</table>")
    return out


def _op_type_table(by_op_type: Sequence[Mapping[str, Any]]) -> list[str]:
    out = [
        '<table id="op-types">',
        "<tr><th>Op type</th><th>Kernels</th><th>Time (us)</th><th>Share</th></tr>",
    ]
    for t in by_op_type:
        out.append(
            "<tr>"
            + _cell(str(t.get("op_type", "")))
            + _cell(str(t.get("kernels", "")), "num")
            + _cell(f"{float(t.get('time_us', 0.0)):.2f}", "num")
            + _cell(f"{float(t.get('percent', 0.0)):.1f}%", "num")
            + "</tr>"
        )
    out.append("</table>")
    return out


def html_report(
    title: str,
    kind: str,
    graph: GraphJSON,
    memory_map: MemoryMap | None,
    profile: Mapping[str, Any] | None = None,
) -> str:
    """The page's HTML text; ``profile`` is the JSON object ``ember run --profile-json``
    writes (its rows are matched to kernels by node name)."""
    rows = list(profile.get("rows", [])) if profile else []
    times = {str(r.get("name")): float(r.get("time_us", 0.0)) for r in rows}
    total = float(profile.get("total_us", 0.0)) if profile else 0.0
    kernels = kernel_rows(graph)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>ember report: {escape(title)}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>ember report: <code>{escape(title)}</code></h1>",
        f'<p id="summary">{escape(kind)}. {len(kernels)} kernels, '
        f"{len(graph.arg_nodes)} inputs and parameters, outputs: "
        f"{escape(', '.join(graph.output_names or ()))}"
        + (
            f". Profiled: {total:.2f} us per run (means over {profile.get('repeat')} runs)."
            if profile
            else ". No profile given (ember run --profile-json, then --profile)."
        )
        + "</p>",
        "<h2>Fused graph</h2>",
        *_kernel_table(graph, times, total),
    ]
    if profile:
        parts += ["<h2>Time per op type</h2>", *_op_type_table(profile.get("by_op_type", []))]
    if memory_map is not None:
        parts += [
            "<h2>Memory map</h2>",
            f"<p>{escape(memory_map.algorithm)}: {memory_map.workspace_size_bytes} bytes, "
            f"lower bound {memory_map.lower_bound_bytes}. Hover a buffer for its kernel.</p>",
            f'<div id="memory-map">{memory_map_svg(memory_map)}</div>',
        ]
    parts += ["</body></html>", ""]
    return "\n".join(parts)
