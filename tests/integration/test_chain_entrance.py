"""Stage 4 on the sandbox: NodeQueueEntranceReconciler gives every user namespace a LocalQueue per pool.

A pool's ClusterQueue (`resource.gpustack.ai/type=instancetypes`) is created on the real Kueue; the real
controller must put `gpustack-fnv64-<hash>` LocalQueues in every namespace but kube-system and the system
namespace, in namespaces created later too, put back one a user deletes, and let the garbage collector
take them all when the queue goes. Checked as `kubectl get localqueues -A` would show them.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest_asyncio

from gpustack_operator.api.json import JSONObj
from gpustack_operator.controllers import node_queue_entrance
from gpustack_operator.kube import errors, resources
from gpustack_operator.kube.client import Client
from gpustack_operator.rules.naming.queues import format_local_queue_name
from tests.helpers import eventually
from tests.integration.chain_support import SYSTEM_NAMESPACE, running_controllers


@pytest_asyncio.fixture(loop_scope="session")
async def pool_queue(kube: Client) -> AsyncIterator[str]:
    """A pool's ClusterQueue (no quota: an entrance needs none), deleted afterwards."""
    name = f"gpustack--entrance-{uuid.uuid4().hex[:8]}-linux-amd64"
    cq = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name, "labels": {"resource.gpustack.ai/type": "instancetypes"}},
        "spec": {"namespaceSelector": {}},
    }
    await kube.create(resources.CLUSTER_QUEUES, cq)
    try:
        yield name
    finally:
        await kube.delete(resources.CLUSTER_QUEUES, name)


async def entrances(kube: Client, cq: str) -> dict[str, JSONObj]:
    """namespace -> the LocalQueue named after `cq` there (`kubectl get localqueues -A`)."""
    name = format_local_queue_name(cq)
    return {
        lq["metadata"]["namespace"]: lq
        for lq in await kube.list(resources.LOCAL_QUEUES)
        if lq["metadata"]["name"] == name
    }


async def user_namespaces(kube: Client) -> set[str]:
    names = {
        ns["metadata"]["name"]
        for ns in await kube.list(resources.NAMESPACES)
        if (ns.get("status") or {}).get("phase") != "Terminating"
    }
    return names - {"kube-system", SYSTEM_NAMESPACE}


async def test_every_user_namespace_gets_an_entrance_old_new_and_deleted_ones(
    kube: Client, pool_queue: str
) -> None:
    cq = await kube.get(resources.CLUSTER_QUEUES, pool_queue)
    async with running_controllers(kube, (node_queue_entrance.controller,)):

        async def everywhere() -> dict[str, JSONObj] | None:
            found = await entrances(kube, pool_queue)
            return found if set(found) >= await user_namespaces(kube) else None

        found = await eventually(everywhere, what="an entrance in every user namespace")
        assert "kube-system" not in found
        assert SYSTEM_NAMESPACE not in found
        lq = found["default"]
        assert lq["spec"]["clusterQueue"] == pool_queue
        assert lq["metadata"]["annotations"]["schedule.gpustack.ai/queue"] == pool_queue
        assert lq["metadata"]["ownerReferences"] == [
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ClusterQueue",
                "name": pool_queue,
                "uid": cq["metadata"]["uid"],
                "controller": True,
            }
        ]

        late = f"t-late-{uuid.uuid4().hex[:8]}"
        await kube.create(resources.NAMESPACES, {"metadata": {"name": late}})
        try:
            await eventually(
                lambda: _has(kube, pool_queue, late), what=f"an entrance in new namespace {late}"
            )
            await kube.delete(resources.LOCAL_QUEUES, format_local_queue_name(pool_queue), late)
            await eventually(lambda: _has(kube, pool_queue, late), what="the deleted entrance put back")
        finally:
            await kube.delete(resources.NAMESPACES, late)

    await kube.delete(resources.CLUSTER_QUEUES, pool_queue)

    async def collected() -> bool:
        return not await entrances(kube, pool_queue)

    await eventually(collected, what="entrances garbage-collected with their ClusterQueue")


async def _has(kube: Client, cq: str, namespace: str) -> bool:
    try:
        lq = await kube.get(resources.LOCAL_QUEUES, format_local_queue_name(cq), namespace)
    except errors.NotFound:
        return False
    return bool(lq["spec"]["clusterQueue"] == cq)
