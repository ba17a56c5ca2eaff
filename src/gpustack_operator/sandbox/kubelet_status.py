"""The kubelet stand-in's node status: extended-resource capacity and allocatable from the plugins.

A kubelet publishes, per device-plugin resource, capacity = all devices and allocatable = healthy devices,
and writes 0 for a resource whose plugin is gone past its grace period; the scheduler places pods on
these numbers. The stand-in does the same on the kwok Node's status subresource, right after each change
and on a period (the kubelet's nodeStatusUpdateFrequency), writing only what differs from its last write.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from gpustack_operator.kube import errors, resources
from gpustack_operator.kube.client import Client
from gpustack_operator.sandbox.kubelet_registry import DeviceRegistry

log = logging.getLogger(__name__)


class NodeStatus:
    def __init__(self, client: Client, node: str, registry: DeviceRegistry, period: float = 10.0) -> None:
        self.client = client
        self.node = node
        self.registry = registry
        self.period = period
        self.published: dict[str, tuple[int, int]] = {}
        self._kicked = asyncio.Event()

    def kick(self) -> None:
        self._kicked.set()

    async def run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._kicked.wait(), self.period)
            self._kicked.clear()
            try:
                await self.publish()
            except errors.KubeError as err:
                log.warning("node=%s status update failed, retrying: %s", self.node, err)
                await asyncio.sleep(1.0)
                self._kicked.set()

    async def publish(self) -> None:
        counts = self.registry.capacity()
        if counts == self.published:
            return
        status = {
            "capacity": {name: str(capacity) for name, (capacity, _) in counts.items()},
            "allocatable": {name: str(allocatable) for name, (_, allocatable) in counts.items()},
        }
        await self.client.patch(resources.NODES, self.node, {"status": status}, subresource="status")
        self.published = counts
        log.info(
            "node=%s extended resources %s",
            self.node,
            ", ".join(f"{name}={alloc}/{cap}" for name, (cap, alloc) in sorted(counts.items())),
        )
