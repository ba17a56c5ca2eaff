"""The kubelet stand-in's PodResources v1 server: who the kubelet runs and which device IDs it gave them.

A real kubelet serves `v1.PodResourcesLister` on `/var/lib/kubelet/pod-resources/kubelet.sock`; the device
manager asks it, during Allocate, which pods the kubelet holds as active. This server answers from the
stand-in's own admission state with the kubelet's semantics (pkg/kubelet/apis/podresources/server_v1.go):
`List` reports the active pods - admitted, or being admitted right now - with app containers and
restartable init containers, each container's device IDs only after its Allocate returned; `Get` answers
for one pod or fails with NotFound; `GetAllocatableResources` reports the healthy devices of every
registered resource.
"""

from __future__ import annotations

import logging
from pathlib import Path

import grpc

from gpustack_operator.device_manager.podresources.api import pb, rpc
from gpustack_operator.device_manager.podresources.model import pod_resources
from gpustack_operator.sandbox.kubelet_admission import Admission
from gpustack_operator.sandbox.kubelet_registry import DeviceRegistry

log = logging.getLogger(__name__)

Context = grpc.aio.ServicerContext


class PodResourcesServer(rpc.PodResourcesListerServicer):
    def __init__(self, directory: Path, admission: Admission, registry: DeviceRegistry) -> None:
        self.socket = directory / "kubelet.sock"
        self.admission = admission
        self.registry = registry
        self._server: grpc.aio.Server | None = None

    def _listed(self) -> list[pb.PodResources]:
        return [pod_resources(pod, containers) for pod, containers in self.admission.active()]

    async def List(  # noqa: N802
        self,
        request: pb.ListPodResourcesRequest,
        context: Context[pb.ListPodResourcesRequest, pb.ListPodResourcesResponse],
    ) -> pb.ListPodResourcesResponse:
        return pb.ListPodResourcesResponse(pod_resources=self._listed())

    async def Get(  # noqa: N802
        self,
        request: pb.GetPodResourcesRequest,
        context: Context[pb.GetPodResourcesRequest, pb.GetPodResourcesResponse],
    ) -> pb.GetPodResourcesResponse:
        for entry in self._listed():
            if (entry.namespace, entry.name) == (request.pod_namespace, request.pod_name):
                return pb.GetPodResourcesResponse(pod_resources=entry)
        await context.abort(
            grpc.StatusCode.NOT_FOUND, f"pod {request.pod_name} not found in {request.pod_namespace}"
        )
        raise AssertionError("not reached: abort raises")

    async def GetAllocatableResources(  # noqa: N802
        self,
        request: pb.AllocatableResourcesRequest,
        context: Context[pb.AllocatableResourcesRequest, pb.AllocatableResourcesResponse],
    ) -> pb.AllocatableResourcesResponse:
        devices = [
            pb.ContainerDevices(resource_name=name, device_ids=endpoint.healthy)
            for name, endpoint in sorted(self.registry.endpoints.items())
            if endpoint.stopped_at is None
        ]
        return pb.AllocatableResourcesResponse(devices=devices)

    async def start(self) -> None:
        """Serve on the socket, replacing the file a previous kubelet left there."""
        self.socket.parent.mkdir(parents=True, exist_ok=True)
        self.socket.unlink(missing_ok=True)
        server = grpc.aio.server()
        rpc.add_PodResourcesListerServicer_to_server(self, server)
        server.add_insecure_port(f"unix://{self.socket}")
        await server.start()
        self._server = server
        log.info("PodResources serving socket=%s", self.socket)

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            await server.stop(1.0)
