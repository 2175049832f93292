"""Static memory planning: offsets are valid, aligned, deterministic and near the bound."""

import random

import pytest

import ember
from ember.errors import CompileError
from ember.examples.models import make_model
from ember.formats.graph_memory import graph_buffers
from ember.support import memory_plan
from ember.support.memory_plan import Buffer, count_conflicts, lower_bound, plan_memory


def _check_valid(buffers, plan):
    """Aligned, inside the workspace, and no two buffers live at once share a byte (unless
    one was merged into the other in place)."""
    for a in buffers:
        off = plan.offset(a.name)
        assert off % plan.alignment == 0 and off + a.size <= plan.size
        for b in buffers:
            same = plan.aliases.get(a.name, a.name) == plan.aliases.get(b.name, b.name)
            if a.name < b.name and a.overlaps(b) and not same:
                ob = plan.offset(b.name)
                assert off + a.size <= ob or ob + b.size <= off, (a, b, plan)


def test_docstring_example():
    bufs = [Buffer("a", 4096, 0, 1), Buffer("b", 4096, 1, 2), Buffer("c", 64, 2, 2)]
    plan = plan_memory(bufs)
    assert plan.offsets == {"a": 4096, "b": 0, "c": 4096}
    assert plan.size == plan.lower_bound == 8192


def test_alignment_and_bad_arguments():
    plan = plan_memory([Buffer("a", 3, 0, 0), Buffer("b", 5, 0, 0)], alignment=16)
    assert sorted(plan.offsets.values()) == [0, 16] and plan.size == 32
    with pytest.raises(CompileError, match="power of two"):
        plan_memory([], alignment=24)
    with pytest.raises(CompileError, match="unique"):
        plan_memory([Buffer("a", 1, 0, 0), Buffer("a", 1, 1, 1)])
    with pytest.raises(CompileError, match="bad size"):
        plan_memory([Buffer("a", 1, 3, 2)])


def _random_buffers(
    rng: random.Random, least: int, most: int, last_start: int, span: int, sizes: list[int]
) -> list[Buffer]:
    """least..most buffers of the given sizes, each live from a step in 0..last_start for
    0..span more steps."""
    bufs = []
    for i in range(rng.randint(least, most)):
        start = rng.randint(0, last_start)
        bufs.append(Buffer(f"b{i}", rng.choice(sizes), start, start + rng.randint(0, span)))
    return bufs


@pytest.mark.parametrize("seed", range(20))
def test_random_instances_are_valid_deterministic_and_not_below_the_bound(seed):
    bufs = _random_buffers(random.Random(seed), 1, 60, 40, 6, [64, 100, 4096, 70000])
    plan = plan_memory(bufs)
    _check_valid(bufs, plan)
    assert plan.size >= plan.lower_bound >= lower_bound(bufs)
    assert plan == plan_memory(bufs)


@pytest.mark.parametrize("seed", range(10))
def test_count_conflicts_counts_every_pair_live_at_a_common_step(seed):
    bufs = _random_buffers(random.Random(seed), 0, 40, 20, 5, [64])
    pairs = sum(a.overlaps(b) for i, a in enumerate(bufs) for b in bufs[i + 1 :])
    assert count_conflicts(bufs) == pairs


def test_above_max_conflicts_buffers_are_laid_end_to_end(monkeypatch):
    """The graph executor plans graphs from files: a graph with too many pairs live
    together gets a valid sequential placement in linear work."""
    bufs = [Buffer(f"b{i}", 100, 0, 3) for i in range(4)] + [Buffer("c", 64, 5, 6)]
    monkeypatch.setattr(memory_plan, "MAX_CONFLICTS", 5)  # 6 pairs here
    plan = plan_memory(bufs)
    assert plan.algorithm == "sequential"
    assert plan.offsets == {"b0": 0, "b1": 128, "b2": 256, "b3": 384, "c": 512}
    assert plan.size == 576 and plan.lower_bound == 512
    _check_valid(bufs, plan)


def test_the_hill_climb_stops_at_its_work_budget(monkeypatch):
    bufs = [Buffer("a", 4096, 0, 1), Buffer("b", 4096, 1, 2), Buffer("c", 64, 2, 2)]
    bufs += [Buffer(f"d{i}", 64 * (i + 1), i % 3, i % 3 + 1) for i in range(8)]
    climbed = plan_memory(bufs)
    monkeypatch.setattr(memory_plan, "CLIMB_WORK", 0)
    plain = plan_memory(bufs)
    assert "hill_climb" not in plain.algorithm
    assert plain.size >= climbed.size
    _check_valid(bufs, plain)


def test_in_place_pairs_share_one_offset_and_illegal_pairs_are_refused():
    bufs = [Buffer("x", 256, 0, 1), Buffer("y", 256, 1, 2), Buffer("z", 256, 2, 3)]
    plan = plan_memory(bufs, in_place=[("y", "x"), ("z", "y")])
    assert plan.offset("x") == plan.offset("y") == plan.offset("z") and plan.size == 256
    _check_valid(bufs, plan)
    with pytest.raises(CompileError, match="not legal"):
        plan_memory([Buffer("x", 256, 0, 2), Buffer("y", 256, 1, 2)], in_place=[("y", "x")])


@pytest.mark.slow
def test_reduced_mobilenet_v2_reaches_the_liveness_bound():
    """The storage-id plan of the graph executor takes 1,548,288 B here; the offsets plan
    reaches the bound of what is live at once."""
    case = make_model("mobilenet_v2_96")
    mod, params = ember.frontend.from_onnx(case.model, shape=case.shapes)
    bufs = graph_buffers(ember.lower(mod, "c", params).plan.graph)
    plan = plan_memory(bufs)
    _check_valid(bufs, plan)
    assert plan.size == plan.lower_bound == 1_105_920
