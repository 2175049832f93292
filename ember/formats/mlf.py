"""Model Library Format (MLF): the layout of one versioned tar holding a whole build.

::

    metadata.json                      version, model name, target, executors, interface,
                                       the unified metadata, the memory map, every file's
                                       sha256 and origin (schema: schemas/mlf_metadata.schema.json)
    codegen/host/src/*.c               generated C (kernels, run function, metadata, interface)
    codegen/host/include/*.h           generated headers
    codegen/host/lib/*.o               object files of object-file back ends
    codegen/<codegen_id>/<file>        every other artifact (executor metadata, external back ends)
    parameters/<mod>.params            the constants (ember's params format)
    executor-config/graph/<mod>.graph  graph JSON
    src/<mod>.ir                       the lowered program as text (when exported from a Lowered)
    include/ember_<mod>.h              the model's header (AOT builds)
    runtime/include/ember/*.h          ember's C runtime headers
    runtime/src/*.c                    ember's C runtime sources
    test/inputs.bin, test/expected.bin test vectors (optional; raw bytes in metadata order)
    main.c, Makefile, README.md        the standalone program (``c`` interface builds)

This module is the pure part: names, the version, and validation of ``metadata.json``
against the JSON Schema shipped beside it (read with ``jsonschema``).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

from ember.errors import SerializationError

MLF_VERSION = 1
METADATA_JSON = "metadata.json"
SCHEMA_PATH = Path(__file__).resolve().parent / "schemas" / "mlf_metadata.schema.json"
MAX_METADATA_BYTES = 64 << 20


def host_path(file_name: str) -> str:
    """Where a native (host) artifact lives in the tar, by its suffix."""
    if file_name.endswith(".h"):
        return f"codegen/host/include/{file_name}"
    if file_name.endswith(".o"):
        return f"codegen/host/lib/{file_name}"
    return f"codegen/host/src/{file_name}"


def other_path(codegen_id: str, file_name: str) -> str:
    """Where a non-host artifact lives in the tar."""
    return f"codegen/{codegen_id}/{file_name}"


@cache
def schema() -> dict[str, Any]:
    """The JSON Schema of ``metadata.json``."""
    loaded: dict[str, Any] = json.loads(SCHEMA_PATH.read_text())
    return loaded


def check_metadata(data: bytes) -> dict[str, Any]:
    """Parse and validate an MLF ``metadata.json``; SerializationError names the problem."""
    if len(data) > MAX_METADATA_BYTES:
        raise SerializationError(f"MLF {METADATA_JSON} of {len(data)} bytes is over the limit")
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError) as err:
        raise SerializationError(f"MLF {METADATA_JSON} is not valid JSON: {err}") from None
    if isinstance(obj, dict) and obj.get("version") != MLF_VERSION:
        raise SerializationError(
            f"MLF version {obj.get('version')!r} is not supported; this ember reads version "
            f"{MLF_VERSION}"
        )
    try:
        jsonschema.validate(obj, schema())
    except jsonschema.ValidationError as err:
        where = "/".join(str(p) for p in err.absolute_path) or "(top)"
        raise SerializationError(f"MLF {METADATA_JSON} at {where}: {err.message}") from None
    return dict(obj)
