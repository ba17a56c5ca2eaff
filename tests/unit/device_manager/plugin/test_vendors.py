"""A vendor whose cards appear after start gets its plugins; one whose cards all go has them stopped.

The kubelet side is the sandbox's stand-in registry, in process, on real unix sockets; the cards are the
simulated backend's (the sandbox's A10 and Ascend nodes), grouped as the detect loop groups them.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from gpustack_operator.api.types.devices import DeviceAllocationMode
from gpustack_operator.device_manager.grouping import group_cards
from gpustack_operator.device_manager.model import Card
from gpustack_operator.device_manager.plugin.handler import ResourceSpec
from gpustack_operator.device_manager.plugin.inventory import Inventory
from gpustack_operator.device_manager.plugin.server import ResourceServer
from gpustack_operator.device_manager.plugin.vendors import VendorPlugins
from gpustack_operator.device_manager.simulated import SimulatedBackend
from gpustack_operator.runtime import Backoff, Supervisor
from gpustack_operator.sandbox.kubelet_registry import DeviceRegistry
from tests.helpers import eventually, grpc_calls_settled
from tests.unit.device_manager.plugin.conftest import RecordingHandler

INVENTORY = Path(__file__).parents[4] / "src/gpustack_operator/sandbox/inventory.yaml"
A10 = SimulatedBackend(INVENTORY, "a10-0").detect()
ASCEND = SimulatedBackend(INVENTORY, "ascend-0").detect()
RESOURCES = {"nvidia": "nvidia.com/gpu", "ascend": "huawei.com/npu"}
"""One resource per vendor keeps the test small; serve() adds the other modes the same way."""
FAST = Backoff(base=0.05, cap=0.2)


def specs_of(manufacturer: str, inventory: Inventory) -> list[ResourceSpec]:
    return [ResourceSpec(RESOURCES[manufacturer], manufacturer, DeviceAllocationMode.EXCLUSIVE)]


class Node:
    """The device manager's side: inventories fed by 'detection', and the vendor plugins over them."""

    def __init__(self, directory: Path, handler: RecordingHandler) -> None:
        self.inventories = {mfr: Inventory(mfr) for mfr in RESOURCES}
        self.plugins = VendorPlugins(
            self.inventories,
            specs_of,
            lambda spec, inventory: ResourceServer(spec, inventory, handler, directory),
            directory / "kubelet.sock",
            poll=0.05,
            backoff=FAST,
        )

    def detected(self, cards: Sequence[Card]) -> None:
        """What serve's detect-loop listener does with each new detection."""
        groups = group_cards(cards)
        for inventory in self.inventories.values():
            inventory.update(groups)
        self.plugins.refresh()


@contextlib.asynccontextmanager
async def node_with_kubelet(
    directory: Path, handler: RecordingHandler
) -> AsyncIterator[tuple[Node, DeviceRegistry]]:
    registry = DeviceRegistry(directory, lambda: None)
    await registry.start()
    node = Node(directory, handler)
    try:
        async with Supervisor("test") as sup:
            sup.spawn("device-plugins", node.plugins.run)
            yield node, registry
    finally:
        await registry.stop()
        await grpc_calls_settled()


def advertised(registry: DeviceRegistry) -> dict[str, tuple[int, int]]:
    """Per resource the kubelet has heard from: (capacity, allocatable)."""
    return {name: counts for name, counts in registry.capacity().items() if registry.endpoints[name].listed}


async def test_a_vendor_whose_cards_appear_late_gets_its_plugin_and_the_others_keep_their_stream(
    sock_dir: Path, handler: RecordingHandler
) -> None:
    async with node_with_kubelet(sock_dir, handler) as (node, registry):
        node.detected(A10)

        async def nvidia_only() -> bool:
            return advertised(registry) == {"nvidia.com/gpu": (4, 4)}

        await eventually(nvidia_only, timeout=30, interval=0.05, what="nvidia registered, nothing else")
        assert not (sock_dir / "gpustack-ascend-exclusive.sock").exists()
        nvidia_endpoint = registry.endpoints["nvidia.com/gpu"]

        node.detected([*A10, *ASCEND])  # the Ascend driver finished loading

        async def both() -> bool:
            return advertised(registry) == {"nvidia.com/gpu": (4, 4), "huawei.com/npu": (8, 8)}

        await eventually(both, timeout=30, interval=0.05, what="the late vendor registered")
        assert registry.endpoints["nvidia.com/gpu"] is nvidia_endpoint, "nvidia was not re-registered"
        assert nvidia_endpoint.stopped_at is None, "nvidia's ListAndWatch stream never broke"


async def test_a_vendor_whose_cards_all_go_has_its_plugin_stopped_and_its_socket_removed(
    sock_dir: Path, handler: RecordingHandler
) -> None:
    async with node_with_kubelet(sock_dir, handler) as (node, registry):
        node.detected([*A10, *ASCEND])

        async def both() -> bool:
            return advertised(registry) == {"nvidia.com/gpu": (4, 4), "huawei.com/npu": (8, 8)}

        await eventually(both, timeout=30, interval=0.05, what="both vendors registered")
        node.detected(ASCEND)  # every NVIDIA card gone (driver unloaded)

        async def nvidia_stopped() -> dict[str, tuple[int, int]] | None:
            gone = registry.endpoints["nvidia.com/gpu"].stopped_at is not None
            return advertised(registry) if gone else None

        counts = await eventually(nvidia_stopped, timeout=30, interval=0.05, what="nvidia's stream ended")
        assert counts["nvidia.com/gpu"][1] == 0, "nothing of nvidia is allocatable"
        assert counts["huawei.com/npu"] == (8, 8)
        assert node.plugins.serving == {"ascend": tuple(specs_of("ascend", node.inventories["ascend"]))}
        assert (sock_dir / "gpustack-ascend-exclusive.sock").exists()
        assert not (sock_dir / "gpustack-nvidia-exclusive.sock").exists(), "the kubelet sees it gone"
        assert registry.endpoints["huawei.com/npu"].stopped_at is None

        node.detected([*A10, *ASCEND])  # the driver is back: served again without a restart

        await eventually(both, timeout=30, interval=0.05, what="nvidia registered again")
