"""The code-loading process: ArtifactSet -> the top-level Module, the ONE way code is loaded.

``load_artifacts(artifact_set, device)`` does exactly this, in this order:

1. Partition the artifacts by ``loader``. Check that every loader the set needs is
   registered (``runtime.module.loadbinary_<loader>``) and report ALL missing ones at
   once, with the registered ones, before anything is compiled.
2. Link every ``native`` artifact (C sources ``.c``, objects ``.o``; headers ``.h`` are
   written next to them) into ONE shared library with the system toolchain, and load it
   as the host LibraryModule. The link is cached by content hash under
   ``<cache_dir>/artifacts``. No native artifacts -> an empty host module.
3. Load every other group except ``metadata``, sorted by loader name, with
   ``runtime.module.loadbinary_<loader>(artifacts) -> Module``; InMemoryArtifacts load
   themselves. Import each result into the host module.
4. With ``metadata`` artifacts, ``runtime.module.loadbinary_metadata(artifacts, host)``
   returns the top-level module (which imports the host); otherwise the host is the top.

``load_module(path)`` of an exported library runs steps 3-4 with the library itself as
the host (see :mod:`ember.runtime.export`).
"""

from __future__ import annotations

import os
import re
import shlex
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ember.config import config
from ember.errors import ArtifactError, EmberValueError, ModuleLoadError
from ember.runtime.artifact import (
    IN_MEMORY_LOADER,
    METADATA_LOADER,
    NATIVE_LOADER,
    AnyArtifact,
    Artifact,
    InMemoryArtifact,
    file_suffix,
)
from ember.runtime.artifact_set import ArtifactSet
from ember.runtime.cache_entry import cache_subdir, cached_build
from ember.runtime.cpu_features import features_source, required_features
from ember.runtime.device import CPU, Device
from ember.runtime.device import device as to_device
from ember.runtime.hooks import LOAD_ARTIFACTS, register_hook
from ember.runtime.library_module import MODULE_CTX_SYMBOL, LibraryModule
from ember.runtime.libruntime import (
    TILES_KEY,
    header_path,
    include_dir,
    library_suffix,
    tiles_digest,
)
from ember.runtime.module import Module, PythonModule
from ember.runtime.registry import get_global_func, list_global_funcs
from ember.support.hashing import hash_bytes, hash_strings
from ember.support.toolchain import compile_object, compile_shared

#: Bumped whenever the way native artifacts are linked changes (it keys the cache).
NATIVE_LINK_VERSION = 3
#: The prefix of the registered global functions that load a group of artifacts.
LOADBINARY_PREFIX = "runtime.module.loadbinary_"
#: Artifact metadata key holding extra compiler flags for the native link (shell syntax).
CFLAGS_KEY = "cflags"
#: File suffixes of native artifacts: compiled and linked, or written next to the sources.
LINKED_SUFFIXES = (".c", ".o")
HEADER_SUFFIXES = (".h",)
#: The attribute under which a loaded top-level module keeps the ArtifactSet it came from.
SOURCE_ATTR = "artifact_set"
#: The type_key of the empty host module of a set without native artifacts.
HOST_TYPE_KEY = "host"
#: Fixed flags of every native link (deterministic output, hidden internals).
NATIVE_FLAGS = ("-fvisibility=hidden",)
#: The generated source recording the CPU features a linked library needs.
FEATURES_FILE = "ember_cpu_features.c"
#: The only flags artifact metadata may put on a compiler command line (what the C back end
#: emits); anything else (``-wrapper``, ``-save-temps``, ``-o``, ``@file``...) is refused.
ALLOWED_FLAGS = frozenset(
    ["-O0", "-O1", "-O2", "-O3", "-fopenmp", "-fopenmp-simd", "-fno-math-errno"]
    + ["-fno-trapping-math"]
    + ["-lm", "-lmvec"]
)
#: Flags with a value: the value must match the pattern (a CPU name, a contraction mode).
ALLOWED_VALUE_FLAGS = {
    "-march=": re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}"),
    "-mcpu=": re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}"),
    "-ffp-contract=": re.compile(r"off|on|fast"),
    # a macro for the artifact's own C source (which is compiled anyway): a name, a plain value
    "-D": re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}(=[A-Za-z0-9_.+-]{0,64})?"),
}


def loader_func_name(loader: str) -> str:
    """The global function name that loads artifacts of ``loader``."""
    return LOADBINARY_PREFIX + loader


# -- step 1: partition (ArtifactSet.by_loader) and check loaders -------------------------
def check_loaders(groups: dict[str, list[AnyArtifact]]) -> None:
    """Raise one ModuleLoadError naming every needed loader that is not registered (and an
    ArtifactError for a native object built against other runtime kernels)."""
    check_runtime_kernels(groups.get(NATIVE_LOADER, []))
    missing = []
    for loader, arts in groups.items():
        if loader in (NATIVE_LOADER, IN_MEMORY_LOADER):
            continue
        if get_global_func(loader_func_name(loader), allow_missing=True) is None:
            names = ", ".join(f"{a.codegen_id}/{a.file_name}" for a in arts)
            missing.append(f"'{loader_func_name(loader)}' (needed by {names})")
    if missing:
        known = [n for n in list_global_funcs() if n.startswith(LOADBINARY_PREFIX)]
        raise ModuleLoadError(
            f"cannot load the artifact set: {len(missing)} loader(s) not registered: "
            f"{'; '.join(missing)}. Registered loaders: {', '.join(known) or 'none'}. "
            "Import the package that provides them or register them with register_func."
        )


def check_runtime_kernels(natives: Sequence[AnyArtifact]) -> None:
    """Refuse a native artifact that calls the runtime's tile kernels as another version of
    ember defined them (metadata ``runtime_tiles``, see ``libruntime.tiles_digest``)."""
    for art in natives:
        recorded = art.metadata.get(TILES_KEY)
        if recorded is not None and recorded != tiles_digest():
            raise ArtifactError(
                f"artifact {art.codegen_id}/{art.file_name} calls the runtime's tile kernels "
                f"as another version of ember built them ({TILES_KEY} {str(recorded)[:32]!r}, "
                f"this runtime {tiles_digest()!r}); rebuild the model with this ember"
            )


# -- step 2: link native artifacts -------------------------------------------------------
def native_flags(artifacts: Sequence[Artifact]) -> list[str]:
    """The fixed native flags plus each artifact's ``cflags`` metadata, in order, deduplicated."""
    flags = list(NATIVE_FLAGS)
    for art in artifacts:
        extra = art.metadata.get(CFLAGS_KEY, "")
        if not isinstance(extra, str):
            raise ArtifactError(
                f"artifact {art.codegen_id}/{art.file_name}: metadata {CFLAGS_KEY!r} must be "
                f"a string of compiler flags, got {extra!r}"
            )
        who = f"artifact {art.codegen_id}/{art.file_name}"
        flags += [f for f in split_flags(extra, who) if f not in flags]
    return flags


def split_flags(text: str, who: str) -> list[str]:
    """Split metadata ``cflags`` and check each against the allow-list (ArtifactError if not)."""
    try:
        parts = shlex.split(text)
    except ValueError as err:
        raise ArtifactError(
            f"{who}: metadata {CFLAGS_KEY!r} {text!r} cannot be split ({err}); rebuild the "
            "artifact set"
        ) from None
    for flag in parts:
        if flag in ALLOWED_FLAGS:
            continue
        prefix = next((p for p in ALLOWED_VALUE_FLAGS if flag.startswith(p)), None)
        if prefix is not None and ALLOWED_VALUE_FLAGS[prefix].fullmatch(flag[len(prefix) :]):
            continue
        raise ArtifactError(
            f"{who}: metadata {CFLAGS_KEY!r} holds the flag {flag!r}, which ember does not "
            f"pass to the compiler; allowed: {', '.join(sorted(ALLOWED_FLAGS))}, "
            f"{', '.join(p + '<value>' for p in ALLOWED_VALUE_FLAGS)}. Rebuild the artifact "
            "set with ember, or remove the flag"
        )
    return parts


def write_native_sources(artifacts: Sequence[Artifact], build_dir: Path) -> list[Path]:
    """Write native artifacts to ``build_dir/<codegen_id>/<file_name>``; return link inputs."""
    inputs = []
    for art in artifacts:
        suffix = file_suffix(art.file_name)
        if suffix not in LINKED_SUFFIXES + HEADER_SUFFIXES:
            raise ArtifactError(
                f"native artifact {art.codegen_id}/{art.file_name} has suffix {suffix!r}; the "
                f"native loader links {', '.join(LINKED_SUFFIXES)} and includes "
                f"{', '.join(HEADER_SUFFIXES)} files; give it another loader"
            )
        path = build_dir / art.codegen_id / art.file_name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(art.content)
        if suffix in LINKED_SUFFIXES:
            inputs.append(path)
    return inputs


def link_native(
    artifacts: Sequence[Artifact], build_dir: Path, output: Path, extra_inputs: Sequence[Path] = ()
) -> Path:
    """Compile and link native artifacts (plus ``extra_inputs``) into the library ``output``.

    The library also records the CPU features its code needs (:mod:`ember.runtime.cpu_features`).
    """
    inputs = write_native_sources(artifacts, build_dir) + list(extra_inputs)
    include_dirs = [include_dir(), *sorted({build_dir / a.codegen_id for a in artifacts})]
    flags = native_flags(artifacts)
    features = build_dir / FEATURES_FILE
    features.write_text(features_source(flags))
    inputs.append(features)
    sources = [p for p in inputs if p.suffix == ".c"]
    if len(sources) > 1:
        # codegen splits big outputs into several files: compile them on every core
        def compile_one(src: Path) -> Path:
            obj = src.with_suffix(".o")
            return compile_object(src, obj, include_dirs=include_dirs, flags=flags, openmp=False)

        workers = min(len(sources), os.cpu_count() or 1)
        with ThreadPoolExecutor(max_workers=workers) as pool:
            objects = dict(zip(sources, pool.map(compile_one, sources), strict=True))
        inputs = [objects.get(p, p) for p in inputs]
    return compile_shared(inputs, output, include_dirs=include_dirs, flags=flags, openmp=False)


def native_cache_path(artifacts: Sequence[Artifact], callees: Sequence[str] = ()) -> Path:
    """Where the linked library of ``artifacts`` is cached: keyed by everything that shapes it
    (``callees``: what its ``call_packed`` sites will find, see :func:`host_module`)."""
    flags = native_flags(artifacts)
    parts = [f"link-v{NATIVE_LINK_VERSION}", config().cc, *flags, *required_features(flags)]
    parts += [f"{a.codegen_id}/{a.file_name}:{a.sha256}" for a in artifacts]
    parts += [f"calls:{c}" for c in callees]
    key = hash_bytes(hash_strings(parts, length=64).encode(), header_path().read_bytes(), length=24)
    return cache_subdir("artifacts") / f"native-{key}{library_suffix()}"


def link_native_cached(artifacts: Sequence[Artifact], callees: Sequence[str] = ()) -> Path:
    """The shared library of ``artifacts``, linked once and reused from the cache after.

    Sources go to a private temporary directory and the library is renamed into place,
    so processes linking the same set at the same time never see each other's files. A
    cached library is loaded only while its content matches the hash recorded when it was
    built (:mod:`ember.runtime.cache_entry`); otherwise it is linked again.
    """

    def build(output: Path) -> Path:
        with tempfile.TemporaryDirectory(prefix=".build-", dir=output.parent) as tmp:
            return link_native(artifacts, Path(tmp), output)

    return cached_build(native_cache_path(artifacts, callees), build)


def _as_artifacts(arts: Sequence[AnyArtifact]) -> list[Artifact]:
    return [a for a in arts if isinstance(a, Artifact)]


def host_module(native: Sequence[Artifact], others: Sequence[AnyArtifact] = ()) -> Module:
    """Step 2: the host LibraryModule of the linked native artifacts (empty without any).

    A library whose code looks functions up through the runtime (``call_packed``) caches
    what it found in statics, and one file is mapped once per process: so its cache key
    also names the artifacts of the other modules it may call (``others``), and a host
    library is never shared by loads whose imports differ.
    """
    if not native:
        return PythonModule({}, type_key=HOST_TYPE_KEY)
    packed = any(MODULE_CTX_SYMBOL.encode() in a.content for a in native)
    callees = sorted(_identity(a) for a in others if packed and a.loader != METADATA_LOADER)
    return LibraryModule(link_native_cached(native, callees))


def _identity(artifact: AnyArtifact) -> str:
    if isinstance(artifact, Artifact):
        return f"{artifact.loader}:{artifact.codegen_id}/{artifact.file_name}:{artifact.sha256}"
    return f"{artifact.loader}:{artifact.codegen_id}/{artifact.file_name}:{id(artifact)}"


# -- steps 3 and 4: other loaders, then metadata -----------------------------------------
def load_groups(groups: dict[str, list[AnyArtifact]], host: Module) -> Module:
    """Steps 3-4 on a host module: load non-native groups into it, then build the top."""
    for loader, arts in groups.items():
        if loader in (NATIVE_LOADER, METADATA_LOADER):
            continue
        if loader == IN_MEMORY_LOADER:
            for art in arts:
                if isinstance(art, InMemoryArtifact):
                    who = f"in-memory artifact {art.codegen_id}/{art.file_name}"
                    host.import_module(_checked(art.load(), who))
            continue
        func = get_global_func(loader_func_name(loader))
        host.import_module(_checked(func(_as_artifacts(arts)), loader_func_name(loader)))
    meta = groups.get(METADATA_LOADER)
    if not meta:
        return host
    func = get_global_func(loader_func_name(METADATA_LOADER))
    return _checked(func(_as_artifacts(meta), host), loader_func_name(METADATA_LOADER))


def _checked(result: object, who: str) -> Module:
    if not isinstance(result, Module):
        raise ModuleLoadError(f"{who} returned {type(result).__name__}, expected a Module")
    return result


def load_artifacts(
    artifact_set: ArtifactSet | Sequence[AnyArtifact] | str | os.PathLike[str],
    device: Device | str | None = None,
    trust_native: bool = False,
) -> Module:
    """Run the code-loading process on ``artifact_set`` and return the top-level Module.

    A path names a directory written by ``ArtifactSet.save`` (relative to the working
    directory, as typed). A saved set is data until its native artifacts (C sources,
    objects) are compiled and linked into this process: that runs them, so a set read from
    disk loads only with ``trust_native=True`` (a set built in this process needs nothing).
    """
    dev = to_device(device) if device is not None else None
    if dev is not None and dev.device_type != CPU:
        raise EmberValueError(
            f"load_artifacts: device {dev} is not supported yet; the host CPU (ember.cpu(0)) is"
        )
    if isinstance(artifact_set, str | os.PathLike):
        artifact_set = _saved_set(Path(artifact_set))
    if not isinstance(artifact_set, ArtifactSet):
        artifact_set = ArtifactSet(artifact_set)
    check_trusted(artifact_set, trust_native)
    groups = artifact_set.by_loader()
    check_loaders(groups)
    native = artifact_set.native()
    host = host_module(native, [a for a in artifact_set if a.loader != NATIVE_LOADER])
    top = load_groups(groups, host)
    setattr(top, SOURCE_ATTR, artifact_set)  # so that the module can be exported again
    return top


def check_trusted(artifact_set: ArtifactSet, trust_native: bool) -> None:
    """Refuse to compile and run the native code of a set read from disk unless trusted."""
    native = artifact_set.native()
    if artifact_set.saved_at is None or not native or trust_native:
        return
    names = ", ".join(f"{a.codegen_id}/{a.file_name}" for a in native[:3])
    more = f" and {len(native) - 3} more" if len(native) > 3 else ""
    raise ArtifactError(
        f"{artifact_set.saved_at} is a saved artifact set with native code ({names}{more}); "
        "loading compiles it and runs it in this process, so ember does so only when asked: "
        "pass trust_native=True if you built the set or trust whoever did, or load the "
        "library exported from it (export_library) instead"
    )


def _saved_set(path: Path) -> ArtifactSet:
    """The ArtifactSet saved in directory ``path`` (a file gets load_module's advice)."""
    if path.is_file():
        raise ModuleLoadError(
            f"load_artifacts: {path} is a file; load an exported library (.so) with "
            "ember.load_module, or pass a directory written by ArtifactSet.save"
        )
    return ArtifactSet.load(path.absolute())


# ArtifactSet.load_module delegates here (artifact_set.py sits below this file).
register_hook(LOAD_ARTIFACTS, load_artifacts, override=True)
