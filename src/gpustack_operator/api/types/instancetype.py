"""Typed shape of InstanceType (worker.gpustack.ai/v1alpha1, Era B) and its phase values.

Why this module exists: the InstanceType reconciler writes the three-view status, webhooks read the spec,
the aggregated API serves it; all of them handle it as a JSON dict typed by these TypedDicts.
"""

import enum
from typing import NotRequired, TypedDict

from gpustack_operator.api.types.common import ObjectMeta, Quantity
from gpustack_operator.api.types.devices import AcceleratorsFeature


class InstanceTypePhase(enum.StrEnum):
    """``status.phase`` (contract §2.3); ``""`` until the reconciler first writes status."""

    ACTIVE = "Active"
    ACTIVATING = "Activating"
    INACTIVE = "Inactive"
    DRAINING = "Draining"


class InstanceTypeCPUCache(TypedDict, total=False):
    l1i: str
    l1d: str
    l2: str
    l3: str


class InstanceTypeCPU(TypedDict, total=False):
    """CPU detail, inlined into the spec, the accelerator's CPU and the status detail."""

    physicalCores: str
    threadsPerPhysicalCore: str
    logicalCores: str
    stepping: str
    clockSpeed: str
    maxClockSpeed: str
    cacheLine: str
    cache: InstanceTypeCPUCache


class InstanceTypeAcceleratorCPU(InstanceTypeCPU, total=False):
    """The CPU beside an accelerator: descriptors plus the inline CPU detail."""

    manufacturer: str
    product: str
    family: str


class InstanceTypeAcceleratorBase(TypedDict, total=False):
    """Accelerator descriptors shared by the spec and the status detail."""

    memory: str
    """Per-card VRAM, e.g. ``24576Mi``: the divisor of the Pod webhook's sliced-units fold."""
    cores: str
    computeCapability: str
    cpu: InstanceTypeAcceleratorCPU


class InstanceTypeAccelerator(InstanceTypeAcceleratorBase, total=False):
    """The accelerator inlined into the spec."""

    feature: AcceleratorsFeature


class InstanceTypeAcceleratorDetail(InstanceTypeAcceleratorBase, total=False):
    """The observed accelerator inlined into the status detail."""

    slicedDetail: AcceleratorsFeature


class InstanceTypeUnitResources(TypedDict, total=False):
    cpu: str
    """Unit CPU cores, a unitless positive integer (exactly ``1`` for CPU-only types)."""
    ram: str
    """Unit RAM, ``<int>Gi``."""


class InstanceTypeSpec(InstanceTypeCPU, InstanceTypeAccelerator):
    acceleratorGroup: NotRequired[str]
    acceleratable: bool
    manufacturer: NotRequired[str]
    product: NotRequired[str]
    family: NotRequired[str]
    os: str
    arch: str
    unitResources: InstanceTypeUnitResources
    localStorage: str
    generalGroup: NotRequired[str]
    displayName: NotRequired[str]
    inactive: NotRequired[bool]
    description: NotRequired[str]


class InstanceTypeResource(TypedDict, total=False):
    onceMaxRequest: Quantity
    remaining: Quantity
    capacity: Quantity


class InstanceTypeDetail(InstanceTypeCPU, InstanceTypeAcceleratorDetail, total=False):
    """The observed hardware of the pool, computed by the reconciler."""

    manufacturer: str
    product: str
    family: str


class InstanceTypeStatus(TypedDict):
    phase: str
    """An ``InstanceTypePhase`` value, or ``""``."""
    phaseMessage: NotRequired[str]
    accelerator: NotRequired[InstanceTypeResource]
    acceleratorShared: NotRequired[InstanceTypeResource]
    acceleratorSliced: NotRequired[InstanceTypeResource]
    cpu: NotRequired[InstanceTypeResource]
    entrance: NotRequired[str]
    detail: NotRequired[InstanceTypeDetail]


class InstanceType(TypedDict):
    apiVersion: NotRequired[str]
    kind: NotRequired[str]
    metadata: NotRequired[ObjectMeta]
    spec: InstanceTypeSpec
    status: NotRequired[InstanceTypeStatus]
