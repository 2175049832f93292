"""Conformance reports: ``Result`` rows -> text tables by op and a markdown coverage table.

``summarize`` counts passes (excluded cases are not counted), ``format_table`` prints one
mode's counts by op and the overall rate, ``format_comparison`` reference and compiled side
by side, and ``coverage_markdown`` every registered ONNX handler with its opsets, dtypes and
results (docs/frontend.md). Pure functions of the results, rows sorted by op.
"""

from __future__ import annotations

from collections.abc import Sequence

from conformance_cases import Result


def summarize(results: Sequence[Result]) -> tuple[int, int]:
    """(passed, counted) where excluded cases are not counted."""
    counted = [r for r in results if r.status != "excluded"]
    return sum(r.status == "pass" for r in counted), len(counted)


def format_table(results: Sequence[Result], verbose: bool = False) -> str:
    """A table of pass counts by op, failures (when verbose) and the overall rate."""
    by_op = _by_op(results)
    header = (
        f"{'op':<24}{'cases':>6}{'pass':>6}{'fail':>6}{'unsup':>6}{'error':>6}{'excl':>6}"
        f"{'rate':>8}"
    )
    lines = [header, "-" * len(header)]
    for op in sorted(by_op):
        rs = by_op[op]
        count = {
            s: sum(r.status == s for r in rs)
            for s in ("pass", "fail", "unsupported", "error", "excluded")
        }
        passed, counted = summarize(rs)
        rate = f"{100.0 * passed / counted:.1f}%" if counted else "-"
        lines.append(
            f"{op:<24}{len(rs):>6}{count['pass']:>6}{count['fail']:>6}"
            f"{count['unsupported']:>6}{count['error']:>6}{count['excluded']:>6}{rate:>8}"
        )
    passed, counted = summarize(results)
    overall = 100.0 * passed / counted if counted else 0.0
    lines.append("-" * len(header))
    lines.append(
        f"overall: {passed}/{counted} passed ({overall:.1f}%), {len(results) - counted} excluded"
    )
    if verbose:
        lines.extend(_not_passing(results, "not passing:"))
    return "\n".join(lines)


def _dtype_groups(dtypes: set[str]) -> str:
    """'float, int, bool' style summary of a dtype set (whole groups named once)."""
    from ember.frontend.onnx.registry import FLOAT_TYPES, INT_TYPES

    parts: list[str] = []
    rest = set(dtypes)
    for label, group in (("float*", FLOAT_TYPES), ("int*/uint*", INT_TYPES)):
        if group <= rest:
            parts.append(label)
            rest -= group
    return ", ".join(parts + sorted(rest))


def coverage_markdown(results: Sequence[Result]) -> str:
    """A markdown table of every registered ONNX handler with its opsets, dtypes and the
    conformance results of its cases (used to write docs/frontend.md)."""
    import ember.frontend.onnx  # noqa: F401  (registers the handlers)
    from ember.frontend.onnx.registry import HANDLERS

    by_op = _by_op(results)
    lines = [
        "| ONNX op | handlers since opset | input dtypes | node tests passed |",
        "|---|---|---|---|",
    ]
    for key in sorted(HANDLERS.names(), key=str.lower):
        versions = HANDLERS.get(key)
        sinces = ", ".join(str(v) for v in sorted(versions))
        dtype_sets = {h.dtypes for h in versions.values()}
        if None in dtype_sets:
            dtypes = "any"
        else:
            dtypes = _dtype_groups(set().union(*[d for d in dtype_sets if d is not None]))
        op = key.split("::")[-1]
        rs = by_op.get(op, [])
        passed, counted = summarize(rs)
        tests = f"{passed}/{counted}" if counted else "-"
        lines.append(f"| {key} | {sinces} | {dtypes} | {tests} |")
    return "\n".join(lines)


def format_comparison(
    reference: Sequence[Result], compiled: Sequence[Result], verbose: bool = False
) -> str:
    """Reference and compiled pass counts side by side, by op, and the overall rates.

    The compiled columns split what does not pass into unsupported (an op without a
    compute), fail (a wrong result) and error (a crash, in the compiler or the kernel).
    """
    ref_by_op = _by_op(reference)
    comp_by_op = _by_op(compiled)
    header = (
        f"{'op':<24}{'cases':>6}{'reference':>11}{'compiled':>10}"
        f"{'unsup':>7}{'fail':>6}{'error':>6}{'rate':>8}"
    )
    lines = [header, "-" * len(header)]
    for op in sorted(set(ref_by_op) | set(comp_by_op)):
        rs = ref_by_op.get(op, [])
        cs = comp_by_op.get(op, [])
        ref_pass, ref_counted = summarize(rs)
        comp_pass, comp_counted = summarize(cs)
        rate = f"{100.0 * comp_pass / comp_counted:.1f}%" if comp_counted else "-"
        lines.append(
            f"{op:<24}{max(len(rs), len(cs)):>6}{f'{ref_pass}/{ref_counted}':>11}"
            f"{f'{comp_pass}/{comp_counted}':>10}{_count(cs, 'unsupported'):>7}"
            f"{_count(cs, 'fail'):>6}{_count(cs, 'error'):>6}{rate:>8}"
        )
    lines.append("-" * len(header))
    for label, results in (("reference", reference), ("compiled", compiled)):
        passed, counted = summarize(results)
        overall = 100.0 * passed / counted if counted else 0.0
        lines.append(f"overall {label + ':':<11}{passed}/{counted} passed ({overall:.1f}%)")
    ref_passing = {r.case for r in reference if r.status == "pass"}
    kept = sum(r.status == "pass" for r in compiled if r.case in ref_passing)
    lines.append(f"compiled passes {kept} of the {len(ref_passing)} cases reference passes")
    if verbose:
        for label, results in (("reference", reference), ("compiled", compiled)):
            lines.extend(_not_passing(results, f"not passing ({label}):"))
    return "\n".join(lines)


def _by_op(results: Sequence[Result]) -> dict[str, list[Result]]:
    by_op: dict[str, list[Result]] = {}
    for r in results:
        by_op.setdefault(r.op, []).append(r)
    return by_op


def _count(results: Sequence[Result], status: str) -> int:
    return sum(r.status == status for r in results)


def _not_passing(results: Sequence[Result], title: str) -> list[str]:
    bad = [r for r in results if r.status not in ("pass", "excluded")]
    if not bad:
        return []
    return ["", title, *(f"  {r.case} [{r.status}] {r.detail}" for r in bad)]
