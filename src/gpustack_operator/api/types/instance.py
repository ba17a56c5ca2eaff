"""Typed shape of Instance (worker.gpustack.ai/v1alpha1, namespaced; Era B, contract §2.6).

Why this module exists: the Instance webhook defaults and checks the spec, the Instance reconciler turns it
into a Pod and writes status; both handle it as a JSON dict typed here.
"""

import enum
from typing import NotRequired, TypedDict

from gpustack_operator.api.types.common import LocalObjectReference, ObjectMeta, Quantity
from gpustack_operator.api.types.devices import DevicesAllocationGroup


class InstancePhase(enum.StrEnum):
    """``status.phase``, derived by the Instance reconciler from the Instance's Pod.

    The webhooks act on ``Starting`` (no stop) and ``Stopped`` (the only phase a start may leave).
    """

    PENDING = "Pending"
    """No running Pod yet: being created, waiting for Kueue's admission, or for a node."""
    STARTING = "Starting"
    """Scheduled on a node; containers are being created or are not ready."""
    RUNNING = "Running"
    """The Pod runs and every container is ready."""
    FAILED = "Failed"
    """The Pod ended (it is not restarted in place)."""
    STOPPING = "Stopping"
    """The Pod is being deleted (``spec.stop`` or an eviction)."""
    STOPPED = "Stopped"
    """``spec.stop`` and the Pod is gone."""


class InstancePort(TypedDict):
    port: int
    protocol: NotRequired[str]
    """``TCP`` (default), ``UDP`` or ``SCTP``."""
    name: NotRequired[str]


class InstanceEnv(TypedDict):
    name: str
    value: NotRequired[str]


class InstanceResources(TypedDict):
    cpu: Quantity
    ram: Quantity
    localStorage: Quantity
    accelerator: NotRequired[Quantity]
    acceleratorSlicedMemoryPercentage: NotRequired[int]
    acceleratorSlicedCoresPercentage: NotRequired[int]


class InstanceEphemeralVolume(TypedDict):
    capacity: Quantity


class InstanceVolume(TypedDict, total=False):
    """Exactly one of ``ephemeral`` / ``persistent`` (checked by the webhook)."""

    ephemeral: InstanceEphemeralVolume
    persistent: LocalObjectReference


class InstanceSpec(TypedDict):
    displayName: NotRequired[str]
    description: NotRequired[str]
    type: str
    """The InstanceType name (immutable)."""
    image: str
    imagePullPolicy: NotRequired[str]
    command: NotRequired[list[str]]
    privileged: NotRequired[bool]
    ports: NotRequired[list[InstancePort]]
    env: NotRequired[list[InstanceEnv]]
    resources: NotRequired[InstanceResources]
    volumeMount: NotRequired[str]
    imagePullSecret: NotRequired[LocalObjectReference]
    volume: NotRequired[InstanceVolume]
    sshPublicKey: NotRequired[LocalObjectReference]
    stop: NotRequired[bool]


class InstanceStatusPort(TypedDict, total=False):
    port: int
    protocol: str
    name: str
    nodePort: int


class InstanceStatus(TypedDict, total=False):
    phase: str
    phaseMessage: str
    nodeName: str
    accessAddresses: list[str]
    hostIPs: list[str]
    podIPs: list[str]
    ports: list[InstanceStatusPort]
    allocations: list[DevicesAllocationGroup]


class Instance(TypedDict):
    apiVersion: NotRequired[str]
    kind: NotRequired[str]
    metadata: NotRequired[ObjectMeta]
    spec: InstanceSpec
    status: NotRequired[InstanceStatus]
