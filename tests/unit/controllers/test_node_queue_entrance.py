"""NodeQueueEntranceReconciler under the real manager: the LocalQueues `kubectl get localqueues -A` shows.

ClusterQueues, Namespaces and LocalQueues are fed through scripted informers (chain_world); writes go to
a recording client that echoes them back, so each test sees the controller settle, then checks the
LocalQueues and that nothing more is written.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from gpustack_operator.api.json import JSONObj
from gpustack_operator.controllers import node_queue_entrance
from gpustack_operator.kube.resources import CLUSTER_QUEUES, LOCAL_QUEUES, NAMESPACES, Resource
from gpustack_operator.rules.naming.queues import format_local_queue_name

from .chain_world import DELETED_AT, SYSTEM, World, world

POOL = "gpustack--nvidia-tesla-t4-linux-amd64"
CPU_POOL = "gpustack--generic-linux-amd64"
ENTRANCE = format_local_queue_name(POOL)


def namespace(name: str, **meta: Any) -> JSONObj:
    return {"metadata": {"name": name, "uid": f"uid-{name}", **meta}}


def cluster_queue(name: str, *, uid: str = "", pool: bool = True, **meta: Any) -> JSONObj:
    labels = {"resource.gpustack.ai/type": "instancetypes"} if pool else {}
    metadata = {"name": name, "uid": uid or f"uid-{name}", "labels": labels, **meta}
    return {"metadata": metadata, "spec": {"namespaceSelector": {}}}


@contextlib.asynccontextmanager
async def entrances_of(*objects: tuple[Resource, JSONObj]) -> AsyncIterator[World]:
    """The controller at rest over `objects` (namespaces, queues, local queues)."""
    async with world(node_queue_entrance.controller) as w:
        for resource, obj in objects:
            w.put(resource, obj)
        await w.settle()
        yield w


def queues(w: World) -> dict[str, str]:
    """namespace/name -> the ClusterQueue it feeds, as `kubectl get localqueues -A` lists them."""
    return {
        f"{lq['metadata']['namespace']}/{lq['metadata']['name']}": lq["spec"]["clusterQueue"]
        for lq in w.informer(LOCAL_QUEUES).store.list()
    }


NAMESPACES_OF_A_CLUSTER = [(NAMESPACES, namespace(n)) for n in ("default", "team-a", "kube-system", SYSTEM)]


async def test_every_user_namespace_gets_an_entrance_to_each_pool_queue() -> None:
    async with entrances_of(
        *NAMESPACES_OF_A_CLUSTER,
        (CLUSTER_QUEUES, cluster_queue(POOL)),
        (CLUSTER_QUEUES, cluster_queue(CPU_POOL)),
        (CLUSTER_QUEUES, cluster_queue("someone-elses", pool=False)),
    ) as w:
        cpu_entrance = format_local_queue_name(CPU_POOL)
        assert queues(w) == {
            f"default/{ENTRANCE}": POOL,
            f"team-a/{ENTRANCE}": POOL,
            f"default/{cpu_entrance}": CPU_POOL,
            f"team-a/{cpu_entrance}": CPU_POOL,
        }
        write = next(x for x in w.client.writes if x.key == f"team-a/{ENTRANCE}")
        assert (write.verb, write.field_manager) == ("apply", "gpustack-node-queue-entrance")
        assert write.body == {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {
                "name": ENTRANCE,
                "namespace": "team-a",
                "annotations": {"schedule.gpustack.ai/queue": POOL},
                "ownerReferences": [
                    {
                        "apiVersion": "kueue.x-k8s.io/v1beta2",
                        "kind": "ClusterQueue",
                        "name": POOL,
                        "uid": f"uid-{POOL}",
                        "controller": True,
                    }
                ],
            },
            "spec": {"clusterQueue": POOL},
        }


async def test_a_new_namespace_gets_one_entrance_per_pool_queue_and_nothing_else_is_written() -> None:
    async with entrances_of(*NAMESPACES_OF_A_CLUSTER, (CLUSTER_QUEUES, cluster_queue(POOL))) as w:
        before = len(w.client.writes)
        w.put(NAMESPACES, namespace("team-b"))
        await w.settle(lambda: f"team-b/{ENTRANCE}" in queues(w))
        assert [x.key for x in w.client.writes[before:]] == [f"team-b/{ENTRANCE}"]


async def test_a_queue_labelled_later_gets_its_entrances() -> None:
    async with entrances_of(*NAMESPACES_OF_A_CLUSTER, (CLUSTER_QUEUES, cluster_queue(POOL, pool=False))) as w:
        assert queues(w) == {}
        w.put(CLUSTER_QUEUES, cluster_queue(POOL))
        await w.settle(lambda: len(queues(w)) == 2)


async def test_queue_status_churn_and_a_restart_write_nothing() -> None:
    async with entrances_of(*NAMESPACES_OF_A_CLUSTER, (CLUSTER_QUEUES, cluster_queue(POOL))) as w:
        settled = len(w.client.writes)
        for pending in range(4):
            w.update(CLUSTER_QUEUES, POOL, {"status": {"pendingWorkloads": pending}})
            w.update(LOCAL_QUEUES, f"team-a/{ENTRANCE}", {"status": {"pendingWorkloads": pending}})
        await w.settle()
        assert len(w.client.writes) == settled
        objects = [
            (r, o) for r in (NAMESPACES, CLUSTER_QUEUES, LOCAL_QUEUES) for o in w.informer(r).store.list()
        ]
    async with entrances_of(*objects) as restarted:
        assert restarted.client.writes == []


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda lq: None, id="deleted by a user"),
        pytest.param(
            lambda lq: {**lq, "metadata": {**lq["metadata"], "annotations": {}}}, id="its annotation removed"
        ),
        pytest.param(
            lambda lq: {**lq, "metadata": {**lq["metadata"], "ownerReferences": []}}, id="its owner removed"
        ),
    ],
)
async def test_a_damaged_entrance_is_repaired(damage: Callable[[JSONObj], JSONObj | None]) -> None:
    async with entrances_of(*NAMESPACES_OF_A_CLUSTER, (CLUSTER_QUEUES, cluster_queue(POOL))) as w:
        key = f"team-a/{ENTRANCE}"
        damaged = damage(w.get(LOCAL_QUEUES, key) or {})
        w.remove(LOCAL_QUEUES, key) if damaged is None else w.put(LOCAL_QUEUES, damaged)
        await w.settle(lambda: w.client.writes[-1].key == key and len(w.client.writes) == 3)
        repaired = w.get(LOCAL_QUEUES, key) or {}
        assert repaired["metadata"]["annotations"] == {"schedule.gpustack.ai/queue": POOL}
        assert repaired["metadata"]["ownerReferences"][0]["uid"] == f"uid-{POOL}"


async def test_a_recreated_queue_takes_over_its_entrances() -> None:
    async with entrances_of(*NAMESPACES_OF_A_CLUSTER, (CLUSTER_QUEUES, cluster_queue(POOL))) as w:
        w.remove(CLUSTER_QUEUES, POOL)
        w.put(CLUSTER_QUEUES, cluster_queue(POOL, uid="uid-2"))

        def owners() -> set[str]:
            return {
                lq["metadata"]["ownerReferences"][0]["uid"] for lq in w.informer(LOCAL_QUEUES).store.list()
            }

        await w.settle(lambda: owners() == {"uid-2"})


async def test_terminating_namespaces_and_queues_and_foreign_queues_of_the_same_name_are_left_alone(
    caplog: pytest.LogCaptureFixture,
) -> None:
    foreign = {
        "metadata": {"name": ENTRANCE, "namespace": "team-a"},
        "spec": {"clusterQueue": "another-queue"},
    }
    with caplog.at_level(logging.WARNING):
        async with entrances_of(
            (NAMESPACES, namespace("team-a")),
            (NAMESPACES, namespace("leaving", deletionTimestamp=DELETED_AT)),
            (LOCAL_QUEUES, foreign),
            (CLUSTER_QUEUES, cluster_queue(POOL)),
            (CLUSTER_QUEUES, cluster_queue(CPU_POOL, deletionTimestamp=DELETED_AT)),
        ) as w:
            assert w.client.writes == []
    assert f"localqueue=team-a/{ENTRANCE} feeds clusterqueue=another-queue" in caplog.text
