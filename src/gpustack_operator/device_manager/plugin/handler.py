"""What a resource server asks of the allocator, in plain Python: no protobuf, no gRPC.

The gRPC layer (server.py) owns sockets, registration and streaming; deciding which pod an Allocate is
for, whether its cards are free and what to inject belongs to the allocator. This module is the seam
between them: the resource a server stands for, the container response the allocator builds, the
errors it may raise (each naming the gRPC status the kubelet should see), and the handler protocol.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from gpustack_operator.api.types.devices import DeviceAllocationMode


@dataclass(frozen=True)
class ResourceSpec:
    """One registered extended resource: `nvidia.com/gpu.shared` is (nvidia, SHARED)."""

    name: str
    manufacturer: str
    mode: DeviceAllocationMode


@dataclass(frozen=True)
class Mount:
    container_path: str
    host_path: str
    read_only: bool


@dataclass(frozen=True)
class DeviceNode:
    """A device node (`/dev/...`) the container gets, with cgroup permissions (`rw`, `rwm`)."""

    container_path: str
    host_path: str
    permissions: str = "rw"


@dataclass
class ContainerResponse:
    """What the kubelet merges into the container: env, mounts, device nodes, CRI annotations."""

    envs: dict[str, str] = field(default_factory=dict)
    mounts: list[Mount] = field(default_factory=list)
    devices: list[DeviceNode] = field(default_factory=list)
    annotations: dict[str, str] = field(default_factory=dict)


class AllocateError(Exception):
    """Allocate cannot be served; `status` names the gRPC status code the kubelet receives."""

    status = "INTERNAL"


class AllocationRefusedError(AllocateError):
    """The cards the kubelet chose cannot be given (held in another mode, unknown, unhealthy)."""

    status = "FAILED_PRECONDITION"


class PodNotFoundError(AllocateError):
    """No pending pod on this node asks for what the kubelet is allocating."""

    status = "NOT_FOUND"


class AllocationHandler(Protocol):
    """The allocator as the resource servers call it."""

    async def allocate(self, resource: ResourceSpec, device_ids: Sequence[str]) -> ContainerResponse:
        """Serve one container's Allocate; raises AllocateError."""
        ...

    def preferred(
        self, resource: ResourceSpec, available: Sequence[str], must_include: Sequence[str], size: int
    ) -> list[str]:
        """IDs the kubelet should pick (may be fewer than `size`, or none: the kubelet then chooses)."""
        ...
