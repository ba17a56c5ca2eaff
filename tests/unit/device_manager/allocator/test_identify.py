"""Which pod an Allocate is for: oldest pending match, in tiers; one-to-one under concurrency."""

from __future__ import annotations

import asyncio
import json

from gpustack_operator.api.types.devices import DeviceAllocationMode
from gpustack_operator.device_manager.allocator.allocator import Allocator
from gpustack_operator.device_manager.allocator.annotation import (
    ANNOTATION,
    AllocatedCard,
    ContainerAllocation,
)
from tests.unit.device_manager.allocator.builders import (
    EXCLUSIVE,
    H100,
    SHARED,
    SLICED,
    container,
    device_id,
    pod,
    sliced_limits,
    uuid,
)
from tests.unit.device_manager.allocator.conftest import FakeCluster


def owners(cluster: FakeCluster) -> dict[str, list[str]]:
    """Pod name -> recorded container names."""
    return {
        p["metadata"]["name"]: sorted(json.loads(p["metadata"]["annotations"][ANNOTATION]))
        for p in cluster.pods
        if ANNOTATION in p["metadata"]["annotations"]
    }


async def test_the_oldest_pending_pod_whose_limit_matches_wins(
    allocator: Allocator, cluster: FakeCluster
) -> None:
    cluster.add(
        pod("newer", container("main", {"nvidia.com/gpu": "1"}), minute=9),
        pod("older", container("main", {"nvidia.com/gpu": "1"}), minute=1),
        pod("oldest-but-running", container("main", {"nvidia.com/gpu": "1"}), phase="Running"),
        pod("oldest-but-asks-two", container("main", {"nvidia.com/gpu": "2"})),
    )
    await allocator.allocate(EXCLUSIVE, [device_id(0)])
    assert owners(cluster) == {"older": ["main"]}


async def test_a_pod_the_cards_fit_beats_an_older_one_they_do_not(
    allocator: Allocator, cluster: FakeCluster
) -> None:
    nearly_full = ContainerAllocation(
        DeviceAllocationMode.SLICED, (AllocatedCard(H100, "nvidia", uuid(0), 0, 1_440_000),), ("x",)
    )
    cluster.add(
        pod("tenant", container(), phase="Running", allocations={"main": nearly_full}),
        pod("wants-25pct", container("main", sliced_limits(pct="25")), minute=1),
        pod("wants-10pct", container("main", sliced_limits(pct="10")), minute=2),
    )
    await allocator.allocate(SLICED, [device_id(0, 7)])
    assert "wants-10pct" in owners(cluster)
    assert "wants-25pct" not in owners(cluster)


async def test_a_pod_that_already_holds_cards_comes_last_and_then_its_next_container(
    allocator: Allocator, cluster: FakeCluster
) -> None:
    two_mains = pod(
        "claimed",
        container("a", {"nvidia.com/gpu": "1"}),
        container("b", {"nvidia.com/gpu": "1"}),
        minute=0,
    )
    cluster.add(two_mains, pod("fresh", container("main", {"nvidia.com/gpu": "1"}), minute=5))
    await allocator.allocate(EXCLUSIVE, [device_id(0)])
    await allocator.allocate(EXCLUSIVE, [device_id(1)])
    assert owners(cluster) == {"claimed": ["a"], "fresh": ["main"]}
    cluster.pods.pop()  # fresh is gone; now only the claimed pod matches
    await allocator.allocate(EXCLUSIVE, [device_id(1)])
    assert owners(cluster)["claimed"] == ["a", "b"]


async def test_init_containers_are_matched_before_app_containers(
    allocator: Allocator, cluster: FakeCluster
) -> None:
    cluster.add(
        pod(
            "p",
            container("app", {"nvidia.com/gpu": "1"}),
            init=[container("setup", {"nvidia.com/gpu": "1"})],
        )
    )
    await allocator.allocate(EXCLUSIVE, [device_id(0)])
    assert owners(cluster) == {"p": ["setup"]}


async def test_a_batch_of_identical_pods_maps_one_to_one_under_concurrent_allocates(
    allocator: Allocator, cluster: FakeCluster
) -> None:
    cluster.lag = True
    cluster.add(
        *(pod(f"p{i}", container("main", {"nvidia.com/gpu.shared": "1"}), minute=i) for i in range(10))
    )
    shares = [device_id(i % 2, (i // 2) * 160000) for i in range(10)]
    await asyncio.gather(*(allocator.allocate(SHARED, [share]) for share in shares))
    assert sorted(owners(cluster)) == [f"p{i}" for i in range(10)]
    assert len({value for _, value in cluster.writes}) == 10


async def test_a_cache_that_missed_the_binding_never_gives_the_cards_to_a_pod_that_holds_some(
    allocator: Allocator, cluster: FakeCluster
) -> None:
    admitted = pod("admitted", container("main", {"nvidia.com/gpu": "1"}))
    cluster.add(admitted)
    await allocator.allocate(EXCLUSIVE, [device_id(0)])
    cluster.cache = list(cluster.pods)  # the informer has not seen the next binding yet
    cluster.add(pod("just-bound", container("main", {"nvidia.com/gpu": "1"}), minute=3))
    await allocator.allocate(EXCLUSIVE, [device_id(1)])
    assert owners(cluster) == {"admitted": ["main"], "just-bound": ["main"]}
    assert [name for name, _ in cluster.writes] == ["admitted", "just-bound"]
