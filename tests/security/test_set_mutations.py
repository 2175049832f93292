"""Semantic mutations of saved artifact sets, with the manifest's hashes rewritten to match.

A saved set is data: whoever can edit its files can also rewrite ``manifest.json``. So
every mutation of tests/security/set_mutations.py (each JSON value of graph.json,
metadata.json and memory_map.json, each header field of params.bin; never the C sources)
is written as a complete set with a matching manifest, then loaded and run once on zeros
in a child process (set_fuzz_child.py: address space capped, every ember array ending at
an inaccessible page). Asserted for every mutation: no signal, no hang, no exception but
an EmberError.

Default tier: a seeded sample over small real models built with the graph and the AOT
executor (``EMBER_SET_FUZZ_SAMPLE`` per set). ``slow``: the mutations of every model, with
resnet8 and a quantized ds_cnn_kws: 40 per set, or all of them (about 100k) with
``EMBER_SET_FUZZ_SLOW_SAMPLE=all``.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from set_models import quantized_model, save_builds, strings_model, zoo_model
from set_mutations import Mutation, mutations
from set_replay import case_id, is_failure, replay

pytestmark = [pytest.mark.cc]

SEED = 20261126
#: mutations per saved set in the default tier (6 sets)
SAMPLE = int(os.environ.get("EMBER_SET_FUZZ_SAMPLE", 30))
#: mutations per saved set of the slow tier (10 sets) unless EMBER_SET_FUZZ_SLOW_SAMPLE says
SLOW_SAMPLE = 40
BOTH = ("graph", "aot")


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One work directory (and native cache) for the module's children."""
    return tmp_path_factory.mktemp("setfuzz")


@pytest.fixture(scope="module")
def small_sets(work: Path) -> list[Path]:
    """Saved sets of the default tier: relu_add, ds_cnn_kws and a string model, both
    executors."""
    from hostile_models import relu_add_model  # noqa: PLC0415

    root = work / "built"
    out = save_builds(relu_add_model(), "relu_add", root, BOTH)
    out += save_builds(zoo_model("ds_cnn_kws")(), "ds_cnn_kws", root, BOTH)
    return out + save_builds(strings_model(), "strings", root, BOTH)


def sweep(sets: list[Path], work: Path, sample: int | None) -> list[str]:
    """Failures among the (sampled) mutations of ``sets``; the
    unmutated sets are run first and must run cleanly (so that a mutation's EmberError
    is the mutation's doing)."""
    rng = random.Random(SEED)
    cases = [(root, _unchanged(root)) for root in sets]
    for root in sets:
        found = list(mutations(root))
        if sample is not None:
            found = rng.sample(found, min(sample, len(found)))
        cases += [(root, m) for m in found]
    verdicts = replay(cases, work)
    assert len(verdicts) == len(cases)
    failures = [f"{k} => {v}" for k, v in verdicts.items() if is_failure(v)]
    unchanged = [verdicts[case_id(*case)] for case in cases[: len(sets)]]
    assert unchanged == ["ok"] * len(sets), unchanged
    return failures


def test_seeded_sample_is_refused_cleanly(small_sets: list[Path], work: Path) -> None:
    failures = sweep(small_sets, work, SAMPLE)
    assert not failures, "\n".join(failures)


def _unchanged(root: Path) -> Mutation:
    executor = "graph" if root.name.endswith("_graph") else "aot"
    file = f"{executor}_executor/graph.json"
    return Mutation(file, "unchanged", lambda: (root / file).read_bytes())


#: mutations that once raised a non-ember exception: (build, label)
REGRESSIONS = [
    ("relu_add_graph", "graph_executor/metadata.json: ['outputs', 0, 'device_type'] -> null"),
    ("relu_add_aot", "aot_executor/metadata.json: ['inputs', 0, 'device_type'] -> [1]"),
    ("relu_add_aot", "aot_executor/metadata.json: ['functions'] empty"),
    ("strings_aot", "aot_executor/metadata.json: 'const_0' dtype float32 in graph.json too"),
    ("relu_add_graph", "manifest.json: ['artifacts', 1, 'file_name'] -> \"" + "x" * 39),
]


def _cases(sets: list[Path], wanted: list[tuple[str, str]]) -> list[tuple[Path, Mutation]]:
    roots = {r.name: r for r in sets}
    out = []
    for build, name in wanted:
        found = [m for m in mutations(roots[build]) if m.name == name]
        assert len(found) == 1, f"{build}: no single mutation {name!r}"
        out.append((roots[build], found[0]))
    return out


def test_regressions(small_sets: list[Path], work: Path) -> None:
    verdicts = replay(_cases(small_sets, REGRESSIONS), work)
    assert all(v.startswith("ember ") for v in verdicts.values()), verdicts


@pytest.fixture(scope="module")
def resnet8_graph(work: Path) -> list[Path]:
    """resnet8's graph build: it has kernels with scratch buffers (ds_cnn_kws has none)."""
    return save_builds(zoo_model("resnet8")(), "resnet8", work / "resnet8", ("graph",))


def test_buffer_sizes_are_checked_by_the_kernels(
    small_sets: list[Path], resnet8_graph: list[Path], work: Path
) -> None:
    cases = _cases(
        [*small_sets, *resnet8_graph],
        [
            (
                "resnet8_graph",
                "graph_executor/graph.json: every ['nodes', '*', 'attrs', 'scratch_bytes'] "
                '-> "64"',
            ),
            (
                "ds_cnn_kws_aot",
                "aot_executor/metadata.json: every ['functions', '*', 'workspace_size_bytes'] "
                "-> 64",
            ),
            (
                "ds_cnn_kws_aot",
                "aot_executor/metadata.json: ['functions', 0, 'workspace_size_bytes'] -> 0",
            ),
        ],
    )
    verdicts = replay(cases, work)
    assert all(v.startswith("ember ") for v in verdicts.values()), verdicts


@pytest.mark.slow
def test_int8_conv_weights_are_not_trusted(work: Path) -> None:
    """Regression: int8 convolutions read each packed-weight fix slot's column from the
    weight bytes (params.bin: data) and loaded the patch panel there unchecked
    (ember_q8_add_fixes and the VNNI tiles); a slot past the reduction is now skipped."""
    (root,) = save_builds(quantized_model(), "qds_cnn", work / "int8", ("graph",))
    cases = [(root, m) for m in mutations(root) if " data -> 0xff" in m.label]
    assert cases
    verdicts = replay(cases, work)
    assert not [v for v in verdicts.values() if is_failure(v)], verdicts


@pytest.mark.slow
def test_every_mutation_is_refused_cleanly(
    small_sets: list[Path], resnet8_graph: list[Path], work: Path
) -> None:
    sets = [*small_sets, *resnet8_graph]
    sets += save_builds(zoo_model("resnet8")(), "resnet8", work / "slow", ("aot",))
    sets += save_builds(quantized_model(), "qds_cnn", work / "slow", BOTH)
    # `make test` runs the slow tier too: a seeded sample per set by default (40: about two
    # minutes); EMBER_SET_FUZZ_SLOW_SAMPLE=all sweeps every mutation (about 100k: an hour)
    sample = os.environ.get("EMBER_SET_FUZZ_SLOW_SAMPLE") or str(SLOW_SAMPLE)
    failures = sweep(sets, work, None if sample == "all" else int(sample))
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:50])
