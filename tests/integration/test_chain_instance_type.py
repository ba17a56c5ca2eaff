"""Stage 4 on the sandbox: InstanceTypes become ClusterQueues that the real Kueue accepts, with quota.

The InstanceType and NodeQueue reconcilers run for real over informers; ResourceFlavors are created by hand
as the NodeFlavor reconciler would (its own builder), and the A10 node's Devices ledger is marked managed as
the NodeDevices reconciler would. Everything else — queue creation, labels, the Inactive switch, quota, the
node-devices check, teardown and recreation — must be done by the controllers, and Kueue must accept it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable
from functools import partial
from typing import Any

import pytest_asyncio

from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import (
    MANAGED_LABEL,
    NODE_DEVICES_ADMISSION_CHECK,
    NODE_DEVICES_CONTROLLER_NAME,
)
from gpustack_operator.controllerkit.manager import Manager
from gpustack_operator.controllers import instance_type, node_queue
from gpustack_operator.controllers.node_flavor_objects import resource_flavor
from gpustack_operator.kube import errors
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import (
    ADMISSION_CHECKS,
    CLUSTER_QUEUES,
    DEVICES,
    INSTANCE_TYPES,
    RESOURCE_FLAVORS,
)
from gpustack_operator.rules.naming.flavors import NodeFlavor
from gpustack_operator.rules.naming.queues import format_local_queue_name
from tests.helpers import eventually
from tests.integration.chain_support import running_controllers

ACC, OS, ARCH = "feature.gpustack.ai/acceleratable", "kubernetes.io/os", "kubernetes.io/arch"
A, TYPE = "acceleratable.feature.gpustack.ai/", "resource.gpustack.ai/type"
A10, CPU = "gpustack--nvidia-a10-linux-amd64", "gpustack--generic-linux-amd64"


@pytest_asyncio.fixture(loop_scope="session")
async def controllers(kube: Client) -> AsyncIterator[Manager]:
    async with running_controllers(kube, (instance_type.controller, node_queue.controller)) as manager:
        yield manager


def a_flavor(general: str, accel: str, count: int, nodes: int = 1) -> JSONObj:
    """The ResourceFlavor NodeFlavorReconciler writes for `nodes` linux/amd64 nodes of this hardware."""
    feature = f"{A}{accel}" if accel else f"general.feature.gpustack.ai/{general}"
    kind = "d" if accel else "c"
    name = f"gpustack--{general}{'--' + accel if accel else ''}-linux-amd64-{count}{kind}"
    selector = {
        MANAGED_LABEL: "true",
        OS: "linux",
        ARCH: "amd64",
        feature: "true",
        f"{feature}.count": str(count),
    }
    flavor = NodeFlavor(name, general, accel, "linux", "amd64", count, selector, {})
    return dict(resource_flavor(flavor, nodes, aware=False))


def an_instance_type(name: str, accel: str = "") -> JSONObj:
    spec = {"acceleratable": bool(accel), "generalGroup": "generic", "os": "linux", "arch": "amd64"}
    unit = {"cpu": "4", "ram": "16Gi"} if accel else {"cpu": "1", "ram": "2Gi"}
    spec |= {"unitResources": unit, "localStorage": "100Gi"} | ({"acceleratorGroup": accel} if accel else {})
    kind = {"apiVersion": INSTANCE_TYPES.api_version, "kind": INSTANCE_TYPES.kind}
    return {**kind, "metadata": {"name": name}, "spec": spec}


async def found(kube: Client, resource: Any, name: str) -> JSONObj | None:
    return await kube.get_or_none(resource, name)


def conditions(obj: JSONObj) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}


async def kueue_accepts(kube: Client, name: str) -> JSONObj | None:
    queue = await found(kube, CLUSTER_QUEUES, name)
    return queue if queue and conditions(queue).get("Active") == "True" else None


async def with_groups(queue: Awaitable[JSONObj | None]) -> JSONObj | None:
    """The queue once it rations something (its resourceGroups written)."""
    found_queue = await queue
    return found_queue if found_queue and found_queue["spec"].get("resourceGroups") else None


async def phase(kube: Client, name: str) -> str | None:
    it = await found(kube, INSTANCE_TYPES, name)
    return ((it or {}).get("status") or {}).get("phase")


@contextlib.asynccontextmanager
async def cleaned_up(kube: Client, *objects: tuple[Any, str]) -> AsyncIterator[None]:
    """Delete what the test made, InstanceTypes first (their queues reference the flavors and the check)."""
    try:
        yield
    finally:
        for resource, name in objects:
            await kube.delete(resource, name)
        for resource, name in objects:
            await eventually(partial(_gone, kube, resource, name), timeout=90, what=f"{name} deleted")


async def _gone(kube: Client, resource: Any, name: str) -> bool:
    return await found(kube, resource, name) is None


async def test_an_accelerated_type_gets_a_queue_kueue_accepts_with_credit_quota_and_a_live_status(
    kube: Client, controllers: Manager
) -> None:
    rf = a_flavor("intel-6-106", "nvidia-a10", 4)
    await kube.patch(DEVICES, "a10-0", {"metadata": {"labels": {MANAGED_LABEL: "true"}}})
    await kube.create(RESOURCE_FLAVORS, rf)
    await kube.create(INSTANCE_TYPES, an_instance_type(A10, "nvidia-a10"))
    check = {
        "apiVersion": ADMISSION_CHECKS.api_version,
        "kind": ADMISSION_CHECKS.kind,
        "metadata": {"name": NODE_DEVICES_ADMISSION_CHECK},
        "spec": {"controllerName": NODE_DEVICES_CONTROLLER_NAME},
    }
    made = (
        (INSTANCE_TYPES, A10),
        (RESOURCE_FLAVORS, rf["metadata"]["name"]),
        (ADMISSION_CHECKS, NODE_DEVICES_ADMISSION_CHECK),
    )
    async with cleaned_up(kube, *made):
        # The queue may first be written before the flavor reaches the controller's cache (no groups yet;
        # Kueue accepts an empty queue too), and gets its group once the flavor's coalesced event arrives.
        queue = await eventually(
            lambda: with_groups(kueue_accepts(kube, A10)), timeout=60, what="Kueue accepts the A10 queue"
        )
        assert queue["metadata"]["labels"] == {
            ACC: "true",
            OS: "linux",
            ARCH: "amd64",
            f"{A}nvidia-a10": "true",
            TYPE: "instancetypes",
        }
        spec = queue["spec"]
        assert spec["namespaceSelector"] == {}
        assert spec["flavorFungibility"] == {
            "whenCanBorrow": "TryNextFlavor",
            "whenCanPreempt": "MayStopSearch",
        }
        assert spec["preemption"]["withinClusterQueue"] == "LowerPriority"
        assert "cohortName" not in spec
        assert spec["resourceGroups"] == [
            {
                "coveredResources": ["credits.gpustack.ai/nvidia", "cpu"],
                "flavors": [
                    {
                        "name": rf["metadata"]["name"],
                        "resources": [
                            {"name": "credits.gpustack.ai/nvidia", "nominalQuota": "6400k"},
                            {"name": "cpu", "nominalQuota": "1M"},
                        ],
                    }
                ],
            }
        ]
        assert "admissionChecksStrategy" not in spec  # the node-devices check does not exist yet

        async def views() -> JSONObj | None:
            it = await found(kube, INSTANCE_TYPES, A10)
            status = (it or {}).get("status") or {}
            return (
                status
                if status.get("phase") == "Active" and status.get("accelerator", {}).get("capacity") == "4"
                else None
            )

        status = await eventually(views, timeout=60, what="the A10 type Active with its four cards")
        assert status["entrance"] == format_local_queue_name(A10)
        assert status["acceleratorShared"]["capacity"] == "40"

        # The node-devices check is referenced once its owner reports it Active, and Kueue still accepts it.
        await kube.create(ADMISSION_CHECKS, check)
        await kube.patch_status(
            ADMISSION_CHECKS,
            NODE_DEVICES_ADMISSION_CHECK,
            {
                "status": {
                    "conditions": [
                        {
                            "type": "Active",
                            "status": "True",
                            "reason": "Ready",
                            "message": "ready",
                            "lastTransitionTime": "2025-01-01T00:00:00Z",
                        }
                    ]
                }
            },
        )

        async def checked() -> JSONObj | None:
            queue = await kueue_accepts(kube, A10)
            return queue if queue and "admissionChecksStrategy" in queue["spec"] else None

        queue = await eventually(
            checked, timeout=60, what="the queue references the active node-devices check"
        )
        assert queue["spec"]["admissionChecksStrategy"] == {
            "admissionChecks": [{"name": NODE_DEVICES_ADMISSION_CHECK}]
        }

        # The admin's Inactive switch holds the queue; clearing it resumes it.
        await kube.patch(INSTANCE_TYPES, A10, {"spec": {"inactive": True}})
        await eventually(lambda: stop_policy_is(kube, A10, "Hold"), timeout=60, what="queue held")
        await eventually(lambda: phase_is(kube, A10, "Inactive"), timeout=60, what="type Inactive")
        await kube.patch(INSTANCE_TYPES, A10, {"spec": {"inactive": False}})
        await eventually(lambda: stop_policy_is(kube, A10, "None"), timeout=60, what="queue resumed")
        await eventually(lambda: phase_is(kube, A10, "Active"), timeout=60, what="type Active again")

        # Deleting the type deletes its queue; the type goes only once Kueue has let the queue go.
        await kube.delete(INSTANCE_TYPES, A10)
        await eventually(lambda: _gone(kube, CLUSTER_QUEUES, A10), timeout=90, what="the A10 queue deleted")
        await eventually(lambda: _gone(kube, INSTANCE_TYPES, A10), timeout=60, what="the A10 type released")
    await kube.patch(DEVICES, "a10-0", {"metadata": {"labels": {MANAGED_LABEL: None}}})


async def stop_policy_is(kube: Client, name: str, policy: str) -> bool:
    queue = await found(kube, CLUSTER_QUEUES, name)
    return queue is not None and queue["spec"].get("stopPolicy") == policy


async def phase_is(kube: Client, name: str, wanted: str) -> bool:
    return await phase(kube, name) == wanted


async def cpu_quota(kube: Client) -> list[tuple[str, str]] | None:
    queue = await found(kube, CLUSTER_QUEUES, CPU)
    groups = ((queue or {}).get("spec") or {}).get("resourceGroups") or []
    return [(f["name"], f["resources"][0]["nominalQuota"]) for g in groups for f in g["flavors"]] or None


async def test_a_cpu_pool_follows_its_flavors_and_a_deleted_queue_comes_back(
    kube: Client, controllers: Manager
) -> None:
    small, big = a_flavor("amd-25-1", "", 64, nodes=2), a_flavor("intel-6-207", "", 32)
    for rf in (big, small):
        await kube.create(RESOURCE_FLAVORS, rf)
    await kube.create(INSTANCE_TYPES, an_instance_type(CPU))
    made = (
        (INSTANCE_TYPES, CPU),
        (RESOURCE_FLAVORS, small["metadata"]["name"]),
        (RESOURCE_FLAVORS, big["metadata"]["name"]),
    )
    async with cleaned_up(kube, *made):
        quota = await eventually(lambda: cpu_quota(kube), timeout=60, what="CPU quota")
        assert quota == [
            (big["metadata"]["name"], "32"),
            (small["metadata"]["name"], "128"),
        ]  # small nodes first
        await eventually(lambda: kueue_accepts(kube, CPU), timeout=60, what="Kueue accepts the CPU queue")

        async def cpu_view() -> JSONObj | None:
            it = await found(kube, INSTANCE_TYPES, CPU)
            view = ((it or {}).get("status") or {}).get("cpu")
            return view if view and view.get("capacity") == "160" else None

        assert await eventually(cpu_view, timeout=60, what="CPU view") == {
            "capacity": "160",
            "remaining": "160",
            "onceMaxRequest": "64",
        }

        # At rest nothing is written, though Kueue keeps writing the queue's status.
        before = (await our_writes(kube, CLUSTER_QUEUES, CPU), await our_writes(kube, INSTANCE_TYPES, CPU))
        await asyncio.sleep(5)
        assert (
            await our_writes(kube, CLUSTER_QUEUES, CPU),
            await our_writes(kube, INSTANCE_TYPES, CPU),
        ) == before

        # A flavor whose nodes left: deleted, held by Kueue's finalizer until the queue drops it, then gone.
        await kube.delete(RESOURCE_FLAVORS, big["metadata"]["name"])
        await eventually(
            lambda: _gone(kube, RESOURCE_FLAVORS, big["metadata"]["name"]), timeout=60, what="flavor released"
        )
        assert await cpu_quota(kube) == [(small["metadata"]["name"], "128")]

        # An admin deletes the queue under a live type: it is drained, removed, and created again.
        uid = (await kube.get(CLUSTER_QUEUES, CPU))["metadata"]["uid"]
        await kube.delete(CLUSTER_QUEUES, CPU)

        async def recreated() -> JSONObj | None:
            queue = await kueue_accepts(kube, CPU)
            return (
                queue
                if queue and queue["metadata"]["uid"] != uid and queue["spec"].get("resourceGroups")
                else None
            )

        queue = await eventually(recreated, timeout=90, what="the CPU queue recreated and filled")
        assert queue["spec"]["stopPolicy"] == "None"

        # With no flavor left and nothing reserved, the quota is emptied and Kueue still accepts the queue.
        await kube.delete(RESOURCE_FLAVORS, small["metadata"]["name"])
        await eventually(
            lambda: _gone(kube, RESOURCE_FLAVORS, small["metadata"]["name"]),
            timeout=60,
            what="flavor released",
        )
        await eventually(lambda: no_quota(kube), timeout=60, what="quota emptied")


async def no_quota(kube: Client) -> bool:
    try:
        queue = await kube.get(CLUSTER_QUEUES, CPU)
    except errors.NotFound:
        return False
    return not queue["spec"].get("resourceGroups")


async def our_writes(kube: Client, resource: Any, name: str) -> dict[str, str]:
    """When each of our field managers last wrote the object (managedFields times, to the second)."""
    obj = await kube.get(resource, name)
    fields = obj["metadata"].get("managedFields") or []
    return {
        f"{m['manager']}/{m.get('subresource', '')}": m["time"]
        for m in fields
        if m["manager"].startswith("gpustack-")
    }
