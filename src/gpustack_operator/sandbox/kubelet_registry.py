"""The kubelet stand-in's device manager: plugin registration and what each plugin advertises.

It plays the kubelet side of the device plugin API v1beta1 as the real one behaves since 1.25: on start it
removes every socket in the device-plugin directory (a restarting kubelet does) and serves Registration on
`kubelet.sock`; Register checks the version and the resource name, dials the plugin's socket, asks
GetDevicePluginOptions (ignoring the request's options) and starts consuming ListAndWatch before it
answers. Each ListAndWatch message replaces the resource's device set; when the stream ends the devices
turn unhealthy (allocatable 0, capacity kept) and the kubelet never redials; after the grace period the
resource is dropped and its capacity reported as 0. A second registration of a name replaces the first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from gpustack_operator.device_manager.plugin.api import CHECKPOINT_FILE, HEALTHY, VERSION, pb, rpc
from gpustack_operator.runtime import Supervisor

log = logging.getLogger(__name__)

LOCAL_POOL = ("grpc.use_local_subchannel_pool", 1)
"""Dial each plugin on a subchannel of its own: grpc shares subchannels between channels to one target, so
a plugin's recreated socket would be reached through the connection to the old one, where the kubelet
dials afresh."""

_QUALIFIED = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")


def is_extended_resource_name(name: str) -> bool:
    """IsExtendedResourceName: `<domain>/<name>`, not in kubernetes.io, and `requests.<name>` qualifies."""
    domain, sep, rest = name.partition("/")
    if (
        not sep
        or domain == "kubernetes.io"
        or domain.endswith(".kubernetes.io")
        or name.startswith("requests.")
    ):
        return False
    return bool(_QUALIFIED.fullmatch(rest)) and len(rest) <= 63


@dataclass
class Endpoint:
    """One registered plugin: its connection, options and last advertised devices (ID -> health)."""

    resource: str
    channel: grpc.aio.Channel
    stub: Any
    options: Any
    devices: dict[str, str] = field(default_factory=dict)
    listed: bool = False
    """True once the first ListAndWatch message arrived."""
    stopped_at: float | None = None
    registered_at: float = field(default_factory=time.time)
    """Wall-clock time of the registration, so a restarter can wait for the *new* plugin's registration."""

    call: Any = None
    """The ListAndWatch call being consumed."""

    @property
    def healthy(self) -> list[str]:
        return [device for device, health in self.devices.items() if health == HEALTHY]

    async def close(self) -> None:
        """Close the connection and wait until grpc has settled the stream's status: its status task
        finishes after `Channel.close()` returns, and on a busy machine after the caller has moved on."""
        if self.call is not None:
            self.call.cancel()
        await self.channel.close()
        if self.call is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.call.code(), 5.0)


class DeviceRegistry(rpc.RegistrationServicer):
    """Registration server plus the per-resource device sets the rest of the stand-in reads."""

    def __init__(
        self,
        plugin_dir: Path,
        on_change: Callable[[], None],
        *,
        grace_period: float = 300.0,
    ) -> None:
        self.plugin_dir = plugin_dir
        self.socket = plugin_dir / "kubelet.sock"
        self.streams = Supervisor("listandwatch")
        """Consumers of the plugins' streams; one ending is normal, so nobody waits on this supervisor."""
        self.on_change = on_change
        self.grace_period = grace_period
        self.endpoints: dict[str, Endpoint] = {}
        self.removed: set[str] = set()
        self._server: grpc.aio.Server | None = None
        self._generation = 0

    async def start(self) -> None:
        self.plugin_dir.mkdir(parents=True, exist_ok=True)
        for entry in self.plugin_dir.iterdir():
            if entry.name != CHECKPOINT_FILE and stat.S_ISSOCK(entry.lstat().st_mode):
                entry.unlink(missing_ok=True)
        server = grpc.aio.server()
        rpc.add_RegistrationServicer_to_server(self, server)
        server.add_insecure_port(f"unix://{self.socket}")
        await server.start()
        self._server = server
        log.info("kubelet registration serving socket=%s", self.socket)

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            await server.stop(0.5)
        await self.streams.stop(1.0)
        for endpoint in self.endpoints.values():
            await endpoint.close()

    def capacity(self) -> dict[str, tuple[int, int]]:
        """Per resource: (capacity, allocatable); resources past their grace period read (0, 0)."""
        now = time.monotonic()
        for name, endpoint in list(self.endpoints.items()):
            if endpoint.stopped_at is not None and now - endpoint.stopped_at >= self.grace_period:
                del self.endpoints[name]
                self.removed.add(name)
        counts = {name: (len(e.devices), len(e.healthy)) for name, e in self.endpoints.items()}
        return {**dict.fromkeys(self.removed, (0, 0)), **counts}

    async def Register(self, request: Any, context: Any) -> Any:  # noqa: N802
        if request.version != VERSION:
            await context.abort(
                grpc.StatusCode.UNKNOWN,
                f"requested API version {request.version!r} is not supported by kubelet. "
                f"Supported version is {VERSION!r}",
            )
        if not is_extended_resource_name(request.resource_name):
            await context.abort(
                grpc.StatusCode.UNKNOWN, f"the ResourceName {request.resource_name!r} is invalid"
            )
        target = f"unix://{self.plugin_dir / request.endpoint}"
        channel = grpc.aio.insecure_channel(target, options=[LOCAL_POOL])
        try:
            await asyncio.wait_for(channel.channel_ready(), 10.0)
            stub = rpc.DevicePluginStub(channel)
            options = await stub.GetDevicePluginOptions(pb.Empty())
        except (TimeoutError, grpc.aio.AioRpcError) as err:
            await channel.close()
            await context.abort(grpc.StatusCode.UNKNOWN, f"failed to dial device plugin: {err}")
        old = self.endpoints.get(request.resource_name)
        # Until the new stream's first message the kubelet keeps the devices it knew (as unhealthy).
        endpoint = Endpoint(request.resource_name, channel, stub, options, dict(old.devices) if old else {})
        self.endpoints[request.resource_name] = endpoint
        self.removed.discard(request.resource_name)
        self._generation += 1
        name = f"listandwatch:{request.resource_name}:{self._generation}"
        self.streams.spawn(name, lambda: self._consume(endpoint))
        if old is not None:
            await old.close()
        log.info("registered resource=%s endpoint=%s", request.resource_name, request.endpoint)
        return pb.Empty()

    async def _consume(self, endpoint: Endpoint) -> None:
        endpoint.call = endpoint.stub.ListAndWatch(pb.Empty())
        try:
            async for response in endpoint.call:
                endpoint.devices = {device.ID: device.health for device in response.devices}
                endpoint.listed = True
                self.on_change()
        except grpc.aio.AioRpcError as err:
            log.info("ListAndWatch ended unexpectedly resource=%s: %s", endpoint.resource, err.code().name)
        if self.endpoints.get(endpoint.resource) is endpoint:
            endpoint.devices = dict.fromkeys(endpoint.devices, "Unhealthy")
            endpoint.stopped_at = time.monotonic()
            self.on_change()
