"""Reconcilers read the manager's shared cache by key or declared index, never via informers of their own."""

from __future__ import annotations

import pytest

from gpustack_operator.controllerkit.cache import Cache, NotCachedError
from gpustack_operator.controllerkit.manager import Manager
from gpustack_operator.controllerkit.reconciler import DONE, Result
from gpustack_operator.controllerkit.spec import ControllerSpec, Index
from gpustack_operator.controllerkit.watches import for_, mapped, reads
from gpustack_operator.controllers.indexers import (
    LOCAL_QUEUE_CLUSTER_QUEUE,
    LOCAL_QUEUES_BY_CLUSTER_QUEUE,
    local_queue_cluster_queue,
)
from gpustack_operator.kube.resources import CLUSTER_QUEUES, LOCAL_QUEUES, NAMESPACES, NODES
from tests.helpers import eventually, yield_to_loop

from .fakes import FakeInformers, ScriptedReconciler, obj, running


def local_queue(name: str, cluster_queue: str, namespace: str = "team-a") -> dict[str, object]:
    return obj(name, namespace, spec={"clusterQueue": cluster_queue})


class QueuesOfClusterQueue:
    """Records, per ClusterQueue, the LocalQueues feeding it, as the cache's index says at reconcile time."""

    def __init__(self, cache: Cache) -> None:
        self.cache = cache
        self.seen: dict[str, list[str]] = {}

    async def reconcile(self, key: str) -> Result:
        if self.cache.get(CLUSTER_QUEUES, key) is None:
            return DONE
        lqs = self.cache.by_index(LOCAL_QUEUES, LOCAL_QUEUE_CLUSTER_QUEUE, key)
        self.seen[key] = sorted(lq["metadata"]["name"] for lq in lqs)
        return DONE


def cluster_queue_controller(manager: Manager, name: str = "clusterqueue") -> QueuesOfClusterQueue:
    reconciler = QueuesOfClusterQueue(manager.cache)
    manager.add(
        ControllerSpec(
            name,
            reconciler,
            for_(CLUSTER_QUEUES),
            watches=(mapped(LOCAL_QUEUES, local_queue_cluster_queue),),
            indexes=(LOCAL_QUEUES_BY_CLUSTER_QUEUE,),
        )
    )
    return reconciler


async def test_a_reconciler_reads_objects_and_its_declared_index_from_the_shared_cache() -> None:
    informers = FakeInformers()
    manager = Manager(informers)
    reconciler = cluster_queue_controller(manager)
    lqs = informers.informer(LOCAL_QUEUES)
    lqs.add(local_queue("lq-1", "pool-a"))
    lqs.add(local_queue("lq-2", "pool-a", namespace="team-b"))
    lqs.add(local_queue("lq-3", "pool-b"))
    informers.informer(CLUSTER_QUEUES).add(obj("pool-a", None))
    async with running(manager):
        await eventually(lambda: reconciler.seen.get("pool-a") == ["lq-1", "lq-2"])
        lqs.add(local_queue("lq-4", "pool-a"))
        await eventually(lambda: reconciler.seen.get("pool-a") == ["lq-1", "lq-2", "lq-4"])
    assert manager.cache.get(CLUSTER_QUEUES, "pool-a") == obj("pool-a", None)
    assert manager.cache.get(LOCAL_QUEUES, "team-b/lq-2") == local_queue("lq-2", "pool-a", "team-b")
    assert len(manager.cache.list(LOCAL_QUEUES)) == 4
    assert len(informers.informers) == 2, "reading created no informer of its own"


async def test_two_controllers_declaring_one_index_share_one_informer_and_one_index() -> None:
    informers = FakeInformers()
    manager = Manager(informers)
    cluster_queue_controller(manager, "first")
    cluster_queue_controller(manager, "second")
    assert len(informers.informers) == 2
    informers.informer(LOCAL_QUEUES).add(local_queue("lq-1", "pool-a"))
    found = manager.cache.by_index(LOCAL_QUEUES, LOCAL_QUEUE_CLUSTER_QUEUE, "pool-a")
    assert [lq["metadata"]["name"] for lq in found] == ["lq-1"]


def test_one_index_name_with_two_functions_on_one_informer_is_refused() -> None:
    manager = Manager(FakeInformers())
    cluster_queue_controller(manager)
    other = Index(LOCAL_QUEUES, LOCAL_QUEUE_CLUSTER_QUEUE, lambda lq: [])
    spec = ControllerSpec("other", ScriptedReconciler(), for_(LOCAL_QUEUES), indexes=(other,))
    with pytest.raises(ValueError, match="already declared with another function"):
        manager.add(spec)
    assert list(manager.controllers) == ["clusterqueue"], "a refused controller leaves nothing behind"


def test_an_index_on_a_kind_the_controller_does_not_watch_is_refused() -> None:
    with pytest.raises(ValueError, match="does not watch"):
        ControllerSpec(
            "x", ScriptedReconciler(), for_(CLUSTER_QUEUES), indexes=(LOCAL_QUEUES_BY_CLUSTER_QUEUE,)
        )


def test_reading_a_kind_no_controller_watches_names_the_fix() -> None:
    manager = Manager(FakeInformers())
    cluster_queue_controller(manager)
    with pytest.raises(NotCachedError, match=r"declare reads\(Node\)"):
        manager.cache.get(NODES, "node-1")
    with pytest.raises(NotCachedError, match="no controller watches Namespace"):
        manager.cache.list(reads(NAMESPACES))


def test_querying_an_index_nobody_declared_fails_with_the_known_ones() -> None:
    manager = Manager(FakeInformers())
    cluster_queue_controller(manager)
    with pytest.raises(KeyError, match=LOCAL_QUEUE_CLUSTER_QUEUE):
        manager.cache.by_index(LOCAL_QUEUES, "spec.stopPolicy", "Hold")


def test_a_kind_cached_under_two_selectors_is_read_through_the_watch() -> None:
    informers = FakeInformers()
    manager = Manager(informers)
    gpu, cpu = reads(NODES, label_selector="gpu=true"), reads(NODES, label_selector="gpu=false")
    manager.add(ControllerSpec("nodes", ScriptedReconciler(), for_(CLUSTER_QUEUES), watches=(gpu, cpu)))
    informers.informer(NODES, label_selector="gpu=true").add(obj("node-1", None))
    with pytest.raises(NotCachedError, match=r"several informers \(Node\[labels=gpu=false\], Node\[labels"):
        manager.cache.get(NODES, "node-1")
    assert manager.cache.get(gpu, "node-1") == obj("node-1", None)
    assert manager.cache.get(cpu, "node-1") is None


async def test_a_read_only_kind_is_cached_but_its_changes_reconcile_nothing() -> None:
    informers = FakeInformers()
    manager = Manager(informers)
    reconciler = ScriptedReconciler()
    manager.add(ControllerSpec("queues", reconciler, for_(LOCAL_QUEUES), watches=(reads(NAMESPACES),)))
    informers.informer(NAMESPACES).add(obj("team-a", None))
    async with running(manager):
        await eventually(lambda: manager.synced)
        informers.informer(NAMESPACES).add(obj("team-b", None))
        await yield_to_loop(50)
        assert reconciler.calls == []
        assert sorted(ns["metadata"]["name"] for ns in manager.cache.list(NAMESPACES)) == ["team-a", "team-b"]


async def test_adding_a_controller_to_a_running_manager_is_refused() -> None:
    manager = Manager(FakeInformers())
    cluster_queue_controller(manager)
    async with running(manager):
        await eventually(lambda: manager.synced)
        with pytest.raises(RuntimeError, match=r"already running.*before run"):
            manager.add(ControllerSpec("late", ScriptedReconciler(), for_(NODES)))
    assert list(manager.controllers) == ["clusterqueue"]
