"""The one error hierarchy of ember: every error says what went wrong, where, and what to do.

Each class mixes in the builtin exception a Python user would expect to catch, so
``except ValueError`` still works for a bad argument while ``except EmberError`` catches
everything ember raises.
"""

from __future__ import annotations


class EmberError(Exception):
    """Base class of every error ember raises."""


class RegistryError(EmberError, KeyError):
    """A lookup in a registry missed, or a name was registered twice."""

    def __str__(self) -> str:  # KeyError would repr() the message; keep it readable.
        return str(self.args[0]) if self.args else ""


class EmberTypeError(EmberError, TypeError):
    """A value of the wrong type crossed an API boundary (e.g. a packed-function argument)."""


class EmberValueError(EmberError, ValueError):
    """A value had the right type but an unusable content (shape, dtype, range)."""


class FFIError(EmberError, RuntimeError):
    """A call across the C ABI failed; the message is the C side's last error."""


class ToolchainError(EmberError, RuntimeError):
    """The system C compiler or linker failed; the message shows the command and its output."""


class ModuleLoadError(EmberError, OSError):
    """A module file could not be loaded: unknown format, missing loader, unreadable library."""


class SerializationError(EmberError, ValueError):
    """Serialized data (JSON, blob, tar, params) is corrupt, truncated, hostile or too new."""


class ArtifactError(EmberError, ValueError):
    """An artifact or artifact set is inconsistent, not exportable, or failed verification."""


class FrontendError(EmberError, ValueError):
    """A model file could not be read or converted (malformed file, cycle, missing initializer)."""


class OpNotSupportedError(EmberError, NotImplementedError):
    """One or more operators of a model are not supported; the message lists all of them."""


class IRError(EmberError, ValueError):
    """The IR is ill-formed or ill-typed (a pass or an importer produced something invalid)."""


class CompileError(EmberError, RuntimeError):
    """Lowering or code generation failed for a reason that is not the user's input."""


class ExecutorError(EmberError, RuntimeError):
    """An executor was used wrongly (missing input, unknown output index, not yet run)."""


class RPCError(EmberError, ConnectionError):
    """A remote procedure call failed or a peer sent a malformed message."""


class UsageError(EmberValueError):
    """A command-line flag or file argument was refused; ``ember`` exits with code 2."""
