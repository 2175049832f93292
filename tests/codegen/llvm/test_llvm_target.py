"""The llvm and llvmjit target kinds: options and their errors, cross triples,
determinism, in-memory artifacts, inspection and the fast math polynomials."""

from __future__ import annotations

import math
import struct
from pathlib import Path

import numpy as np
import pytest
from llvm_build import compile_funcs

import ember
import ember.runtime as rt
from ember import tir
from ember.cli.main import main as cli_main
from ember.codegen.llvm import build_llvm, build_llvmjit, generate_ir
from ember.codegen.llvm.codegen import Options
from ember.codegen.llvm.inspect import asm_text, ir_text, object_bitcode
from ember.errors import ArtifactError, EmberValueError
from ember.ir import Function, IRModule, TensorType, Var, call
from ember.runtime.artifact import InMemoryArtifact
from ember.runtime.artifact_set import ArtifactSet
from ember.support import toolchain
from ember.target import Target
from ember.tir import te

pytestmark = pytest.mark.cc


def _axpy(n: int = 1000, lanes: int = 8) -> tir.PrimFunc:
    a = te.placeholder((n,), "float32", "A")
    b = te.placeholder((n,), "float32", "B")
    c = te.compute((n,), lambda i: a[i] * 2.0 + b[i], "C")
    s = te.create_schedule(c)
    outer, inner = s[c].split(c.op.axis[0], factor=lanes)
    s[c].parallel(outer)
    s[c].vectorize(inner)
    return te.lower(s, [a, b, c], name="axpy")


def _tiny() -> tuple[IRModule, dict[str, np.ndarray]]:
    x = Var("x", TensorType((2, 64), "float32"))
    w = Var("w", TensorType((2, 64), "float32"))
    body = call("sum", call("sigmoid", call("relu", call("add", x, w))), axes=(1,))
    params = {"w": np.linspace(-1, 1, 128, dtype="float32").reshape(2, 64)}
    return IRModule.from_expr(Function((x, w), body)), params


def _unary(op: str, n: int) -> tir.PrimFunc:
    x = te.placeholder((n,), "float32", "X")
    y = te.compute((n,), lambda i: getattr(tir, op)(x[i]), "Y")
    s = te.create_schedule(y)
    outer, inner = s[y].split(y.op.axis[0], factor=8)
    s[y].vectorize(inner)
    return te.lower(s, [x, y], name=f"u_{op}")


def test_kinds_are_registered_with_typed_options() -> None:
    t = Target.create("llvm -mcpu=znver3 -opt-level=2 -num-threads=3")
    assert (t["mcpu"], t["opt-level"], t["num-threads"], t["mtriple"]) == ("znver3", 2, 3, "")
    assert Target.create("llvmjit")["mcpu"] == "native"
    with pytest.raises(EmberValueError, match="must be 0-3"):
        Target.create("llvm -opt-level=4")


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("llvm -mcpu=nonsense", ["-mcpu='nonsense'", "known:", "skylake"]),
        ("llvm -mattr=+avx9", ["'avx9'", "known:", "avx2"]),
        ("llvm -mtriple=aarch64-linux-gnu -mcpu=skylake", ["skylake", "cortex-a72"]),
    ],
)
def test_unknown_cpu_or_feature_lists_what_llvm_accepts(spec: str, words: list[str]) -> None:
    with pytest.raises(EmberValueError) as err:
        build_llvm([_axpy()], Target.create(spec))
    for word in words:
        assert word in str(err.value)


def test_unknown_triple_and_unsigned_feature_fail_at_target_creation() -> None:
    with pytest.raises(EmberValueError, match="not a triple this LLVM can target.*aarch64"):
        Target.create("llvm -mtriple=foo-bar-baz")
    with pytest.raises(EmberValueError, match=r"needs '\+' or '-'"):
        Target.create("llvm -mattr=avx2")


@pytest.mark.parametrize(
    ("triple", "cpu", "elf_class", "machine"),
    [
        ("aarch64-linux-gnu", "cortex-a72", 2, 0xB7),
        ("thumbv7em-none-eabi", "cortex-m7", 1, 0x28),
        ("riscv64-linux-gnu", "generic-rv64", 2, 0xF3),
    ],
)
def test_cross_triples_give_object_files(
    triple: str, cpu: str, elf_class: int, machine: int
) -> None:
    target = Target.create(f"llvm -mtriple={triple} -mcpu={cpu}")
    (art,) = build_llvm([_axpy()], target)
    assert art.file_name == "lib0.o" and art.loader == "native"
    assert art.content[:4] == b"\x7fELF" and art.content[4] == elf_class
    assert struct.unpack("<H", art.content[18:20])[0] == machine
    assert art.metadata["triple"] == triple
    assert "ember_axpy" in asm_text(art)


def test_builds_are_byte_identical() -> None:
    mod, params = _tiny()
    first = ember.build(mod, "llvm", params)
    second = ember.build(mod, "llvm", params)
    assert first.content_hash() == second.content_hash()
    assert [a.content for a in first] == [a.content for a in second]


def test_object_carries_its_bitcode() -> None:
    (art,) = build_llvm([_axpy()], Target.create("llvm"))
    code = object_bitcode(art.content)
    assert code is not None and code[:2] == b"BC"
    assert "@ember_axpy(ptr" in ir_text(art)


def test_llvm_objects_link_with_c_sources_and_run() -> None:
    impl = "#include <stdint.h>\nint32_t twice(int32_t x) { return 2 * x; }\n"
    a = tir.decl_buffer((4,), "int32", "A")
    i = tir.Var("i", "int32")
    body = tir.for_range(i, 4, tir.store(a, tir.call_extern("int32", "twice", a[i]), i))
    mod = compile_funcs([tir.PrimFunc("use_c", (a,), body)], extra_sources=[impl])
    out = rt.array(np.arange(4, dtype="int32"))
    mod["ember_use_c"](out)
    np.testing.assert_array_equal(out.numpy(), [0, 2, 4, 6])


def test_llvmjit_needs_no_compiler_and_refuses_export(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_compiler(*args: object, **kwargs: object) -> None:
        raise AssertionError("llvmjit must not run a C compiler or linker")

    for name in ("compile_shared", "compile_object", "compile_executable"):
        monkeypatch.setattr(toolchain, name, no_compiler)
    (art,) = build_llvmjit([_axpy()], Target.create("llvmjit"))
    assert isinstance(art, InMemoryArtifact) and not art.exportable
    assert art.bitcode[:2] == b"BC" and "ember_axpy" in ir_text(art)
    fn = art.load()["ember_axpy"]
    x = np.linspace(-1, 1, 1000, dtype="float32")
    out = rt.array(np.zeros(1000, "float32"))
    fn(rt.array(x), rt.array(x), out)
    np.testing.assert_allclose(out.numpy(), 3 * x, rtol=1e-6)
    with pytest.raises(ArtifactError, match=r"llvmjit/lib0\.bc.*target 'llvm' instead"):
        ArtifactSet([art]).export_library(tmp_path / "lib.so")


def test_llvmjit_cannot_target_another_triple() -> None:
    with pytest.raises(ember.errors.CompileError, match="-mtriple=aarch64"):
        build_llvmjit([_axpy()], Target.create("llvmjit -mtriple=aarch64-linux-gnu"))


def test_inspect_shows_ir_and_assembly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mod, params = _tiny()
    ember.build(mod, "llvm", params).save(tmp_path / "out")
    assert cli_main(["inspect", str(tmp_path / "out"), "--show", "lib0.ll"]) == 0
    text = capsys.readouterr().out
    assert "; LLVM IR of llvm/lib0.o" in text and "@ember_" in text
    assert cli_main(["inspect", str(tmp_path / "out"), "--asm"]) == 0
    assert "; assembly of llvm/lib0.o" in capsys.readouterr().out
    assert cli_main(["inspect", str(tmp_path / "out"), "--show", "lib0.s"]) == 0
    assert ".text" in capsys.readouterr().out


@pytest.mark.parametrize("op", ["exp", "tanh", "erf", "sigmoid"])
def test_polynomial_math_matches_numpy_over_the_whole_range(op: str) -> None:
    special = [0.0, -0.0, 1e-30, -1e-30, 1e-5, 88.0, 88.7, 89.0, -87.0, -88.0, -104.0]
    special += [1e4, -1e4, np.inf, -np.inf, np.nan]
    x = np.concatenate([np.linspace(-30, 30, 4096), np.array(special)]).astype("float32")
    n = x.size
    mod = compile_funcs([_unary(op, n)])
    out = rt.array(np.zeros(n, "float32"))
    mod[f"ember_u_{op}"](rt.array(x), out)
    xd = x.astype("float64")
    erf = np.vectorize(math.erf)
    with np.errstate(over="ignore"):
        want = {
            "exp": lambda: np.exp(xd),
            "tanh": lambda: np.tanh(xd),
            "erf": lambda: erf(xd),
            "sigmoid": lambda: 1 / (1 + np.exp(-xd)),
        }[op]()
        want32 = want.astype("float32")  # exp(89) overflows float32: inf, as ours
    np.testing.assert_allclose(out.numpy(), want32, rtol=2e-6, atol=1e-7)


def test_ir_text_is_readable_and_vectorized_loops_carry_metadata() -> None:
    text = generate_ir([_axpy()], Options())
    assert "define internal i32 @ember_axpy_unpacked(ptr noalias %p0" in text
    assert "EmberBackendParallelLaunch" in text and "omp" not in text
    # 8 lanes: explicit vector code (tir.transform.vectorize_loops), no loop left to hint
    assert "<8 x float>" in text and "llvm.loop.vectorize.enable" not in text
    # 5 lanes (not a power of two) stay a loop, with LLVM's vectorizer hints
    text = generate_ir([_axpy(lanes=5)], Options())
    assert '!"llvm.loop.vectorize.enable", i1 true' in text
    assert "llvm.loop.parallel_accesses" in text
