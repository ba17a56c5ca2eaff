"""The PodResources client over real gRPC on a unix socket: what the kubelet lists, and when it cannot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
import pytest

from gpustack_operator.device_manager.plugin.server import serve_unix
from gpustack_operator.device_manager.podresources.api import pb, rpc
from gpustack_operator.device_manager.podresources.client import PodResourcesClient
from gpustack_operator.device_manager.podresources.model import pod_resources


class Kubelet(rpc.PodResourcesListerServicer):  # type: ignore[misc]
    def __init__(self) -> None:
        self.pods: list[Any] = []

    async def List(self, request: Any, context: Any) -> Any:
        return pb.ListPodResourcesResponse(pod_resources=self.pods)


async def serve(socket: Path, kubelet: Kubelet) -> grpc.aio.Server:
    return await serve_unix(
        socket, lambda server: rpc.add_PodResourcesListerServicer_to_server(kubelet, server)
    )


@pytest.fixture
def socket(tmp_path: Path) -> Path:
    return tmp_path / "kubelet.sock"


async def test_lists_the_kubelets_pods_with_each_containers_committed_devices(socket: Path) -> None:
    kubelet = Kubelet()
    kubelet.pods = [
        pod_resources(("ns", "admitted"), {"a": {"nvidia.com/gpu": ("GPU-1::0",)}, "b": {}}),
        pod_resources(("ns", "admitting"), {"main": {}}),
    ]
    server = await serve(socket, kubelet)
    client = PodResourcesClient(socket)
    try:
        active = await client.active()
    finally:
        await client.close()
        await server.stop(None)
    assert active is not None
    assert set(active.pods) == {("ns", "admitted"), ("ns", "admitting")}
    admitted = {"metadata": {"namespace": "ns", "name": "admitted"}}
    assert active.lists(admitted)
    assert active.devices(admitted, "a") == {"nvidia.com/gpu": ("GPU-1::0",)}
    assert active.devices(admitted, "b") == {}
    assert not active.lists({"metadata": {"namespace": "other", "name": "admitted"}})


async def test_no_socket_or_a_dead_kubelet_means_no_answer_and_a_restarted_one_is_asked_again(
    socket: Path,
) -> None:
    client = PodResourcesClient(socket, timeout=2.0)
    assert await client.active() is None  # no socket yet
    kubelet = Kubelet()
    server = await serve(socket, kubelet)
    try:
        assert await client.active() is not None
        await server.stop(None)  # the kubelet is gone (its socket path may stay behind)
        assert await client.active() is None
        server = await serve(socket, kubelet)  # the kubelet restarted on the same path
        kubelet.pods = [pod_resources(("ns", "p"), {"main": {}})]
        active = await client.active()
        assert active is not None
        assert set(active.pods) == {("ns", "p")}
    finally:
        await client.close()
        await server.stop(None)
