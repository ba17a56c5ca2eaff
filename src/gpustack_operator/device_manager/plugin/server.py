"""One kubelet device plugin endpoint: a grpc.aio server on a unix socket for one extended resource.

The kubelet knows a resource only through the plugin that registered it, so each (manufacturer, mode)
pair (`nvidia.com/gpu`, `.shared`, `.sliced`, `device.gpustack.ai/nvidia.visibility`) gets its own
socket and its own registration. The server advertises the inventory's cards as that mode's tokens,
streams the full list again on every change (the kubelet replaces its view with each message), and
hands Allocate and GetPreferredAllocation to the allocator. Serve first, then register: since 1.25 the
kubelet dials back and calls GetDevicePluginOptions inside its Register handler, so Register is awaited
on an aio stub while this loop keeps serving.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import grpc

from gpustack_operator.device_manager.plugin import ids
from gpustack_operator.device_manager.plugin.api import HEALTHY, UNHEALTHY, VERSION, pb, rpc
from gpustack_operator.device_manager.plugin.handler import (
    AllocateError,
    AllocationHandler,
    ContainerResponse,
    ResourceSpec,
)
from gpustack_operator.device_manager.plugin.inventory import Inventory

log = logging.getLogger(__name__)

LOCAL_POOL = ("grpc.use_local_subchannel_pool", 1)
"""A fresh subchannel per channel: a recreated socket path must not reuse a connection to the old one."""


Context = grpc.aio.ServicerContext
"""What grpc.aio hands each handler, typed by the call's request and response messages."""

MAX_SOCKET_PATH = 107
"""Bytes a unix socket path may have (sun_path is 108 with the terminating NUL)."""


def _clear_socket_path(socket: Path) -> None:
    if len(str(socket).encode()) > MAX_SOCKET_PATH:
        raise OSError(f"socket path {socket} is longer than {MAX_SOCKET_PATH} bytes")
    socket.parent.mkdir(parents=True, exist_ok=True)
    socket.unlink(missing_ok=True)


async def serve_unix(socket: Path, add_servicer: Callable[[grpc.aio.Server], None]) -> grpc.aio.Server:
    """A started grpc.aio server on the unix socket `socket` (a stale file there is replaced)."""
    _clear_socket_path(socket)
    server = grpc.aio.server()
    add_servicer(server)
    server.add_insecure_port(f"unix://{socket}")
    await server.start()
    return server


def socket_name(resource: ResourceSpec) -> str:
    """`gpustack-nvidia-shared.sock`: one short file name per resource in the device-plugin directory."""
    return f"gpustack-{resource.manufacturer}-{resource.mode.name.lower()}.sock"


def to_pb(response: ContainerResponse) -> pb.ContainerAllocateResponse:
    return pb.ContainerAllocateResponse(
        envs=response.envs,
        mounts=[pb.Mount(container_path=m.container_path, host_path=m.host_path, read_only=m.read_only)
                for m in response.mounts],
        devices=[pb.DeviceSpec(container_path=d.container_path, host_path=d.host_path,
                               permissions=d.permissions) for d in response.devices],
        annotations=response.annotations,
    )  # fmt: skip


class ResourceServer(rpc.DevicePluginServicer):
    """Serves the DevicePlugin service for one resource and registers it with the kubelet."""

    def __init__(
        self,
        resource: ResourceSpec,
        inventory: Inventory,
        handler: AllocationHandler,
        plugin_dir: Path,
        *,
        allocate_timeout: float = 60.0,
    ) -> None:
        self.resource = resource
        self.inventory = inventory
        self.handler = handler
        self.socket = plugin_dir / socket_name(resource)
        self.allocate_timeout = allocate_timeout
        self._server: grpc.aio.Server | None = None

    # ---- lifecycle -----------------------------------------------------------------------------------------
    async def start(self, ready_timeout: float = 10.0) -> None:
        """Listen on the socket (replacing a stale file) and wait until it accepts connections."""
        await self.stop()
        self._server = await serve_unix(
            self.socket, lambda server: rpc.add_DevicePluginServicer_to_server(self, server)
        )
        async with grpc.aio.insecure_channel(f"unix://{self.socket}", options=[LOCAL_POOL]) as channel:
            await asyncio.wait_for(channel.channel_ready(), ready_timeout)
        log.info("device plugin serving resource=%s socket=%s", self.resource.name, self.socket)

    async def register(self, kubelet_socket: Path, timeout: float = 30.0) -> None:
        """Register with the kubelet; raises grpc.aio.AioRpcError when it refuses or cannot be reached."""
        request = pb.RegisterRequest(
            version=VERSION,
            endpoint=self.socket.name,
            resource_name=self.resource.name,
            options=self.options(),
        )
        async with grpc.aio.insecure_channel(f"unix://{kubelet_socket}", options=[LOCAL_POOL]) as channel:
            await rpc.RegistrationStub(channel).Register(request, timeout=timeout)
        log.info("registered with kubelet resource=%s endpoint=%s", self.resource.name, self.socket.name)

    async def stop(self, grace: float = 1.0) -> None:
        """Stop serving; grpc removes the socket file, open ListAndWatch streams end."""
        server, self._server = self._server, None
        if server is not None:
            await server.stop(grace)

    @property
    def serving(self) -> bool:
        return self._server is not None and self.socket.exists()

    # ---- what is advertised --------------------------------------------------------------------------------
    def options(self) -> pb.DevicePluginOptions:
        return pb.DevicePluginOptions(pre_start_required=False, get_preferred_allocation_available=True)

    def devices(self) -> list[pb.Device]:
        """The full device list for this resource: every token of every card, healthy when the card is and
        can serve this resource's mode now (inventory.py: a card held in another mode is Unhealthy here)."""
        devices = []
        for card in self.inventory.cards():
            health = HEALTHY if self.inventory.serves(card, self.resource.mode) else UNHEALTHY
            topology = None
            if card.numa_node is not None:
                topology = pb.TopologyInfo(nodes=[pb.NUMANode(ID=card.numa_node)])
            for device_id in ids.card_ids(self.resource.mode, card.group, card.uuid, card.max_slices):
                devices.append(pb.Device(ID=device_id, health=health, topology=topology))
        return devices

    # ---- the DevicePlugin service --------------------------------------------------------------------------
    async def GetDevicePluginOptions(  # noqa: N802
        self, request: pb.Empty, context: Context[pb.Empty, pb.DevicePluginOptions]
    ) -> pb.DevicePluginOptions:
        return self.options()

    async def ListAndWatch(  # noqa: N802
        self, request: pb.Empty, context: Context[pb.Empty, pb.ListAndWatchResponse]
    ) -> AsyncIterator[pb.ListAndWatchResponse]:
        last: list[pb.Device] | None = None
        while True:
            version = self.inventory.version
            devices = self.devices()
            if devices != last:
                healthy = sum(1 for d in devices if d.health == HEALTHY)
                log.info(
                    "ListAndWatch send resource=%s devices=%d healthy=%d",
                    self.resource.name,
                    len(devices),
                    healthy,
                )
                yield pb.ListAndWatchResponse(devices=devices)
                last = devices
            await self.inventory.wait_changed(version)

    async def GetPreferredAllocation(  # noqa: N802
        self,
        request: pb.PreferredAllocationRequest,
        context: Context[pb.PreferredAllocationRequest, pb.PreferredAllocationResponse],
    ) -> pb.PreferredAllocationResponse:
        responses = [
            pb.ContainerPreferredAllocationResponse(
                deviceIDs=self.handler.preferred(
                    self.resource,
                    list(req.available_deviceIDs),
                    list(req.must_include_deviceIDs),
                    req.allocation_size,
                )
            )
            for req in request.container_requests
        ]
        return pb.PreferredAllocationResponse(container_responses=responses)

    async def Allocate(  # noqa: N802
        self, request: pb.AllocateRequest, context: Context[pb.AllocateRequest, pb.AllocateResponse]
    ) -> pb.AllocateResponse:
        responses = []
        for req in request.container_requests:
            device_ids = list(req.devices_ids)
            try:
                response = await asyncio.wait_for(
                    self.handler.allocate(self.resource, device_ids), self.allocate_timeout
                )
            except AllocateError as err:
                log.warning(
                    "Allocate refused resource=%s devices=%s: %s", self.resource.name, device_ids, err
                )
                await context.abort(grpc.StatusCode[err.status], str(err))
            except TimeoutError:
                log.error("Allocate timed out resource=%s devices=%s", self.resource.name, device_ids)
                await context.abort(
                    grpc.StatusCode.DEADLINE_EXCEEDED,
                    f"allocating {device_ids} took longer than {self.allocate_timeout:.0f}s",
                )
            responses.append(to_pb(response))
        return pb.AllocateResponse(container_responses=responses)

    async def PreStartContainer(  # noqa: N802
        self,
        request: pb.PreStartContainerRequest,
        context: Context[pb.PreStartContainerRequest, pb.PreStartContainerResponse],
    ) -> pb.PreStartContainerResponse:
        return pb.PreStartContainerResponse()
