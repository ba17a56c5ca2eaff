"""Per-vendor Allocate responses over real gRPC, the cards coming from the simulated backend (contract §8).

A node with two cards each of AMD, Cambricon, MetaX, Hygon and Ascend is detected from an inventory file,
grouped as `serve` groups it, and served by one resource server per resource over a unix socket; the test
plays the kubelet: it reads the IDs ListAndWatch advertises and calls Allocate with those of one card.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml

from gpustack_operator.api.types.devices import DeviceAllocationMode
from gpustack_operator.device_manager.allocator.allocator import Allocator
from gpustack_operator.device_manager.allocator.responses.ascend import read_ids
from gpustack_operator.device_manager.grouping import group_cards
from gpustack_operator.device_manager.plugin import ids
from gpustack_operator.device_manager.plugin.api import pb, rpc
from gpustack_operator.device_manager.plugin.handler import ResourceSpec
from gpustack_operator.device_manager.plugin.inventory import Inventory
from gpustack_operator.device_manager.plugin.server import ResourceServer
from gpustack_operator.device_manager.simulated import SimulatedBackend
from gpustack_operator.rules.naming.resources import ResourceKind, acceleratable_resource_name
from gpustack_operator.runtime import FakeClock
from tests.unit.device_manager.allocator.builders import container, device_id, group, pod
from tests.unit.device_manager.allocator.conftest import FakeCluster, make_allocator

NODE = "mixed-0"
INVENTORY = {
    "nodes": [
        {
            "name": NODE,
            "gpus": [
                {"manufacturer": "amd", "product": "AMD Instinct MI300X", "count": 2, "memoryMiB": 196608},
                {"manufacturer": "cambricon", "product": "MLU370-X8", "count": 2, "memoryMiB": 49152},
                {"manufacturer": "metax", "product": "MetaX C500", "count": 2, "memoryMiB": 65536},
                {"manufacturer": "hygon", "product": "K100_AI", "count": 2, "memoryMiB": 65536},
                {"manufacturer": "ascend", "product": "Ascend910B2", "count": 2, "memoryMiB": 65536,
                 "family": "910B", "runtimeVersion": "8.0.RC3"},
            ],
        }
    ]
}  # fmt: skip
EXCLUSIVE, SLICED = DeviceAllocationMode.EXCLUSIVE, DeviceAllocationMode.SLICED
KIND = {EXCLUSIVE: ResourceKind.EXCLUSIVE, SLICED: ResourceKind.SLICED}


@pytest.fixture
def inventories(tmp_path: Path) -> dict[str, Inventory]:
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump(INVENTORY))
    groups = group_cards(SimulatedBackend(path, NODE).detect())
    return {mfr: Inventory(mfr, groups) for mfr in ("amd", "cambricon", "metax", "hygon", "ascend")}


@pytest.fixture
def allocator(cluster: FakeCluster, tmp_path: Path, inventories: dict[str, Inventory]) -> Allocator:
    return make_allocator(cluster, tmp_path, *inventories.values())


def resource(manufacturer: str, mode: DeviceAllocationMode) -> ResourceSpec:
    name = acceleratable_resource_name(manufacturer, KIND[mode])
    assert name is not None
    return ResourceSpec(name, manufacturer, mode)


class Kubelet:
    """The kubelet's side of one resource server: the advertised IDs, and Allocate."""

    def __init__(self, stub: Any, inventory: Inventory) -> None:
        self.stub, self.inventory = stub, inventory

    async def ids_of(self, *indexes: int) -> list[str]:
        """One advertised ID on each card of these indexes (a token other than the first, for slices)."""
        stream = self.stub.ListAndWatch(pb.Empty())
        advertised = [device.ID for device in (await stream.read()).devices]
        stream.cancel()
        uuids = {card.index: card.uuid for card in self.inventory.cards()}
        return [[i for i in advertised if ids.parse_id(i).uuid == uuids[index]][-1] for index in indexes]

    async def allocate(self, device_ids: list[str]) -> Any:
        request = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=device_ids)])
        response = await self.stub.Allocate(request, timeout=10)
        return response.container_responses[0]


@contextlib.asynccontextmanager
async def kubelet_of(
    allocator: Allocator, spec: ResourceSpec, inventory: Inventory, directory: Path
) -> AsyncIterator[Kubelet]:
    server = ResourceServer(spec, inventory, allocator, directory)
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"unix://{server.socket}") as channel:
            yield Kubelet(rpc.DevicePluginStub(channel), inventory)
    finally:
        await server.stop()


def nodes(response: Any) -> list[tuple[str, str, str]]:
    return [(d.container_path, d.host_path, d.permissions) for d in response.devices]


def dri(index: int) -> list[str]:
    return [f"/dev/dri/card{index}", f"/dev/dri/renderD{128 + index}"]


DEVICE_NODES = {
    "amd": ("AMD_VISIBLE_DEVICES", ["/dev/kfd"], dri),
    "hygon": ("HYGON_VISIBLE_DEVICES", ["/dev/kfd"], dri),
    "metax": ("METAX_VISIBLE_DEVICES", ["/dev/mxcd"], dri),
    "cambricon": ("CAMBRICON_VISIBLE_DEVICES", ["/dev/cambricon_ctl"], lambda i: [f"/dev/cambricon_dev{i}"]),
}


@pytest.mark.parametrize(
    ("manufacturer", "mode", "cards"),
    [("amd", EXCLUSIVE, [1]), ("amd", EXCLUSIVE, [0, 1]), ("hygon", EXCLUSIVE, [1]), ("hygon", SLICED, [0]),
     ("metax", EXCLUSIVE, [1, 0]), ("metax", SLICED, [1]), ("cambricon", EXCLUSIVE, [0, 1]),
     ("cambricon", SLICED, [1])],
    ids=["amd-one-card", "amd-two-cards", "hygon-one-card", "hygon-slice-as-passthrough", "metax-two-cards",
         "metax-slice-as-passthrough", "cambricon-two-cards", "cambricon-slice-as-passthrough"],
)  # fmt: skip
async def test_device_node_vendors_get_their_control_node_once_and_each_cards_nodes(
    allocator: Allocator,
    cluster: FakeCluster,
    inventories: dict[str, Inventory],
    sock_dir: Path,
    manufacturer: str,
    mode: DeviceAllocationMode,
    cards: list[int],
) -> None:
    spec = resource(manufacturer, mode)
    limits = {spec.name: str(len(cards))}
    if mode is SLICED:
        limits[f"{spec.name}.memory-percentage"] = "50"
    cluster.add(pod("p", container("main", limits)))
    async with kubelet_of(allocator, spec, inventories[manufacturer], sock_dir) as kubelet:
        response = await kubelet.allocate(await kubelet.ids_of(*cards))
    env, shared, per_card = DEVICE_NODES[manufacturer]
    assert dict(response.envs) == {env: ",".join(map(str, cards))}
    expected = [*shared, *(node for index in cards for node in per_card(index))]
    assert nodes(response) == [(path, path, "rw") for path in expected]
    assert list(response.mounts) == []


async def test_drm_nodes_carry_the_drm_minor_detection_read_from_sysfs(
    cluster: FakeCluster, tmp_path: Path
) -> None:
    amd = group(gid="mi300x", manufacturer="amd", count=2, max_slices=0)
    for accelerator, minor in zip(amd["accelerators"], (3, 5), strict=True):
        accelerator["physicalIndexes"] = [minor]  # a display adapter took /dev/dri/card0..2
    allocator = make_allocator(cluster, tmp_path, Inventory("amd", [amd]))
    cluster.add(pod("p", container("main", {"amd.com/gpu": "1"})))
    response = await allocator.allocate(resource("amd", EXCLUSIVE), [device_id(1, gid="mi300x")])
    assert response.envs == {"AMD_VISIBLE_DEVICES": "1"}
    assert [node.host_path for node in response.devices] == [
        "/dev/kfd",
        "/dev/dri/card5",
        "/dev/dri/renderD133",
    ]


async def test_ascend_exclusive_is_the_visible_devices_env_alone(
    allocator: Allocator,
    cluster: FakeCluster,
    inventories: dict[str, Inventory],
    sock_dir: Path,
) -> None:
    cluster.add(pod("p", container("main", {"huawei.com/npu": "1"})))
    async with kubelet_of(
        allocator, resource("ascend", EXCLUSIVE), inventories["ascend"], sock_dir
    ) as kubelet:
        response = await kubelet.allocate(await kubelet.ids_of(1))
    assert (dict(response.envs), nodes(response), list(response.mounts)) == (
        {"ASCEND_VISIBLE_DEVICES": "1"},
        [],
        [],
    )


async def test_ascend_names_an_npu_by_its_dcmi_physical_id_not_its_logic_id_in_every_mode(
    cluster: FakeCluster, tmp_path: Path
) -> None:
    """DCMI numbers NPUs twice: the logic ID (our index) and the physical ID, the N of `/dev/davinciN`
    (`physicalIndexes`). The Ascend docker runtime mounts `/dev/davinci<N>` for each N of
    ASCEND_VISIBLE_DEVICES and vcann-rt opens the NPU its `physical-npu-id` names, so both must carry the
    physical ID: on a host where NPUs 0 and 1 dropped out of the logic numbering, logic 1 is physical 3,
    and logic ID 1 would hand the container another NPU (or none)."""
    npus = group(gid="910b2", manufacturer="ascend", count=2, memory=65536, runtime="8.0.RC3", max_slices=63)
    for accelerator, physical in zip(npus["accelerators"], (2, 3), strict=True):
        accelerator["physicalIndexes"] = [physical]
    allocator = make_allocator(cluster, tmp_path, Inventory("ascend", [npus]))
    visibility = ResourceSpec(
        "device.gpustack.ai/ascend.visibility", "ascend", DeviceAllocationMode.VISIBILITY
    )
    cluster.add(
        pod("whole", container("main", {"huawei.com/npu": "1"}), minute=1),
        pod(
            "ssh",
            npu_slice(cores="40", pct="50"),
            container("sshd", {"device.gpustack.ai/ascend.visibility": "1"}),
            uid="uid-ssh",
            minute=2,
        ),
    )
    whole = await allocator.allocate(resource("ascend", EXCLUSIVE), [device_id(0, gid="910b2")])
    sliced = await allocator.allocate(resource("ascend", SLICED), [device_id(1, 5, gid="910b2")])
    sidecar = await allocator.allocate(visibility, [device_id(1, 7, gid="910b2")])
    assert whole.envs == {"ASCEND_VISIBLE_DEVICES": "2"}
    assert sliced.envs["ASCEND_VISIBLE_DEVICES"] == sidecar.envs["ASCEND_VISIBLE_DEVICES"] == "3"
    config = config_of(tmp_path, "uid-ssh")
    assert (config["physical-npu-id"], config["aicore-quota"], config["memory-quota"]) == ("3", "40", "32768")


def npu_slice(cores: str = "30", pct: str = "25", env: tuple[str, ...] = ()) -> dict[str, Any]:
    limits = {
        "huawei.com/npu.sliced": "1",
        "huawei.com/npu.sliced.memory-percentage": pct,
        "huawei.com/npu.sliced.units": str(int(pct) * 16000),
        "huawei.com/npu.sliced.cores-percentage": cores,
    }
    return container("main", limits, env)


def config_of(tmp_path: Path, uid: str) -> dict[str, str]:
    path = tmp_path / f"data/operator/pods/{uid}/c-main/etc/enpu/vcann-rt/npu_info.config"
    return dict(line.split("=", 1) for line in path.read_text().splitlines())


async def test_an_ascend_slice_gets_vcann_rt_with_its_quota_in_npu_info_config(
    allocator: Allocator,
    cluster: FakeCluster,
    inventories: dict[str, Inventory],
    sock_dir: Path,
    tmp_path: Path,
) -> None:
    cluster.add(pod("p", npu_slice(cores="30", pct="25"), uid="uid-p"))
    async with kubelet_of(allocator, resource("ascend", SLICED), inventories["ascend"], sock_dir) as kubelet:
        response = await kubelet.allocate(await kubelet.ids_of(1))
    card = next(c for c in inventories["ascend"].cards() if c.index == 1)
    lib = tmp_path / "data/operator/lib/ascend"
    config = tmp_path / "data/operator/pods/uid-p/c-main/etc/enpu/vcann-rt/npu_info.config"
    assert dict(response.envs) == {"ASCEND_VISIBLE_DEVICES": "1", "ENPU_LOG_LEVEL": "1"}
    assert [(m.container_path, m.host_path, m.read_only) for m in response.mounts] == [
        ("/etc/ld.so.preload", str(lib / "ld.so.preload"), True),
        ("/opt/enpu/vcann-rt/lib/libvruntime.so", str(lib / "cann-8-910b/lib/libvruntime.so"), True),
        ("/etc/enpu/vcann-rt/npu_info.config", str(config), True),
        ("/dev/shm", "/dev/shm", False),
    ]
    assert config_of(tmp_path, "uid-p") == {
        "physical-npu-id": "1",
        "virtual-npu-id": "0",
        "aicore-quota": "30",
        "memory-quota": str(65536 // 4),
        "shm-id": card.uuid,
        "scheduling-policy": "2",
    }


async def test_ascend_slices_of_one_npu_get_distinct_virtual_ids_and_a_gone_pods_id_is_reused(
    allocator: Allocator,
    cluster: FakeCluster,
    inventories: dict[str, Inventory],
    sock_dir: Path,
    tmp_path: Path,
) -> None:
    cluster.add(
        pod("a", npu_slice(), uid="uid-a", minute=1),
        pod("b", npu_slice(), uid="uid-b", minute=2),
        pod("other-npu", npu_slice(), uid="uid-o", minute=3),
        pod("c", npu_slice(), uid="uid-c", minute=4),
    )
    async with kubelet_of(allocator, resource("ascend", SLICED), inventories["ascend"], sock_dir) as kubelet:
        for index in (0, 0, 1):
            await kubelet.allocate(await kubelet.ids_of(index))
        gone = cluster.pods.pop(0)
        allocator.release(gone)
        await allocator.collect(cluster.pods)
        await kubelet.allocate(await kubelet.ids_of(0))
    virtual = {uid: config_of(tmp_path, uid)["virtual-npu-id"] for uid in ("uid-b", "uid-o", "uid-c")}
    assert virtual == {"uid-b": "1", "uid-o": "0", "uid-c": "0"}
    assert read_ids(tmp_path / "data/operator/pods/uid-a/c-main/etc/enpu/vcann-rt/npu_info.config") is None


async def test_an_ascend_slice_keeps_the_log_level_the_container_sets(
    allocator: Allocator,
    cluster: FakeCluster,
    inventories: dict[str, Inventory],
    sock_dir: Path,
) -> None:
    cluster.add(pod("p", npu_slice(env=("ENPU_LOG_LEVEL",))))
    async with kubelet_of(allocator, resource("ascend", SLICED), inventories["ascend"], sock_dir) as kubelet:
        response = await kubelet.allocate(await kubelet.ids_of(0))
    assert "ENPU_LOG_LEVEL" not in response.envs


async def test_an_ascend_slice_over_two_npus_is_refused_with_failed_precondition(
    allocator: Allocator,
    cluster: FakeCluster,
    inventories: dict[str, Inventory],
    sock_dir: Path,
) -> None:
    slice_two = npu_slice()
    slice_two["resources"]["limits"]["huawei.com/npu.sliced"] = "2"
    cluster.add(pod("p", slice_two))
    async with kubelet_of(allocator, resource("ascend", SLICED), inventories["ascend"], sock_dir) as kubelet:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await kubelet.allocate(await kubelet.ids_of(0, 1))
    assert caught.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert "takes one NPU" in str(caught.value.details())
    assert cluster.writes == []


async def test_a_confirmed_conflict_reaches_the_kubelet_as_failed_precondition_at_once(
    cluster: FakeCluster,
    inventories: dict[str, Inventory],
    sock_dir: Path,
    tmp_path: Path,
) -> None:
    clock = FakeClock()  # never advanced: a retry would outlast the kubelet's deadline
    allocator = make_allocator(
        cluster, tmp_path, *inventories.values(), retries=5, retry_interval=3.0, clock=clock
    )
    cambricon = inventories["cambricon"]
    sliced = {"cambricon.com/mlu.sliced": "1", "cambricon.com/mlu.sliced.memory-percentage": "50"}
    cluster.add(pod("holder", container("main", {"cambricon.com/mlu": "1"})))
    async with kubelet_of(allocator, resource("cambricon", EXCLUSIVE), cambricon, sock_dir) as kubelet:
        await kubelet.allocate(await kubelet.ids_of(0))
    cluster.pods[0]["status"]["phase"] = "Running"
    cluster.add(pod("new", container("main", sliced), minute=5))
    cluster.kubelet_lists = [("ns", "holder"), ("ns", "new")]
    async with kubelet_of(allocator, resource("cambricon", SLICED), cambricon, sock_dir) as kubelet:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await kubelet.allocate(await kubelet.ids_of(0))
    assert caught.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert "held Exclusive by ns/holder" in str(caught.value.details())
    assert (clock.now(), [name for name, _ in cluster.writes]) == (0.0, ["holder"])
