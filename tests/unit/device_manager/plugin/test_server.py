"""A resource server speaks v1beta1 over a real unix socket, as the kubelet sees it."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import pytest_asyncio

from gpustack_operator.device_manager.plugin.api import HEALTHY, UNHEALTHY, pb, rpc
from gpustack_operator.device_manager.plugin.inventory import Inventory
from gpustack_operator.device_manager.plugin.server import ResourceServer, socket_name
from tests.unit.device_manager.allocator.builders import (
    EXCLUSIVE,
    SHARED,
    SLICED,
    VISIBILITY,
    group,
    inventory,
)
from tests.unit.device_manager.plugin.conftest import RecordingHandler


@contextlib.asynccontextmanager
async def serving(server: ResourceServer) -> AsyncIterator[Any]:
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"unix://{server.socket}") as channel:
            yield rpc.DevicePluginStub(channel)
    finally:
        await server.stop()


@pytest_asyncio.fixture(loop_scope="session")
async def stub(sock_dir: Path, handler: RecordingHandler) -> AsyncIterator[Any]:
    async with serving(ResourceServer(EXCLUSIVE, inventory(), handler, sock_dir)) as client:
        yield client


def test_each_resource_gets_its_own_short_socket_file_name() -> None:
    assert socket_name(SHARED) == "gpustack-nvidia-shared.sock"
    assert socket_name(VISIBILITY) == "gpustack-nvidia-visibility.sock"


async def test_a_socket_path_too_long_for_unix_sockets_is_refused(
    sock_dir: Path, handler: RecordingHandler
) -> None:
    server = ResourceServer(EXCLUSIVE, inventory(), handler, sock_dir / ("d" * 90))
    with pytest.raises(OSError, match="longer than 107 bytes"):
        await server.start()


async def test_options_offer_preferred_allocation_and_no_prestart(stub: Any) -> None:
    options = await stub.GetDevicePluginOptions(pb.Empty())
    assert options.get_preferred_allocation_available is True
    assert options.pre_start_required is False


@pytest.mark.parametrize(
    ("resource", "count"),
    [(EXCLUSIVE, 2), (SHARED, 20), (SLICED, 256), (VISIBILITY, 1024)],
    ids=["exclusive-1-per-card", "shared-10-per-card", "sliced-128-per-card", "visibility-512-per-card"],
)
async def test_list_and_watch_sends_every_token_of_every_card(
    sock_dir: Path, handler: RecordingHandler, resource: Any, count: int
) -> None:
    async with serving(ResourceServer(resource, inventory(), handler, sock_dir)) as client:
        stream = client.ListAndWatch(pb.Empty())
        first = await stream.read()
        stream.cancel()
    assert len(first.devices) == count
    assert {d.health for d in first.devices} == {HEALTHY}
    assert [n.ID for n in first.devices[0].topology.nodes] == [0]


async def test_list_and_watch_resends_the_full_list_when_a_card_turns_unhealthy_and_back(
    sock_dir: Path, handler: RecordingHandler
) -> None:
    cards: Inventory = inventory(group(count=2))
    async with serving(ResourceServer(EXCLUSIVE, cards, handler, sock_dir)) as client:
        stream = client.ListAndWatch(pb.Empty())
        first = await stream.read()
        cards.update([group(count=2, unhealthy=[1])])
        second = await stream.read()
        cards.update([group(count=2)])
        third = await stream.read()
        stream.cancel()
    health = [[d.health for d in m.devices] for m in (first, second, third)]
    assert health == [[HEALTHY, HEALTHY], [HEALTHY, UNHEALTHY], [HEALTHY, HEALTHY]]


async def test_allocate_returns_one_response_per_container_request(
    stub: Any, handler: RecordingHandler
) -> None:
    request = pb.AllocateRequest(
        container_requests=[pb.ContainerAllocateRequest(devices_ids=["a:b:0000", "a:c:0000"])]
    )
    response = await stub.Allocate(request)
    assert len(response.container_responses) == 1
    assert dict(response.container_responses[0].envs) == {"IDS": "a:b:0000,a:c:0000"}
    mount = response.container_responses[0].mounts[0]
    assert (mount.container_path, mount.host_path, mount.read_only) == ("/c", "/h", True)
    assert handler.allocations == [("nvidia.com/gpu", ["a:b:0000", "a:c:0000"])]


async def test_a_refused_allocation_reaches_the_kubelet_as_failed_precondition(stub: Any) -> None:
    request = pb.AllocateRequest(
        container_requests=[pb.ContainerAllocateRequest(devices_ids=["a:held:0000"])]
    )
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.Allocate(request)
    assert caught.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert "held Exclusive by ns/other" in str(caught.value.details())


async def test_preferred_allocation_answers_each_request_with_the_handlers_choice(stub: Any) -> None:
    request = pb.PreferredAllocationRequest(
        container_requests=[
            pb.ContainerPreferredAllocationRequest(
                available_deviceIDs=["x", "y", "z"], must_include_deviceIDs=["y"], allocation_size=2
            )
        ]
    )
    response = await stub.GetPreferredAllocation(request)
    assert [list(r.deviceIDs) for r in response.container_responses] == [["y", "z"]]


async def test_prestart_is_a_no_op_and_stop_removes_the_socket(
    sock_dir: Path, handler: RecordingHandler
) -> None:
    server = ResourceServer(EXCLUSIVE, inventory(), handler, sock_dir)
    async with serving(server) as client:
        assert server.serving
        await client.PreStartContainer(pb.PreStartContainerRequest(devices_ids=["a:b:0000"]))
    assert not server.socket.exists()
    assert not server.serving


async def test_start_replaces_a_stale_socket_file(sock_dir: Path, handler: RecordingHandler) -> None:
    server = ResourceServer(EXCLUSIVE, inventory(), handler, sock_dir)
    server.socket.write_text("stale")
    async with serving(server) as client:
        assert (await client.GetDevicePluginOptions(pb.Empty())).get_preferred_allocation_available


async def test_a_card_held_in_one_mode_is_advertised_unhealthy_under_the_others_until_released(
    sock_dir: Path, handler: RecordingHandler
) -> None:
    cards: Inventory = inventory(group(count=2))
    first_card, second_card = (c.key for c in cards.cards())
    sliced_held = {first_card: SLICED.mode}
    slices = ResourceServer(SLICED, cards, handler, sock_dir)
    async with serving(ResourceServer(EXCLUSIVE, cards, handler, sock_dir)) as whole:
        exclusive = whole.ListAndWatch(pb.Empty())
        await exclusive.read()
        assert cards.set_held(sliced_held)
        assert not cards.set_held(sliced_held)  # unchanged: no resend
        held_whole = await exclusive.read()
        held_sliced = slices.devices()
        cards.set_held({second_card: EXCLUSIVE.mode})
        swapped = await exclusive.read()
        exclusive.cancel()
    assert [d.health for d in held_whole.devices] == [UNHEALTHY, HEALTHY]  # kubelet allocatable 1, not 2
    assert {d.health for d in held_sliced} == {HEALTHY}  # a sliced card keeps its slices
    assert [d.health for d in swapped.devices] == [HEALTHY, HEALTHY]  # the holder's own card stays healthy
    assert {d.health for d in slices.devices()[len(slices.devices()) // 2 :]} == {UNHEALTHY}  # held whole
