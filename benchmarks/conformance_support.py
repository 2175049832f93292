"""docs/onnx_support.md: the generated tables of supported ONNX ops and remaining failures.

Two parts of the page are generated, each between ``<!-- BEGIN GENERATED: x -->`` and
``<!-- END GENERATED: x -->`` markers; the prose around them is kept as written.

- ``ops``: every op from the importer's registry (handler opsets, input dtypes), then the
  ops imported by expanding their ONNX function definition. Derived from the code only,
  so a test checks that the page matches it (``python benchmarks/conformance_support.py
  --check``).
- ``failures``: every case that does not pass, grouped by reason, from the JSON a sweep
  writes (``onnx_conformance.py --suite every --json results.json``).

    python benchmarks/conformance_support.py                       # rewrite the ops table
    python benchmarks/conformance_support.py --results results.json  # and the failures
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path

import onnx

import ember.frontend.onnx  # noqa: F401  (registers the handlers)
from ember.frontend.onnx.registry import HANDLERS, find_handler

DOC = Path(__file__).resolve().parents[1] / "docs" / "onnx_support.md"

#: dtype groups written by name when a handler takes all of them.
_FLOATS = {"float16", "bfloat16", "float32", "float64"}
_INTS = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}


def _dtype_text(dtypes: frozenset[str] | None) -> str:
    if dtypes is None:
        return "any"
    left = set(dtypes)
    parts = []
    for label, group in (("floats", _FLOATS), ("ints", _INTS)):
        if group <= left:
            parts.append(label)
            left -= group
    parts += sorted(left)
    return ", ".join(parts)


def ops_table() -> str:
    """The markdown table of supported ops, from the handler registry and onnx's schemas."""
    rows = ["| op | domain | handler since opsets | input dtypes |", "| --- | --- | --- | --- |"]
    for key in sorted(HANDLERS.names(), key=str.lower):
        versions = HANDLERS.get(key)
        first = versions[min(versions)]
        sinces = ", ".join(str(v) for v in sorted(versions))
        dtypes = _dtype_text(versions[max(versions)].dtypes)
        rows.append(f"| {first.op_type} | {first.domain or 'ai.onnx'} | {sinces} | {dtypes} |")
    newest = onnx.defs.onnx_opset_version()
    expanded = []
    for schema in onnx.defs.get_all_schemas():
        if schema.domain not in ("", "ai.onnx") or schema.deprecated:
            continue
        if find_handler(schema.name, newest) is not None:
            continue
        versions: list[int] = [
            *schema.function_opset_versions,  # type: ignore[attr-defined]
            *schema.context_dependent_function_opset_versions,  # type: ignore[attr-defined]
        ]
        if versions:
            expanded.append(f"| {schema.name} | {schema.since_version} |")
    lines = [
        f"{len(rows) - 2} ops have handlers (onnx {onnx.__version__}, opsets up to {newest}).",
        "",
        *rows,
        "",
        "Ops without a handler that import by expanding their ONNX function definition "
        "(when every op of the body is supported):",
        "",
        "| op | since opset |",
        "| --- | --- |",
        *sorted(expanded, key=str.lower),
    ]
    return "\n".join(lines)


def _reason(result: Mapping[str, str]) -> str:
    """A short, groupable reason for one non-passing result."""
    detail = result.get("detail", "")
    status = result["status"]
    if "float16 is not supported" in detail or "bfloat16 is not supported" in detail:
        return "float16/bfloat16 kernels in the C back end (issue 16)"
    if re.search(r"dtype b?float16 is not supported", detail):
        return "float16/bfloat16 kernels in the C back end (issue 16)"
    if status == "unsupported":
        match = re.match(r"-?\s*(\w+) \(domain ([\w.]+)", detail)
        if match:
            return f"unsupported op {match.group(1)} ({match.group(2)})"
        return f"unsupported: {detail.split(';')[0][:90]}"
    if "element type STRING" in detail or "string" in detail.lower():
        return "string tensors"
    first = detail.split(":")[0] if detail else status
    return f"{status}: {first[:60]}"


def failures_section(results: Sequence[Mapping[str, str]]) -> str:
    """Every non-passing, non-excluded case grouped by reason (most cases first)."""
    groups: dict[str, list[str]] = defaultdict(list)
    for r in results:
        if r["status"] in ("pass", "excluded"):
            continue
        groups[_reason(r)].append(f"{r['suite']}/{r['case']}")
    lines = []
    for reason, cases in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        lines.append(f"- **{reason}** ({len(cases)}): " + ", ".join(sorted(cases)))
    total = sum(len(c) for c in groups.values())
    return "\n".join([f"{total} cases do not pass (frozen, compiled):", "", *lines])


def replace_block(text: str, name: str, body: str) -> str:
    """``text`` with the generated block ``name`` replaced by ``body``."""
    begin, end = f"<!-- BEGIN GENERATED: {name} -->", f"<!-- END GENERATED: {name} -->"
    if begin not in text or end not in text:
        raise SystemExit(f"{DOC} has no '{begin}' ... '{end}' block")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{body}\n{end}{tail}"


def read_block(text: str, name: str) -> str:
    """The current content of the generated block ``name``."""
    begin, end = f"<!-- BEGIN GENERATED: {name} -->", f"<!-- END GENERATED: {name} -->"
    return text.split(begin, 1)[1].split(end, 1)[0].strip("\n")


def main(argv: Sequence[str] | None = None) -> int:
    """Rewrite (or with --check, verify) the generated parts of docs/onnx_support.md."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", help="a sweep's JSON (onnx_conformance.py --json)")
    parser.add_argument("--check", action="store_true", help="exit 1 if the ops table drifted")
    args = parser.parse_args(argv)
    text = DOC.read_text()
    table = ops_table()
    if args.check:
        if read_block(text, "ops") != table:
            print(f"{DOC} is out of date: run python benchmarks/conformance_support.py")
            return 1
        return 0
    text = replace_block(text, "ops", table)
    if args.results:
        results = json.loads(Path(args.results).read_text())
        frozen = [r for r in results if r.get("mode") == "compiled"]
        text = replace_block(text, "failures", failures_section(frozen))
    DOC.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
