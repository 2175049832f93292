"""Big LLVM builds: kernels grouped into modules compiled in helper processes, the same
bytes wherever a group is compiled; and the loops LLVM is asked to unroll fully."""

from __future__ import annotations

import io

import numpy as np
import pytest

import ember.runtime as rt
from ember import tir
from ember.codegen.llvm import build, parallel, worker
from ember.codegen.llvm.build import build_llvm, build_llvmjit, generate_groups
from ember.codegen.llvm.codegen import Options
from ember.codegen.llvm.loop_hints import nest_trips
from ember.runtime.artifact_set import ArtifactSet
from ember.runtime.loading import load_artifacts
from ember.target import Target
from ember.tir import te

pytestmark = pytest.mark.cc


def _scale(k: int, n: int = 256) -> tir.PrimFunc:
    a = te.placeholder((n,), "float32", "A")
    c = te.compute((n,), lambda i: a[i] * float(k + 1) + 1.0, "C")
    s = te.create_schedule(c)
    outer, inner = s[c].split(c.op.axis[0], factor=8)
    s[c].vectorize(inner)
    return te.lower(s, [a, c], name=f"scale{k}")


def _window(kh: int, kw: int) -> tir.PrimFunc:
    """out[i] = sum over a kh x kw window of a[i + r * kw + q]: a constant serial nest."""
    n = 64
    a = tir.decl_buffer((n + kh * kw,), "float32", "A")
    out = tir.decl_buffer((n,), "float32", "Out")
    i, r, q = tir.Var("i", "int32"), tir.Var("r", "int32"), tir.Var("q", "int32")
    acc = tir.store(out, out[i] + a[i + r * kw + q], i)
    inner = tir.for_range(q, kw, acc)
    body = tir.for_range(i, n, tir.for_range(r, kh, inner))
    return tir.PrimFunc(f"window{kh}x{kw}", (a, out), body)


@pytest.fixture
def small_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    """Groups of about one kernel, so that a few kernels make a parallel build."""
    monkeypatch.setattr(build, "GROUP_BYTES", 2000)


def test_big_builds_split_into_modules_with_the_same_bytes_anywhere(small_groups) -> None:
    funcs = [_scale(k) for k in range(5)]
    groups = generate_groups(funcs, Options())
    assert len(groups) > 1 and [f for g, _ in groups for f in g] == funcs
    here = build_llvm(funcs, Target.create("llvm -jobs=1"))
    spread = build_llvm(funcs, Target.create("llvm -jobs=3"))
    assert [a.file_name for a in here] == [f"lib{k}.o" for k in range(len(groups))]
    assert [a.content for a in here] == [a.content for a in spread]


@pytest.mark.parametrize("kind", ["llvm", "llvmjit"])
def test_every_module_of_a_split_build_loads_and_runs(small_groups, kind: str) -> None:
    funcs = [_scale(k) for k in range(4)]
    make = build_llvm if kind == "llvm" else build_llvmjit
    arts = make(funcs, Target.create(f"{kind} -jobs=2"))
    assert len(arts) > 1
    mod = load_artifacts(ArtifactSet(list(arts)))
    x = np.linspace(-1, 1, 256, dtype="float32")
    for k in range(4):
        out = rt.array(np.zeros(256, "float32"))
        mod[f"ember_scale{k}"](rt.array(x), out)
        np.testing.assert_allclose(out.numpy(), x * (k + 1) + 1, rtol=1e-6, atol=1e-6)


def test_a_helper_that_fails_leaves_its_groups_to_this_process(
    small_groups, monkeypatch: pytest.MonkeyPatch
) -> None:
    funcs = [_scale(k) for k in range(3)]
    want = [a.content for a in build_llvm(funcs, Target.create("llvm -jobs=1"))]
    monkeypatch.setattr(parallel, "_WORKER_SOURCE", "import sys; sys.exit(3)")
    got = [a.content for a in build_llvm(funcs, Target.create("llvm -jobs=2"))]
    assert got == want


def test_kernels_that_call_each_other_stay_in_one_module(small_groups) -> None:
    funcs = [_scale(k) for k in range(3)]
    assert len(generate_groups(funcs, Options(export_unpacked=True))) == 1


def test_work_is_assigned_longest_first_and_deterministically() -> None:
    assert parallel.assign([5, 9, 1, 4], 2) == [[1, 2], [0, 3]]
    assert parallel.assign([3], 4) == [[0], [], [], []]


def test_small_constant_nests_are_unrolled_fully_by_llvm() -> None:
    three = _window(3, 3)
    assert nest_trips(three.body) is None  # the outer loop of 64 is too long
    text = generate_groups([three], Options())[0][1]
    assert text.count('!"llvm.loop.unroll.full"') == 2  # both loops of the 3x3 nest
    seven = generate_groups([_window(7, 7)], Options())[0][1]
    assert seven.count('!"llvm.loop.unroll.full"') == 1  # only the inner loop of 7
    # and the result is right
    a = np.arange(64 + 9, dtype="float32")
    mod = load_artifacts(ArtifactSet(build_llvm([three], Target.create("llvm"))))
    out = rt.array(np.zeros(64, "float32"))
    mod["ember_window3x3"](rt.array(a), out)
    want = [sum(a[i + r * 3 + q] for r in range(3) for q in range(3)) for i in range(64)]
    np.testing.assert_allclose(out.numpy(), want)


def test_no_helpers_when_this_program_is_not_python(
    small_groups, monkeypatch: pytest.MonkeyPatch
) -> None:
    funcs = [_scale(k) for k in range(3)]
    want = [a.content for a in build_llvm(funcs, Target.create("llvm -jobs=1"))]

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("no helper may start from a host program that is not Python")

    monkeypatch.setattr(parallel.sys, "executable", "/usr/bin/uwsgi")
    monkeypatch.setattr(parallel.subprocess, "run", refuse)
    monkeypatch.setattr(parallel.subprocess, "Popen", refuse)
    assert [a.content for a in build_llvm(funcs, Target.create("llvm -jobs=2"))] == want


def test_modules_go_to_the_helpers_while_the_next_is_written(
    small_groups, monkeypatch: pytest.MonkeyPatch
) -> None:
    funcs = [_scale(k) for k in range(4)]
    want = [a.content for a in build_llvm(funcs, Target.create("llvm -jobs=1"))]
    seen: list[tuple[int, bool]] = []
    submit = parallel.CompilePool.submit

    def spy(self: parallel.CompilePool, k: int, text: str) -> None:
        seen.append((k, len(self.helpers) == 1))
        submit(self, k, text)

    monkeypatch.setattr(parallel.CompilePool, "submit", spy)
    got = [a.content for a in build_llvm(funcs, Target.create("llvm -jobs=2"))]
    assert got == want
    assert seen == [(k, True) for k in range(len(want))]  # every module, in order, streamed


def test_a_pool_compiles_everything_when_its_helper_dies_or_refuses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    texts = generate_groups([_scale(k) for k in range(3)], Options(), group_bytes=2000)
    plain = [t for _, t in texts]
    spec = build.LLVMOptions(Target.create("llvm")).spec().as_tuple()
    want = parallel.compile_groups(plain, spec, False, jobs=1)
    assert parallel.compile_groups(plain, spec, False, jobs=2) == want
    monkeypatch.setattr(parallel, "_WORKER_SOURCE", "import sys; sys.stdin.read(3); sys.exit(3)")
    assert parallel.compile_groups(plain, spec, False, jobs=3) == want


def test_invalid_ir_in_a_helper_is_reported_by_this_process() -> None:
    spec = build.LLVMOptions(Target.create("llvm")).spec().as_tuple()
    pool = parallel.CompilePool(spec, False, jobs=2)
    pool.submit(0, "define i32 @f() {\n  ret i64 0\n}\n")
    with pytest.raises(RuntimeError):
        pool.results()
    assert not any(h.thread.is_alive() for h in pool.helpers)


def test_frames_round_trip_through_a_pipe() -> None:
    buf = io.BytesIO()
    worker.write_frame(buf, {"a": b"x" * 100_000})
    worker.write_frame(buf, "text")
    buf.seek(0)
    assert worker.read_frame(buf) == {"a": b"x" * 100_000}
    assert worker.read_frame(buf) == "text"
    with pytest.raises(EOFError):
        worker.read_frame(buf)


def _matvec(n: int) -> tir.PrimFunc:
    """out[j] = sum_k x[k] * w[k, j], the row of accumulators vectorized over j."""
    k_len = 40
    x = tir.decl_buffer((k_len,), "float32", "X")
    w = tir.decl_buffer((k_len, n), "float32", "W")
    out = tir.decl_buffer((n,), "float32", "Out")
    j, k, q = tir.Var("j", "int32"), tir.Var("k", "int32"), tir.Var("q", "int32")
    vec = tir.ForKind.VECTORIZED
    update = tir.store(out, out[j] + x[k] * w[k, j], j)
    body = tir.seq(
        tir.for_range(q, n, tir.store(out, 0.0, q), kind=vec),
        tir.for_range(k, k_len, tir.for_range(j, n, update, kind=vec)),
    )
    return tir.PrimFunc(f"matvec{n}", (x, w, out), body)


def test_a_vectorized_reduction_row_is_unrolled_after_vectorizing() -> None:
    """out[j] += x[k] * w[k, j] over 128 columns: the vector loop carries unroll.full (its
    accumulators stay in registers across k, as gcc keeps them); the zeroing loop and
    longer rows do not."""
    text = generate_groups([_matvec(128)], Options())[0][1]
    assert text.count('!"llvm.loop.unroll.full"') == 1
    assert generate_groups([_matvec(256)], Options())[0][1].count("unroll.full") == 0
    rng = np.random.default_rng(0)
    x = rng.standard_normal(40).astype("float32")
    w = rng.standard_normal((40, 128)).astype("float32")
    mod = load_artifacts(ArtifactSet(list(build_llvm([_matvec(128)], Target.create("llvm")))))
    out = rt.array(np.zeros(128, "float32"))
    mod["ember_matvec128"](rt.array(x), rt.array(w), out)
    np.testing.assert_allclose(out.numpy(), x @ w, rtol=1e-5, atol=1e-5)
