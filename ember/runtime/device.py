"""Device: a DLPack (device_type, device_id) pair; ``ember.cpu(0)`` is the host."""

from __future__ import annotations

from dataclasses import dataclass

from ember.errors import EmberValueError

_TYPE_NAMES = {1: "cpu", 2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal"}
_NAME_TYPES = {name: code for code, name in _TYPE_NAMES.items()}

CPU = 1
#: Device types at or above this mark name a device of an RPC session (as in TVM).
RPC_SESS_MASK = 128


@dataclass(frozen=True, slots=True)
class Device:
    """A device as DLPack names it: ``device_type`` (kDLCPU = 1, ...) and ``device_id``."""

    device_type: int
    device_id: int = 0

    @property
    def type_name(self) -> str:
        """The short device kind name, e.g. ``"cpu"``."""
        return _TYPE_NAMES.get(self.device_type, f"ext{self.device_type}")

    def __str__(self) -> str:
        return f"{self.type_name}({self.device_id})"

    def __repr__(self) -> str:
        return f"ember.{self}"

    def as_int(self) -> int:
        """The little-endian 64-bit packing of the DLDevice struct."""
        return (self.device_type & 0xFFFFFFFF) | ((self.device_id & 0xFFFFFFFF) << 32)

    def sync(self) -> None:
        """Wait for outstanding work on the device (no-op on the host CPU)."""

    @property
    def exist(self) -> bool:
        """Whether this process can run on the device (only the host CPU so far)."""
        return self.device_type == CPU


def cpu(dev_id: int = 0) -> Device:
    """The host CPU device."""
    return Device(CPU, dev_id)


def device(value: str | Device | tuple[int, int], dev_id: int = 0) -> Device:
    """Coerce ``"cpu"``, ``"cpu:0"``, a (type, id) tuple or a Device into a Device."""
    if isinstance(value, Device):
        return value
    if isinstance(value, tuple):
        return Device(int(value[0]), int(value[1]))
    name, _, ident = value.partition(":")
    if name not in _NAME_TYPES:
        raise EmberValueError(f"unknown device {value!r}; known: {', '.join(sorted(_NAME_TYPES))}")
    return Device(_NAME_TYPES[name], int(ident) if ident else dev_id)
