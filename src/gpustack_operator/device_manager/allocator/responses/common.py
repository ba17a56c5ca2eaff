"""What every vendor's container is given, and the parts the vendor modules build their responses from.

A response is built from a Grant - the container's cards and what it asked for - and comes back as an
Injection: the ContainerResponse the kubelet merges into the container, plus, when the container needs
host files before it starts (a slicing runtime's work directory or quota file), a `prepare` step the
allocator runs once the allocation is recorded, outside the node lock. Exclusive and shared containers,
and the sliced containers of vendors without a slicing runtime here, get the vendor's visible-devices
variable, which its container toolkit (nvidia-container-toolkit, the Ascend docker runtime, ...) turns
into device nodes and driver mounts; vendors whose cards are reached through plain device nodes get
those nodes in the response as well (contract §8). NVIDIA names cards by UUID; the Ascend docker
runtime by the driver's own number, DCMI's physical ID (the N of the `/dev/davinciN` it mounts, which is
not DCMI's logic ID, our index, once any NPU is missing from the logic numbering); the other toolkits by
the vendor library's index. The SSH sidecar gets the variable alone: it enters the main container's
namespaces, holds nothing, and needs no grant of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

from gpustack_operator.api.types.devices import DeviceAllocationMode
from gpustack_operator.device_manager.allocator.demand import SlicedRequest
from gpustack_operator.device_manager.allocator.workdirs import HostPaths, WorkDirs
from gpustack_operator.device_manager.plugin.handler import (
    AllocationRefusedError,
    ContainerResponse,
    DeviceNode,
)
from gpustack_operator.device_manager.plugin.inventory import CardInfo

VISIBLE_DEVICES_ENV: Final = {
    "amd": "AMD_VISIBLE_DEVICES",
    "ascend": "ASCEND_VISIBLE_DEVICES",
    "cambricon": "CAMBRICON_VISIBLE_DEVICES",
    "hygon": "HYGON_VISIBLE_DEVICES",
    "iluvatar": "IX_VISIBLE_DEVICES",
    "metax": "METAX_VISIBLE_DEVICES",
    "mthreads": "MTHREADS_VISIBLE_DEVICES",
    "nvidia": "NVIDIA_VISIBLE_DEVICES",
    "thead": "THEAD_VISIBLE_DEVICES",
}
BY_UUID: Final = frozenset({"nvidia"})
BY_DRIVER_NUMBER: Final = frozenset({"ascend"})
"""Toolkits that name a card by the driver's number for it (`physicalIndexes`), not the library's index."""


class Named(Protocol):
    """A card as far as visibility is concerned (CardInfo and AllocatedCard both are)."""

    @property
    def uuid(self) -> str: ...

    @property
    def index(self) -> int: ...

    @property
    def node_index(self) -> int: ...


@dataclass(frozen=True)
class Grant:
    """One container's Allocate as a response builder sees it."""

    manufacturer: str
    mode: DeviceAllocationMode
    cards: tuple[CardInfo, ...]
    """In the kubelet's order, which is the order the container numbers them."""
    sliced: SlicedRequest | None
    """The container's `.sliced.*` limits (sliced mode only)."""
    container_env: frozenset[str]
    """Names of the env variables the container sets itself: those are never overridden."""
    pod_uid: str
    container: str
    paths: HostPaths

    @property
    def work_dir(self) -> Path:
        """This container's directory on the host (removed with the pod)."""
        return self.paths.container_dir(self.pod_uid, self.container)

    def sliced_request(self) -> SlicedRequest:
        if self.sliced is None:
            raise AllocationRefusedError(f"container {self.container} has no sliced request")
        return self.sliced


Prepare = Callable[[WorkDirs], None]
"""Writes what the container needs on the host before it starts: a few small files, on the event loop
(a worker thread would cost each Allocate two thread wake-ups on a busy node)."""


@dataclass(frozen=True)
class Injection:
    response: ContainerResponse
    prepare: Prepare | None = None


Responder = Callable[[Grant], Injection]


def visible_devices_env(manufacturer: str) -> str:
    return VISIBLE_DEVICES_ENV.get(manufacturer, f"{manufacturer.upper()}_VISIBLE_DEVICES")


def visible_devices(manufacturer: str, cards: Sequence[Named]) -> dict[str, str]:
    """`{<VENDOR>_VISIBLE_DEVICES: "<id>,<id>"}` for the distinct cards, in the order given."""
    names: list[str] = []
    for card in cards:
        if manufacturer in BY_UUID:
            name = card.uuid
        else:
            name = str(card.node_index if manufacturer in BY_DRIVER_NUMBER else card.index)
        if name not in names:
            names.append(name)
    return {visible_devices_env(manufacturer): ",".join(names)}


def visibility_response(manufacturer: str, cards: Sequence[Named]) -> ContainerResponse:
    """The visible-devices env alone: the sidecar, and the default for every mode."""
    return ContainerResponse(envs=visible_devices(manufacturer, cards))


def env_only(grant: Grant) -> Injection:
    """The response of vendors whose container toolkit does the rest (and of passthrough slices)."""
    return Injection(visibility_response(grant.manufacturer, grant.cards))


def with_device_nodes(
    grant: Grant, shared: Iterable[str], per_card: Callable[[CardInfo], Iterable[str]]
) -> Injection:
    """The visible-devices env plus device nodes: the vendor's `shared` control nodes once, then each
    card's own (`per_card`), each at the same path in the container, read-write."""
    paths = list(dict.fromkeys([*shared, *(node for card in grant.cards for node in per_card(card))]))
    response = visibility_response(grant.manufacturer, grant.cards)
    response.devices = [DeviceNode(path, path, "rw") for path in paths]
    return Injection(response)


def dri_nodes(card: CardInfo) -> list[str]:
    """A DRM card's nodes: `/dev/dri/card<N>` and its render node `/dev/dri/renderD<128+N>`.

    N is the card's DRM minor as detection read it from sysfs (`physicalIndexes`), else its index in the
    vendor library, which the driver's probe order matches on a node without other display devices.
    """
    return [f"/dev/dri/card{card.node_index}", f"/dev/dri/renderD{128 + card.node_index}"]
