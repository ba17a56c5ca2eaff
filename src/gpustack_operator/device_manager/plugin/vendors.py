"""Device-plugin servers per manufacturer, started when its cards appear and stopped when they all go.

A node's cards are not fixed at start: a driver still loading when the DaemonSet pod starts shows its cards
a few periods later, and a driver unloaded (or every card fallen off the bus) takes them all away. The
kubelet knows a resource only while a plugin serves it, so after every detection `VendorPlugins.sync()`
compares, per manufacturer, the resources its cards should be served as with those being served: a vendor
with new resources gets its servers and its own Registrar (started, registered, re-registered after a
kubelet restart, all under a Supervisor of its own), and a vendor left with no cards has its Registrar
stopped, which stops its servers and removes their sockets. The kubelet then sees the ListAndWatch stream
end, reports the devices unhealthy (allocatable 0) and drops the resource after its grace period, which
is what the device plugin API offers in place of unregistering. Other vendors' servers are left running:
their streams never break.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpustack_operator.device_manager.plugin.handler import ResourceSpec
from gpustack_operator.device_manager.plugin.inventory import Inventory
from gpustack_operator.device_manager.plugin.registrar import RETRY, Registrar
from gpustack_operator.device_manager.plugin.server import ResourceServer
from gpustack_operator.runtime import Backoff, Clock, MonotonicClock, Supervisor

log = logging.getLogger(__name__)

SpecsOf = Callable[[str, Inventory], Sequence[ResourceSpec]]
"""The resources a manufacturer's cards are served as, given its inventory (which has cards)."""
ServerOf = Callable[[ResourceSpec, Inventory], ResourceServer]


@dataclass
class _Serving:
    specs: tuple[ResourceSpec, ...]
    registrar: Registrar
    supervisor: Supervisor


class VendorPlugins:
    """Keeps one Registrar per manufacturer that has cards, in step with the inventories."""

    def __init__(
        self,
        inventories: Mapping[str, Inventory],
        specs_of: SpecsOf,
        server_of: ServerOf,
        kubelet_socket: Path,
        *,
        poll: float = 1.0,
        backoff: Backoff = RETRY,
        clock: Clock | None = None,
    ) -> None:
        self.inventories = inventories
        self.specs_of = specs_of
        self.server_of = server_of
        self.kubelet_socket = kubelet_socket
        self.poll = poll
        self.backoff = backoff
        self.clock: Clock = clock or MonotonicClock()
        self._serving: dict[str, _Serving] = {}
        self._dirty = asyncio.Event()

    @property
    def serving(self) -> dict[str, tuple[ResourceSpec, ...]]:
        """Manufacturer -> the resources its servers serve now."""
        return {mfr: serving.specs for mfr, serving in self._serving.items()}

    def registrar(self, manufacturer: str) -> Registrar | None:
        serving = self._serving.get(manufacturer)
        return serving.registrar if serving else None

    def refresh(self) -> None:
        """The inventories changed (call from the detect loop's listener); `run` syncs soon after."""
        self._dirty.set()

    async def run(self) -> None:
        """Sync after every refresh until cancelled; then stop every vendor's servers."""
        try:
            while True:
                await self._dirty.wait()
                self._dirty.clear()
                await self.sync()
        finally:
            await asyncio.gather(*(self._stop(mfr, "shutting down") for mfr in list(self._serving)))

    async def sync(self) -> None:
        """Start, stop or rebuild each manufacturer's servers so they serve what its cards call for."""
        for mfr, inventory in self.inventories.items():
            wanted = tuple(self.specs_of(mfr, inventory)) if inventory.cards() else ()
            serving = self._serving.get(mfr)
            if serving is not None and serving.specs == wanted:
                continue
            if serving is not None:
                await self._stop(mfr, "its cards are gone" if not wanted else "its resources changed")
            if wanted:
                self._start(mfr, inventory, wanted)
        if not self._serving:
            log.warning("no cards of %s; serving nothing", ",".join(self.inventories) or "any manufacturer")

    def _start(self, mfr: str, inventory: Inventory, specs: tuple[ResourceSpec, ...]) -> None:
        servers = [self.server_of(spec, inventory) for spec in specs]
        registrar = Registrar(
            servers, self.kubelet_socket, poll=self.poll, backoff=self.backoff, clock=self.clock
        )
        supervisor = Supervisor(f"device-plugins:{mfr}")
        supervisor.spawn(f"registrar:{mfr}", registrar.run, restart="on-failure")
        self._serving[mfr] = _Serving(specs, registrar, supervisor)
        log.info("manufacturer=%s device plugins starting resources=%s", mfr, ",".join(s.name for s in specs))

    async def _stop(self, mfr: str, why: str) -> None:
        serving = self._serving.pop(mfr)
        await serving.supervisor.stop()
        for server in serving.registrar.servers:
            server.socket.unlink(missing_ok=True)
        log.info(
            "manufacturer=%s device plugins stopped (%s) resources=%s",
            mfr,
            why,
            ",".join(spec.name for spec in serving.specs),
        )
