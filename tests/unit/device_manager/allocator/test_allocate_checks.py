"""Allocate's checks: cross-mode refusals, bad IDs, finished pods, reservations and failed records."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from pathlib import Path

import pytest

from gpustack_operator.api.types.devices import DeviceAllocationMode
from gpustack_operator.device_manager.allocator.allocator import Allocator
from gpustack_operator.device_manager.allocator.annotation import AllocatedCard, ContainerAllocation
from gpustack_operator.device_manager.allocator.workdirs import HostPaths, WorkDirs
from gpustack_operator.device_manager.plugin.handler import (
    AllocateError,
    AllocationRefusedError,
    PodNotFoundError,
)
from gpustack_operator.device_manager.plugin.ids import format_id
from gpustack_operator.device_manager.plugin.inventory import Inventory
from gpustack_operator.kube import errors
from gpustack_operator.runtime import FakeClock
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

MODES = {
    "Exclusive": (DeviceAllocationMode.EXCLUSIVE, 1_600_000),
    "Shared": (DeviceAllocationMode.SHARED, 160_000),
    "Sliced": (DeviceAllocationMode.SLICED, 400_000),
}
REQUESTS = {
    EXCLUSIVE.name: (EXCLUSIVE, {"nvidia.com/gpu": "1"}, device_id(0)),
    SHARED.name: (SHARED, {"nvidia.com/gpu.shared": "1"}, device_id(0, 160000)),
    SLICED.name: (SLICED, sliced_limits(), device_id(0, 1)),
}


def holder(mode: str, *, phase: str = "Running") -> dict[str, object]:
    """A pod that already holds card 0 in `mode`."""
    held, units = MODES[mode]
    allocation = ContainerAllocation(held, (AllocatedCard(H100, "nvidia", uuid(0), 0, units),), ("x",))
    return pod("holder", container(), phase=phase, allocations={"main": allocation})


@pytest.mark.parametrize(
    ("held", "requested"),
    [("Sliced", EXCLUSIVE.name), ("Shared", EXCLUSIVE.name), ("Exclusive", SLICED.name),
     ("Shared", SLICED.name), ("Sliced", SHARED.name), ("Exclusive", SHARED.name)],
    ids=["exclusive-on-sliced", "exclusive-on-shared", "sliced-on-exclusive", "sliced-on-shared",
         "shared-on-sliced", "shared-on-exclusive"],
)  # fmt: skip
async def test_a_card_held_in_another_mode_is_refused_with_failed_precondition(
    allocator: Allocator, cluster: FakeCluster, held: str, requested: str
) -> None:
    resource, limits, device = REQUESTS[requested]
    cluster.add(holder(held), pod("new", container("main", limits), minute=5))
    with pytest.raises(AllocationRefusedError) as caught:
        await allocator.allocate(resource, [device])
    assert caught.value.status == "FAILED_PRECONDITION"
    assert f"card {uuid(0)} is held {held} by ns/holder" in str(caught.value)
    assert "ns/new" in str(caught.value)
    assert cluster.writes == []


async def test_a_card_held_whole_under_its_old_group_id_is_refused_to_a_slice_under_the_new_one(
    cluster: FakeCluster, tmp_path: Path
) -> None:
    renamed = f"{H100}-80g"  # GPUSTACK_DEVICES_GROUP_ID_WITH_MEMORY turned on under the running holder
    allocator = make_allocator(cluster, tmp_path, Inventory("nvidia", [{**group(), "id": renamed}]))
    cluster.add(holder("Exclusive"), pod("new", container("main", sliced_limits()), minute=5))
    slices = [format_id(renamed, uuid(card), 1) for card in (0, 1)]
    assert allocator.preferred(SLICED, slices, [], 1) == [slices[1]], "the kubelet is steered off card 0"
    with pytest.raises(AllocationRefusedError) as caught:
        await allocator.allocate(SLICED, [slices[0]])
    assert caught.value.status == "FAILED_PRECONDITION"
    assert f"card {uuid(0)} is held Exclusive by ns/holder" in str(caught.value)
    assert cluster.writes == []


@pytest.mark.parametrize("mode", ["Sliced", "Shared"], ids=["more-slices", "more-shares"])
async def test_the_same_mode_stacks_on_a_card(allocator: Allocator, cluster: FakeCluster, mode: str) -> None:
    resource, limits, device = REQUESTS[SLICED.name if mode == "Sliced" else SHARED.name]
    cluster.add(holder(mode), pod("new", container("main", limits), minute=5))
    await allocator.allocate(resource, [device])
    assert [name for name, _ in cluster.writes] == ["new"]


async def test_a_finished_pod_holds_nothing(allocator: Allocator, cluster: FakeCluster) -> None:
    cluster.add(
        holder("Exclusive", phase="Succeeded"), pod("new", container("main", sliced_limits()), minute=5)
    )
    response = await allocator.allocate(SLICED, [device_id(0, 1)])
    assert response.envs["NVIDIA_VISIBLE_DEVICES"] == uuid(0)
    assert [name for name, _ in cluster.writes] == ["new"]


@pytest.mark.parametrize(
    ("ids", "message"),
    [([device_id(0, 1)], "unknown device"), (["garbage"], "unknown device"),
     ([device_id(7)], "unknown device"), ([], "no devices")],
    ids=["not-in-this-modes-pool", "not-an-id", "card-not-on-this-node", "nothing"],
)  # fmt: skip
async def test_ids_this_plugin_never_advertised_are_refused(
    allocator: Allocator, cluster: FakeCluster, ids: list[str], message: str
) -> None:
    cluster.add(pod("p", container("main", {"nvidia.com/gpu": "1"})))
    with pytest.raises(AllocationRefusedError, match=message):
        await allocator.allocate(EXCLUSIVE, ids)


async def test_a_token_of_an_unhealthy_card_is_refused(cluster: FakeCluster, tmp_path: Path) -> None:
    allocator = make_allocator(cluster, tmp_path, Inventory("nvidia", [group(unhealthy=[0])]))
    cluster.add(pod("p", container("main", {"nvidia.com/gpu": "1"})))
    with pytest.raises(AllocationRefusedError, match="unhealthy"):
        await allocator.allocate(EXCLUSIVE, [device_id(0)])


async def test_a_reservation_guards_the_card_until_the_annotation_reaches_the_cache(
    allocator: Allocator, cluster: FakeCluster
) -> None:
    cluster.lag = True
    cluster.add(
        pod("first", container("main", {"nvidia.com/gpu": "1"})),
        pod("second", container("main", sliced_limits()), minute=1),
    )
    await allocator.allocate(EXCLUSIVE, [device_id(0)])
    with pytest.raises(AllocationRefusedError, match="held Exclusive by ns/first"):
        await allocator.allocate(SLICED, [device_id(0, 4)])


async def test_no_matching_pending_pod_fails_after_the_retries(
    allocator: Allocator, cluster: FakeCluster
) -> None:
    cluster.add(
        pod("running", container("main", {"nvidia.com/gpu": "1"}), phase="Running"),
        pod("two", container("main", {"nvidia.com/gpu": "2"})),
        pod("leaving", container("main", {"nvidia.com/gpu": "1"}), deleting=True),
    )
    with pytest.raises(
        PodNotFoundError, match=r"no pending pod on node node-a .* nvidia\.com/gpu limit is 1"
    ):
        await allocator.allocate(EXCLUSIVE, [device_id(0)])


async def test_a_failed_record_fails_allocate_and_frees_the_reservation(
    allocator: Allocator, cluster: FakeCluster
) -> None:
    cluster.add(pod("p", container("main", {"nvidia.com/gpu": "1"})))
    cluster.fail_writes = True
    with pytest.raises(AllocateError, match="cannot record the allocation of pod ns/p"):
        await allocator.allocate(EXCLUSIVE, [device_id(0)])
    assert len(allocator.reservations) == 0
    cluster.fail_writes = False
    await allocator.allocate(EXCLUSIVE, [device_id(0)])
    assert [name for name, _ in cluster.writes] == ["p"]


async def test_gone_pods_lose_reservations_and_work_dirs(allocator: Allocator, cluster: FakeCluster) -> None:
    cluster.add(pod("p", container("main", sliced_limits()), uid="uid-gone"))
    await allocator.allocate(SLICED, [device_id(0, 1)])
    work = allocator.config.paths.pods_dir / "uid-gone"
    assert work.is_dir()
    assert await allocator.collect([]) == [], "a pod being allocated keeps its work dir"
    allocator.release(cluster.pods[0])
    assert len(allocator.reservations) == 0
    assert await allocator.collect([]) == ["uid-gone"]
    assert not work.exists()


class ThreadNotingWorkDirs(WorkDirs):
    """Real work directories that note which thread touched the filesystem."""

    def __init__(self, paths: HostPaths) -> None:
        super().__init__(paths)
        self.calls: list[tuple[str, str]] = []
        """(what, thread name)."""

    def prepare(self, pod_uid: str, container: str, sub: str) -> Path:
        self.calls.append(("prepare", threading.current_thread().name))
        return super().prepare(pod_uid, container, sub)

    def remove(self, uids: Iterable[str]) -> list[str]:
        self.calls.append(("remove", threading.current_thread().name))
        return super().remove(uids)


async def test_a_gone_pods_work_dir_is_removed_off_the_event_loop(
    allocator: Allocator, cluster: FakeCluster
) -> None:
    dirs = allocator.workdirs = ThreadNotingWorkDirs(allocator.config.paths)
    cluster.add(pod("p", container("main", sliced_limits()), uid="uid-p"))
    await allocator.allocate(SLICED, [device_id(0, 1)])
    allocator.release(cluster.pods[0])
    assert await allocator.collect([]) == ["uid-p"]
    loop_thread = threading.current_thread().name
    assert [(what, thread == loop_thread) for what, thread in dirs.calls] == [
        ("prepare", True),
        ("remove", False),
    ]


async def test_a_conflict_only_the_stale_cache_shows_is_checked_against_the_api_server(
    allocator: Allocator, cluster: FakeCluster
) -> None:
    finished = holder("Exclusive")
    cluster.cache = [finished, pod("new", container("main", sliced_limits()), minute=5)]
    cluster.add(holder("Exclusive", phase="Succeeded"), cluster.cache[1])
    await allocator.allocate(SLICED, [device_id(0, 1)])
    assert [name for name, _ in cluster.writes] == ["new"]


async def test_a_confirmed_conflict_is_refused_at_once_without_waiting_out_the_retries(
    cluster: FakeCluster, tmp_path: Path
) -> None:
    clock = FakeClock()  # never advanced: a retry would wait forever
    allocator = make_allocator(cluster, tmp_path, retries=5, retry_interval=3.0, clock=clock)
    cluster.add(holder("Exclusive"), pod("new", container("main", sliced_limits()), minute=5))
    cluster.kubelet_lists = [("ns", "holder"), ("ns", "new")]  # the kubelet still runs the holder
    with pytest.raises(AllocationRefusedError, match="held Exclusive by ns/holder") as caught:
        await asyncio.wait_for(allocator.allocate(SLICED, [device_id(0, 1)]), 5.0)
    assert caught.value.status == "FAILED_PRECONDITION"
    assert (cluster.lists, clock.now(), cluster.writes) == (1, 0.0, [])


async def test_a_conflict_is_retried_until_the_kubelet_freed_holder_shows_finished(
    cluster: FakeCluster, tmp_path: Path
) -> None:
    allocator = make_allocator(cluster, tmp_path, retries=3)
    cluster.add(holder("Exclusive"), pod("new", container("main", sliced_limits()), minute=5))
    cluster.kubelet_lists = [("ns", "new")]  # the kubelet no longer runs the holder

    def finish_on_third_list(lists: int) -> None:
        if lists == 3:
            cluster.pods[0]["status"]["phase"] = "Succeeded"

    cluster.on_fresh = finish_on_third_list
    await allocator.allocate(SLICED, [device_id(0, 1)])
    assert [name for name, _ in cluster.writes] == ["new"]
    assert cluster.lists == 3


async def test_a_conflict_the_api_server_keeps_showing_is_refused_once_the_retries_are_spent(
    cluster: FakeCluster, tmp_path: Path
) -> None:
    allocator = make_allocator(cluster, tmp_path, retries=2)
    cluster.add(holder("Exclusive"), pod("new", container("main", sliced_limits()), minute=5))
    cluster.kubelet_lists = [("ns", "new")]  # the kubelet freed the holder; its status never comes
    with pytest.raises(AllocationRefusedError, match="held Exclusive by ns/holder") as caught:
        await allocator.allocate(SLICED, [device_id(0, 1)])
    assert caught.value.status == "FAILED_PRECONDITION"
    assert cluster.lists == 3
    assert cluster.writes == []


async def test_an_api_server_that_cannot_list_pods_fails_allocate_with_a_logged_error(
    allocator: Allocator, cluster: FakeCluster, caplog: pytest.LogCaptureFixture
) -> None:
    cluster.fail_lists = True  # the cache shows no matching pod, so the API server is asked
    with pytest.raises(AllocateError, match=r"listing pods on node node-a: .*apiserver down") as caught:
        await allocator.allocate(EXCLUSIVE, [device_id(0)])
    assert caught.value.status == "INTERNAL"
    assert isinstance(caught.value.__cause__, errors.KubeError)
    assert "node=node-a listing pods failed" in caplog.text


async def test_a_sliced_request_whose_tokens_share_a_card_is_refused_naming_the_card(
    allocator: Allocator, cluster: FakeCluster
) -> None:
    cluster.add(pod("p", container("main", sliced_limits(count=2))))
    with pytest.raises(AllocationRefusedError, match=rf"2 slices .* on 1 card.*{uuid(0)}") as caught:
        await allocator.allocate(SLICED, [device_id(0, 1), device_id(0, 2)])
    assert caught.value.status == "FAILED_PRECONDITION"
    assert cluster.writes == []


async def test_a_reservation_whose_pod_never_reaches_the_cache_expires_after_one_retry_window(
    cluster: FakeCluster, tmp_path: Path
) -> None:
    clock = FakeClock()
    allocator = make_allocator(cluster, tmp_path, retries=1, retry_interval=0.01, clock=clock)
    cluster.cache = []  # the informer never shows the pod: it is deleted before the cache catches up
    cluster.add(pod("ghost", container("main", {"nvidia.com/gpu": "1"}), uid="uid-ghost"))
    await allocator.allocate(EXCLUSIVE, [device_id(0)])
    cluster.pods.clear()
    cluster.add(pod("next", container("main", sliced_limits()), minute=5))
    for step in (0.0, 0.01):  # absent, but not for longer than one retry window yet
        clock.advance(step)
        await allocator.collect(cluster.cached())
        assert allocator.reservations.get("uid-ghost") is not None
    with pytest.raises(AllocationRefusedError, match="held Exclusive by ns/ghost"):
        await allocator.allocate(SLICED, [device_id(0, 1)])
    clock.advance(0.02)
    await allocator.collect(cluster.cached())
    assert allocator.reservations.get("uid-ghost") is None
    await allocator.allocate(SLICED, [device_id(0, 1)])
    assert [name for name, _ in cluster.writes] == ["ghost", "next"]


async def test_a_reservation_whose_pod_is_cached_never_expires(cluster: FakeCluster, tmp_path: Path) -> None:
    clock = FakeClock()
    allocator = make_allocator(cluster, tmp_path, retries=1, retry_interval=0.01, clock=clock)
    cluster.lag = True  # the annotation never reaches the cache, the pod does
    cluster.add(pod("p", container("main", {"nvidia.com/gpu": "1"}), uid="uid-p"))
    await allocator.allocate(EXCLUSIVE, [device_id(0)])
    for step in (0.0, 1.0, 99.0):
        clock.advance(step)
        await allocator.collect(cluster.cached())
    assert allocator.reservations.get("uid-p") is not None
