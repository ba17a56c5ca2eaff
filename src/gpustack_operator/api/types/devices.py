"""Typed shape of Devices (the node inventory and per-card ledger) and the allocation mode enum.

Why this module exists: the device manager, the device plugin and the worker's controllers all read and
write Devices as JSON dicts; these TypedDicts name its fields for mypy and ``DeviceAllocationMode`` gives the
ledger's numeric modes their names.
"""

import enum
from typing import NotRequired, TypedDict

from gpustack_operator.api.types.common import ObjectMeta


class DeviceAllocationMode(enum.IntEnum):
    """How a card is held (Era B numbering); serialised as the number, never the name."""

    NONE = 0
    EXCLUSIVE = 1
    SHARED = 2
    SLICED = 3
    VISIBILITY = 4
    """Internal (the SSH sidecar's view of its instance's card); never written to status."""

    @property
    def label(self) -> str:
        """The name the original's ``String()`` prints: ``None``, ``Exclusive``, ..."""
        return self.name.capitalize()


class AcceleratorSliced(TypedDict):
    maxSize: int
    coresPercentageOvercommit: NotRequired[bool]
    memoryPercentageStep: NotRequired[int]


class AcceleratorsFeature(TypedDict, total=False):
    physicalSliced: AcceleratorSliced
    logicalSliced: AcceleratorSliced


class DeviceTopologyRoCE(TypedDict, total=False):
    ip: str
    subnetMask: str
    gateway: str


class DeviceTopology(TypedDict):
    pciBusId: str
    pciRootId: str
    pciClass: str
    numaAffinity: str
    cpuAffinity: str
    roce: NotRequired[DeviceTopologyRoCE]


class AcceleratorStatus(TypedDict):
    unhealthy: bool


class Accelerator(TypedDict):
    id: str
    index: int
    physicalIndexes: list[int]
    topology: DeviceTopology
    status: AcceleratorStatus


class DevicesGroup(TypedDict):
    id: str
    manufacturer: str
    name: str
    memory: int
    """VRAM per card in MiB."""
    cores: NotRequired[int]
    driverVersion: NotRequired[str]
    runtimeVersion: NotRequired[str]
    computeCapability: NotRequired[str]
    family: NotRequired[str]
    accelerators: NotRequired[list[Accelerator]]
    acceleratorsFeature: NotRequired[AcceleratorsFeature]


class AcceleratorAllocation(TypedDict):
    id: str
    index: int
    mode: int
    """A ``DeviceAllocationMode`` value."""
    allocated: NotRequired[int]
    remaining: NotRequired[int]
    """Units left; negative when the card's holders were given more than it has."""
    oversold: NotRequired[bool]
    """Set when the holders add up to more than the card (an overcommit recorded earlier)."""


class DevicesAllocationGroup(TypedDict):
    id: str
    manufacturer: str
    accelerators: NotRequired[list[AcceleratorAllocation]]


class DevicesSpec(TypedDict):
    groups: list[DevicesGroup]


class DevicesStatus(TypedDict, total=False):
    groups: list[DevicesAllocationGroup]


class Devices(TypedDict):
    apiVersion: NotRequired[str]
    kind: NotRequired[str]
    metadata: NotRequired[ObjectMeta]
    spec: DevicesSpec
    status: NotRequired[DevicesStatus]
