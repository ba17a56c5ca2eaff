"""Allocate, mode by mode: what the container gets and what is recorded on its pod (contract §8)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpustack_operator.api.types.devices import DeviceAllocationMode
from gpustack_operator.device_manager.allocator.allocator import Allocator
from gpustack_operator.device_manager.allocator.annotation import ANNOTATION
from gpustack_operator.device_manager.plugin.handler import AllocationRefusedError, ResourceSpec
from gpustack_operator.device_manager.plugin.inventory import Inventory
from tests.unit.device_manager.allocator.builders import (
    EXCLUSIVE,
    H100,
    SHARED,
    SLICED,
    container,
    device_id,
    group,
    pod,
    sliced_limits,
    uuid,
)
from tests.unit.device_manager.allocator.conftest import FakeCluster, make_allocator


def recorded(cluster: FakeCluster, name: str) -> dict[str, Any]:
    stored = next(p for p in cluster.pods if p["metadata"]["name"] == name)
    return dict(json.loads(stored["metadata"]["annotations"][ANNOTATION]))


@pytest.mark.parametrize(
    ("resource", "limits", "ids", "visible", "mode", "units"),
    [
        (EXCLUSIVE, {"nvidia.com/gpu": "1"}, [device_id(1)], uuid(1), 1, [1_600_000]),
        (EXCLUSIVE, {"nvidia.com/gpu": "2"}, [device_id(0), device_id(1)], f"{uuid(0)},{uuid(1)}", 1,
         [1_600_000, 1_600_000]),
        (SHARED, {"nvidia.com/gpu.shared": "1"}, [device_id(0, 480000)], uuid(0), 2, [160_000]),
    ],
    ids=["exclusive-one-card", "exclusive-two-cards", "shared-one-share"],
)  # fmt: skip
async def test_exclusive_and_shared_get_the_visible_devices_env_and_whole_or_share_units(
    allocator: Allocator,
    cluster: FakeCluster,
    resource: ResourceSpec,
    limits: dict[str, str],
    ids: list[str],
    visible: str,
    mode: int,
    units: list[int],
) -> None:
    cluster.add(pod("p", container("main", limits)))
    response = await allocator.allocate(resource, ids)
    assert response.envs == {"NVIDIA_VISIBLE_DEVICES": visible}
    assert response.mounts == []
    entry = recorded(cluster, "p")["main"]
    accelerators = entry["devices"]["groups"][0]["accelerators"]
    assert [(a["mode"], a["allocated"]) for a in accelerators] == [(mode, u) for u in units]
    assert entry["deviceIDs"] == ids


async def test_sliced_annotation_has_the_contract_shape(allocator: Allocator, cluster: FakeCluster) -> None:
    cluster.add(pod("p", container("main", sliced_limits(pct="25"))))
    await allocator.allocate(SLICED, [device_id(1, 5)])
    assert recorded(cluster, "p") == {
        "main": {
            "devices": {
                "groups": [
                    {
                        "id": H100,
                        "manufacturer": "nvidia",
                        "accelerators": [{"id": uuid(1), "index": 1, "mode": 3, "allocated": 400_000}],
                    }
                ]
            },
            "deviceIDs": [device_id(1, 5)],
        }
    }


@pytest.mark.parametrize(
    ("limits", "env", "expected"),
    [
        (sliced_limits(pct="25"), (), {"CUDA_DEVICE_SM_LIMIT": "100", "CUDA_DEVICE_MEMORY_LIMIT_0": "20389m",
                                       "LIBCUDA_LOG_LEVEL": "0"}),
        (sliced_limits(pct="50", cores="30"), (), {"CUDA_DEVICE_SM_LIMIT": "30",
                                                   "CUDA_DEVICE_MEMORY_LIMIT_0": "40779m"}),
        (sliced_limits(pct=None, mib="10000"), (), {"CUDA_DEVICE_MEMORY_LIMIT_0": "10000m"}),
        (sliced_limits(pct="10", mib="500"), (), {"CUDA_DEVICE_MEMORY_LIMIT_0": "8155m"}),
        (sliced_limits(pct="25"), ("LIBCUDA_LOG_LEVEL",), {"LIBCUDA_LOG_LEVEL": None}),
    ],
    ids=["pct-25-cores-default-100", "pct-50-cores-30", "mib", "pct-wins-over-mib",
         "container-sets-log-level"],
)  # fmt: skip
async def test_nvidia_sliced_gets_hami_core_limits(
    allocator: Allocator,
    cluster: FakeCluster,
    limits: dict[str, str],
    env: tuple[str, ...],
    expected: dict[str, str | None],
) -> None:
    cluster.add(pod("p", container("main", limits, env)))
    response = await allocator.allocate(SLICED, [device_id(0, 3)])
    assert response.envs["NVIDIA_VISIBLE_DEVICES"] == uuid(0)
    assert response.envs["CUDA_DEVICE_MEMORY_SHARED_CACHE"] == "/tmp/vgpu/cudevshr.cache"
    for name, value in expected.items():
        assert response.envs.get(name) == value, name


async def test_a_slice_asking_more_mib_than_the_card_has_is_refused_as_the_webhook_refuses_it(
    allocator: Allocator, cluster: FakeCluster
) -> None:
    """One memory fold (rules.cards.slice_units): more VRAM than the card is refused, never capped."""
    cluster.add(pod("p", container("main", sliced_limits(pct=None, mib="90000"))))
    with pytest.raises(AllocationRefusedError, match="memory-mib 90k exceeds the card's 81559Mi"):
        await allocator.allocate(SLICED, [device_id(0, 3)])
    assert cluster.writes == []


async def test_sliced_over_two_cards_limits_each_card_in_visible_order(
    allocator: Allocator, cluster: FakeCluster
) -> None:
    cluster.add(pod("p", container("main", sliced_limits(count=2, pct="25"))))
    response = await allocator.allocate(SLICED, [device_id(1, 0), device_id(0, 9)])
    assert response.envs["NVIDIA_VISIBLE_DEVICES"] == f"{uuid(1)},{uuid(0)}"
    assert (
        response.envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == response.envs["CUDA_DEVICE_MEMORY_LIMIT_1"] == "20389m"
    )


@pytest.mark.parametrize(
    ("runtime", "library"), [("12.4", "cuda-12"), ("11.8", "cuda-11"), ("", "cuda-12")],
    ids=["cuda-12", "cuda-11", "unknown-defaults-to-12"],
)  # fmt: skip
async def test_sliced_mounts_follow_the_contract_with_the_library_of_the_cuda_major(
    cluster: FakeCluster, tmp_path: Path, runtime: str, library: str
) -> None:
    allocator = make_allocator(cluster, tmp_path, Inventory("nvidia", [group(runtime=runtime)]))
    cluster.add(pod("p", container("main", sliced_limits()), uid="uid-p"))
    response = await allocator.allocate(SLICED, [device_id(0)])
    lib = tmp_path / "data/operator/lib/nvidia"
    work = tmp_path / "data/operator/pods/uid-p/c-main/tmp/vgpu"
    assert [(m.container_path, m.host_path, m.read_only) for m in response.mounts] == [
        ("/tmp/vgpulock", str(tmp_path / "lock"), False),
        ("/etc/ld.so.preload", str(lib / "ld.so.preload"), True),
        ("/usr/local/vgpu/libvgpu.so", str(lib / library / "libvgpu.so"), True),
        ("/tmp/vgpu", str(work), False),
        ("/dev/shm", "/dev/shm", False),
    ]
    assert work.is_dir()
    assert (tmp_path / "lock").is_dir()


async def test_sliced_cards_of_different_cuda_majors_are_refused(
    cluster: FakeCluster, tmp_path: Path
) -> None:
    cards = Inventory("nvidia", [group(gid="a100", runtime="11.8"), group(gid="h100", runtime="12.4")])
    allocator = make_allocator(cluster, tmp_path, cards)
    cluster.add(pod("p", container("main", sliced_limits(count=2))))
    with pytest.raises(Exception, match=r"cannot span CUDA majors \[11, 12\]") as caught:
        await allocator.allocate(SLICED, [device_id(0, gid="a100"), device_id(0, gid="h100")])
    assert getattr(caught.value, "status", "") == "FAILED_PRECONDITION"
    assert cluster.writes == []


async def test_a_vendor_without_a_runtime_here_gets_its_cards_by_index_and_slices_as_passthrough(
    cluster: FakeCluster, tmp_path: Path
) -> None:
    iluvatar = Inventory("iluvatar", [group(gid="bi-v100", manufacturer="iluvatar", count=2, max_slices=16)])
    allocator = make_allocator(cluster, tmp_path, iluvatar)
    exclusive = ResourceSpec("iluvatar.com/gpu", "iluvatar", DeviceAllocationMode.EXCLUSIVE)
    sliced = ResourceSpec("iluvatar.com/gpu.sliced", "iluvatar", DeviceAllocationMode.SLICED)
    cluster.add(
        pod("whole", container("main", {"iluvatar.com/gpu": "1"})),
        pod(
            "slice",
            container("main", {"iluvatar.com/gpu.sliced": "1", "iluvatar.com/gpu.sliced.units": "400000"}),
        ),
    )
    whole = await allocator.allocate(exclusive, [device_id(1, gid="bi-v100")])
    part = await allocator.allocate(sliced, [device_id(0, 2, gid="bi-v100")])
    assert whole.envs == {"IX_VISIBLE_DEVICES": "1"}
    assert part.envs == {"IX_VISIBLE_DEVICES": "0"}
    assert (part.mounts, part.devices) == ([], [])


async def test_sidecar_visibility_mirrors_the_main_containers_cards_and_records_nothing(
    allocator: Allocator, cluster: FakeCluster
) -> None:
    visibility = ResourceSpec(
        "device.gpustack.ai/nvidia.visibility", "nvidia", DeviceAllocationMode.VISIBILITY
    )
    cluster.add(
        pod(
            "ssh",
            container("main", {"nvidia.com/gpu": "2"}),
            container("sshd", {"device.gpustack.ai/nvidia.visibility": "2"}),
        )
    )
    await allocator.allocate(EXCLUSIVE, [device_id(1), device_id(0)])
    before = recorded(cluster, "ssh")
    response = await allocator.allocate(visibility, [device_id(0, 17), device_id(0, 300)])
    assert response.envs == {"NVIDIA_VISIBLE_DEVICES": f"{uuid(1)},{uuid(0)}"}
    assert recorded(cluster, "ssh") == before
    assert len(cluster.writes) == 1
