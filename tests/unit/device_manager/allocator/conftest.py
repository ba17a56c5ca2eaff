"""An Allocator over in-memory pods: the cache, the API server's list and the annotation write."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from gpustack_operator.device_manager.allocator.allocator import Allocator, AllocatorConfig
from gpustack_operator.device_manager.allocator.workdirs import HostPaths
from gpustack_operator.device_manager.plugin.inventory import Inventory
from gpustack_operator.device_manager.podresources.model import KubeletPods, PodName
from gpustack_operator.kube import errors
from gpustack_operator.runtime import Clock
from tests.unit.device_manager.allocator.builders import group


class FakeCluster:
    """Pods on the node. `lag` keeps annotation writes out of the cache (the informer has not seen them);
    `on_fresh` runs before each API-server list is answered (the cluster moving on between retries);
    `kubelet_lists`, when set, names the pods the kubelet's PodResources List reports (None: no answer)."""

    def __init__(self) -> None:
        self.pods: list[dict[str, Any]] = []
        self.cache: list[dict[str, Any]] | None = None
        self.lag = False
        self.fail_writes = False
        self.fail_lists = False
        self.lists = 0
        self.on_fresh: Callable[[int], None] = lambda _: None
        self.writes: list[tuple[str, str]] = []
        self.kubelet_lists: list[PodName] | None = None

    async def active(self) -> KubeletPods | None:
        if self.kubelet_lists is None:
            return None
        return KubeletPods({name: {} for name in self.kubelet_lists})

    def add(self, *pods: dict[str, Any]) -> None:
        self.pods.extend(pods)

    def cached(self) -> list[dict[str, Any]]:
        return self.cache if self.cache is not None else self.pods

    async def fresh(self) -> list[dict[str, Any]]:
        if self.fail_lists:
            raise errors.Unavailable(status=0, reason="ConnectionError", message="apiserver down")
        self.lists += 1
        self.on_fresh(self.lists)
        return self.pods

    async def annotate(self, pod: Mapping[str, Any], key: str, value: str) -> None:
        if self.fail_writes:
            raise errors.Unavailable(status=0, reason="ConnectionError", message="apiserver down")
        name = pod["metadata"]["name"]
        self.writes.append((name, value))
        for stored in self.pods:
            if stored["metadata"]["uid"] == pod["metadata"]["uid"]:
                if self.lag and self.cache is None:
                    self.cache = copy.deepcopy(self.pods)
                stored["metadata"].setdefault("annotations", {})[key] = value
                return
        raise errors.NotFound(status=404, reason="NotFound", message=f"pods {name!r} not found")


@pytest.fixture
def cluster() -> FakeCluster:
    return FakeCluster()


def make_allocator(
    cluster: FakeCluster,
    tmp_path: Path,
    *inventories: Inventory,
    retries: int = 0,
    retry_interval: float = 0.0,
    clock: Clock | None = None,
) -> Allocator:
    invs = inventories or (Inventory("nvidia", [group(count=2)]),)
    config = AllocatorConfig(
        "node-a",
        retries=retries,
        retry_interval=retry_interval,
        paths=HostPaths(tmp_path / "data", tmp_path / "lock"),
    )
    return Allocator(
        {inv.manufacturer: inv for inv in invs}, cluster, cluster, config, clock=clock, kubelet=cluster
    )


@pytest.fixture
def allocator(cluster: FakeCluster, tmp_path: Path) -> Allocator:
    return make_allocator(cluster, tmp_path)
