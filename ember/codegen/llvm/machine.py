"""LLVM through llvmlite: target machines from typed options, optimisation, object code.

``machine(opts)`` creates (and caches) the TargetMachine for a triple, CPU and feature
list, checking them first: an unknown triple names the architectures this LLVM has, an
unknown CPU or feature lists what LLVM accepts for the triple (read once per triple from
LLVM's own ``-mcpu=help`` listing, in a child process because LLVM prints it to the C
stderr). ``-mcpu=native`` is the host CPU with the host's features. ``optimize`` runs
the new pass manager's default pipeline at the opt level, with the loop and SLP
vectorizers on.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from dataclasses import dataclass

import llvmlite.binding as llvm

from ember.codegen.llvm import worker
from ember.codegen.llvm.worker import MachineTuple, init_llvm
from ember.errors import CompileError, EmberValueError

#: architectures offered in the message for an unknown triple (those this LLVM has).
_ARCH_EXAMPLES = (
    "x86_64-linux-gnu",
    "i686-linux-gnu",
    "aarch64-linux-gnu",
    "armv7a-linux-gnueabihf",
    "thumbv7em-none-eabi",
    "riscv64-linux-gnu",
    "wasm32-unknown-unknown",
    "powerpc64le-linux-gnu",
)

_HELP_SCRIPT = """
import llvmlite.binding as llvm
llvm.initialize_all_targets()
llvm.initialize_all_asmprinters()
llvm.Target.from_triple({triple!r}).create_target_machine(cpu="help", features="+help")
"""


def host_triple() -> str:
    """This process's target triple."""
    init_llvm()
    return str(llvm.get_process_triple())


def host_features() -> str:
    """The host CPU's features as an LLVM feature string (``+avx2,+fma,...``)."""
    init_llvm()
    return str(llvm.get_host_cpu_features().flatten())


def check_triple(triple: str) -> str | None:
    """Why LLVM refuses ``triple``, or None when it has a target for it."""
    init_llvm()
    try:
        llvm.Target.from_triple(triple)
    except RuntimeError as err:
        known = [t for t in _ARCH_EXAMPLES if _loads(t)]
        return f"is not a triple this LLVM can target ({err}); known e.g.: {', '.join(known)}"
    return None


@functools.cache
def _loads(triple: str) -> bool:
    try:
        llvm.Target.from_triple(triple)
    except RuntimeError:
        return False
    return True


@functools.cache
def catalog(triple: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(CPU names, feature names) LLVM accepts for ``triple``."""
    proc = subprocess.run(
        [sys.executable, "-c", _HELP_SCRIPT.format(triple=triple)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    cpus: list[str] = []
    features: list[str] = []
    section: list[str] | None = None
    for line in (proc.stderr + proc.stdout).splitlines():
        if line.startswith("Available CPUs"):
            section = cpus
        elif line.startswith("Available features"):
            section = features
        elif line.startswith("Use +feature") or not line.strip():
            if section is features and features:
                section = None
        elif section is not None and line.startswith("  "):
            name = line.split()[0]
            if name not in section:
                section.append(name)
    return tuple(cpus), tuple(features)


@dataclass(frozen=True)
class MachineSpec:
    """The target machine a build uses: triple, CPU, features, opt level."""

    triple: str
    cpu: str
    features: str
    opt_level: int
    jit: bool = False

    @staticmethod
    def create(
        mtriple: str, mcpu: str, mattr: str, opt_level: int, jit: bool = False
    ) -> MachineSpec:
        """Resolve ``native`` and defaults, and check every name against LLVM's lists."""
        init_llvm()
        triple = mtriple or host_triple()
        problem = check_triple(triple)
        if problem:
            raise EmberValueError(f"target option -mtriple={triple!r} {problem}")
        cpu, features = mcpu, mattr
        if mcpu in ("", "native"):
            cpu = llvm.get_host_cpu_name() if not mtriple or triple == host_triple() else "generic"
            if cpu != "generic":
                features = ",".join(f for f in (host_features(), mattr) if f)
        else:
            check_cpu(triple, mcpu)
        if mattr:
            check_features(triple, mattr)
        return MachineSpec(triple, cpu, features, opt_level, jit)

    @property
    def is_host(self) -> bool:
        """True when code for this spec can run in this process."""
        return self.triple == host_triple()

    def as_tuple(self) -> MachineTuple:
        """The plain tuple the compile worker takes (``worker.MachineTuple``)."""
        return (self.triple, self.cpu, self.features, self.opt_level, self.jit)


def check_cpu(triple: str, cpu: str) -> None:
    """Raise naming the CPUs LLVM knows for ``triple`` unless ``cpu`` is one."""
    cpus, _ = catalog(triple)
    if cpus and cpu not in cpus and cpu != "generic":
        raise EmberValueError(
            f"target option -mcpu={cpu!r} is not a CPU LLVM knows for {triple}; "
            f"known: {', '.join(cpus)}"
        )


def check_features(triple: str, mattr: str) -> None:
    """Raise naming the features LLVM knows for ``triple`` unless every one is known."""
    _, known = catalog(triple)
    for item in mattr.split(","):
        name = item.strip()
        if not name:
            continue
        if name[0] not in "+-":
            raise EmberValueError(
                f"target option -mattr: {name!r} must start with '+' (enable) or '-' "
                "(disable), e.g. -mattr=+avx2,-fma"
            )
        if known and name[1:] not in known:
            raise EmberValueError(
                f"target option -mattr: {name[1:]!r} is not a feature LLVM knows for "
                f"{triple}; known: {', '.join(known)}"
            )


def machine(spec: MachineSpec) -> llvm.TargetMachine:
    """The (cached) TargetMachine of ``spec`` for optimising and emitting code."""
    return worker.machine(spec.as_tuple())


def new_machine(spec: MachineSpec) -> llvm.TargetMachine:
    """A fresh TargetMachine of ``spec`` (for an execution engine, which owns it)."""
    return worker.new_machine(spec.as_tuple())


def parse(text: str, where: str) -> llvm.ModuleRef:
    """Parse and verify LLVM IR text; an error shows LLVM's complaint."""
    try:
        mod = worker.parse_text(text)
    except RuntimeError as err:
        raise CompileError(f"LLVM codegen{where}: the generated IR is invalid: {err}") from None
    return mod


def optimize(mod: llvm.ModuleRef, spec: MachineSpec) -> None:
    """The default pipeline at the spec's opt level, loop and SLP vectorizers on."""
    worker.run_pipeline(mod, spec.as_tuple())


def emit_object(mod: llvm.ModuleRef, spec: MachineSpec) -> bytes:
    """The object file of ``mod`` for ``spec``."""
    return bytes(machine(spec).emit_object(mod))


def emit_assembly(mod: llvm.ModuleRef, spec: MachineSpec) -> str:
    """The native assembly of ``mod`` for ``spec``."""
    return str(machine(spec).emit_assembly(mod))


def pointer_bits(spec: MachineSpec) -> int:
    """The pointer width of the target (size_t's bits)."""
    return 8 * int(machine(spec).target_data.get_abi_size(_ptr_type()))


@functools.lru_cache(maxsize=1)
def _ptr_type() -> llvm.TypeRef:
    mod = llvm.parse_assembly("@p = external global ptr\n")
    return mod.get_global_variable("p").global_value_type
