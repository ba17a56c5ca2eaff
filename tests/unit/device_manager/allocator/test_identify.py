"""Which pod an Allocate is for: oldest pending match, in tiers; one-to-one under concurrency."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from gpustack_operator.api.types.devices import DeviceAllocationMode
from gpustack_operator.device_manager.allocator.allocator import Allocator
from gpustack_operator.device_manager.allocator.annotation import (
    ANNOTATION,
    AllocatedCard,
    ContainerAllocation,
)
from gpustack_operator.device_manager.plugin.handler import PodNotFoundError
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
    whole,
)
from tests.unit.device_manager.allocator.conftest import FakeCluster, make_allocator


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


async def test_pods_created_in_the_same_second_go_in_the_order_the_api_server_wrote_them(
    allocator: Allocator, cluster: FakeCluster
) -> None:
    # creationTimestamp has one-second resolution; the kubelet sees such pods in write (resourceVersion)
    # order, which need not be name order.
    first_written = pod("z-first", container("main", {"nvidia.com/gpu": "1"}), minute=5)
    second_written = pod("a-second", container("main", {"nvidia.com/gpu": "1"}), minute=5)
    first_written["metadata"]["resourceVersion"] = "120"
    second_written["metadata"]["resourceVersion"] = "1100"  # a longer number: compared as integers
    cluster.add(second_written, first_written)
    await allocator.allocate(EXCLUSIVE, [device_id(0)])
    assert owners(cluster) == {"z-first": ["main"]}


async def test_with_podresources_the_pod_the_kubelet_is_admitting_wins_whatever_its_age(
    allocator: Allocator, cluster: FakeCluster
) -> None:
    # The kubelet admits pods as its pod source delivers their bindings: the younger pod's binding came
    # first. Its PodResources List shows the pods admitted before and the one being admitted now.
    two = [container(n, {"nvidia.com/gpu": "1"}) for n in ("a", "b")]
    cluster.add(pod("older", *two, minute=1), pod("younger", *two, minute=9))
    cluster.kubelet_lists = [("ns", "younger")]
    await allocator.allocate(EXCLUSIVE, [device_id(0)])
    cluster.kubelet_lists = [("ns", "younger"), ("ns", "older")]  # the older pod is bound meanwhile
    await allocator.allocate(EXCLUSIVE, [device_id(1)])
    assert owners(cluster) == {"younger": ["a", "b"]}


async def test_without_podresources_the_oldest_pending_pod_is_the_guess(
    allocator: Allocator, cluster: FakeCluster
) -> None:
    one = container("main", {"nvidia.com/gpu": "1"})
    cluster.add(pod("older", one, minute=1), pod("younger", one, minute=9))
    cluster.kubelet_lists = None
    await allocator.allocate(EXCLUSIVE, [device_id(0)])
    assert owners(cluster) == {"older": ["main"]}


async def test_a_pod_the_kubelet_does_not_list_is_never_chosen(
    allocator: Allocator, cluster: FakeCluster
) -> None:
    cluster.add(pod("bound-not-admitted", container("main", {"nvidia.com/gpu": "1"}), minute=1))
    cluster.kubelet_lists = []
    with pytest.raises(PodNotFoundError):
        await allocator.allocate(EXCLUSIVE, [device_id(0)])
    assert owners(cluster) == {}


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


async def test_a_pod_part_way_through_admission_gets_the_next_allocate_before_an_older_pod(
    allocator: Allocator, cluster: FakeCluster
) -> None:
    cluster.add(
        pod("older", container("main", {"nvidia.com/gpu": "1"}), minute=0),
        pod(
            "admitting",
            container("a", {"nvidia.com/gpu": "1"}),
            container("b", {"nvidia.com/gpu": "1"}),
            minute=5,
            allocations={"a": whole(0)},
        ),
    )
    await allocator.allocate(EXCLUSIVE, [device_id(1)])
    assert owners(cluster) == {"admitting": ["a", "b"]}, "the kubelet finishes a pod before the next"


async def test_every_container_of_a_pod_is_served_in_turn_and_then_the_next_pod(
    cluster: FakeCluster, tmp_path: Path
) -> None:
    allocator = make_allocator(cluster, tmp_path, Inventory("nvidia", [group(count=3)]))
    two_mains = pod(
        "first",
        container("a", {"nvidia.com/gpu": "1"}),
        container("b", {"nvidia.com/gpu": "1"}),
        minute=0,
    )
    cluster.add(two_mains, pod("second", container("main", {"nvidia.com/gpu": "1"}), minute=5))
    await allocator.allocate(EXCLUSIVE, [device_id(0)])
    await allocator.allocate(EXCLUSIVE, [device_id(1)])
    assert owners(cluster) == {"first": ["a", "b"]}
    await allocator.allocate(EXCLUSIVE, [device_id(2)])
    assert owners(cluster) == {"first": ["a", "b"], "second": ["main"]}


async def test_an_app_container_reusing_its_init_containers_ids_goes_to_that_pod(
    allocator: Allocator, cluster: FakeCluster
) -> None:
    cluster.add(
        pod("older", container("main", {"nvidia.com/gpu": "1"}), minute=0),
        pod(
            "with-init",
            container("app", {"nvidia.com/gpu": "1"}),
            init=[container("setup", {"nvidia.com/gpu": "1"})],
            minute=5,
            allocations={"setup": whole(0)},
        ),
    )
    await allocator.allocate(EXCLUSIVE, [device_id(0)])
    assert owners(cluster) == {"with-init": ["app", "setup"]}, "card 0 must not go to a second pod"


async def test_a_replay_for_a_pod_whose_every_matching_container_holds_cards_comes_last(
    allocator: Allocator, cluster: FakeCluster
) -> None:
    cluster.add(
        pod("replayed", container("main", {"nvidia.com/gpu": "1"}), allocations={"main": whole(0)}),
        pod("waiting", container("main", {"nvidia.com/gpu": "1"}), minute=5),
    )
    await allocator.allocate(EXCLUSIVE, [device_id(1)])
    assert owners(cluster) == {"replayed": ["main"], "waiting": ["main"]}
    cluster.pods.pop()  # only the replayed pod matches now: the kubelet's replay is served again
    await allocator.allocate(EXCLUSIVE, [device_id(0)])
    assert [name for name, _ in cluster.writes] == ["waiting", "replayed"]


async def test_a_pod_part_way_through_admission_in_the_cache_only_is_checked_against_the_api_server(
    allocator: Allocator, cluster: FakeCluster
) -> None:
    admitting = pod(
        "admitting",
        container("a", {"nvidia.com/gpu": "1"}),
        container("b", {"nvidia.com/gpu": "1"}),
        allocations={"a": whole(0)},
    )
    cluster.cache = [admitting]  # the API server already has it deleted, and a new pod bound
    cluster.add(pod("bound", container("main", {"nvidia.com/gpu": "1"}), minute=5))
    await allocator.allocate(EXCLUSIVE, [device_id(1)])
    assert [name for name, _ in cluster.writes] == ["bound"]


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
