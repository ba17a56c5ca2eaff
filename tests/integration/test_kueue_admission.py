"""Real Kueue gates queued Pods, admits them against quota, and the scheduler binds them to kwok nodes.

Kueue runs with the chain's configuration (rules.capacity.kueueconfig): a Pod asking for `nvidia.com/gpu`
is counted as `credits.gpustack.ai/nvidia`, 1,600,000 per card, so the ClusterQueue declares only that.
"""

from __future__ import annotations

import uuid
from typing import Any

from gpustack_operator.kube import resources
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.conditions import conditions
from tests.helpers import eventually

GATE = "kueue.x-k8s.io/admission"
CREDITS = "credits.gpustack.ai/nvidia"
"""Four A10 cards' worth of quota: 4 x 1,600,000."""


def gpu_pod(name: str, namespace: str, queue: str, gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
            ],
            "tolerations": [{"operator": "Exists"}],
        },
    }


async def queue(kube: Client, namespace: str, flavor: str, cq: str, lq: str, *, quota: str) -> None:
    """A flavor on node a10-0, a ClusterQueue of `quota` credits on it, and a LocalQueue `lq` to it."""
    await kube.create(
        resources.RESOURCE_FLAVORS,
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": flavor},
            "spec": {"nodeLabels": {"kubernetes.io/hostname": "a10-0"}},
        },
    )
    await kube.create(
        resources.CLUSTER_QUEUES,
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": cq},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": [CREDITS],
                        "flavors": [
                            {"name": flavor, "resources": [{"name": CREDITS, "nominalQuota": quota}]}
                        ],
                    }
                ],
            },
        },
    )
    await kube.create(
        resources.LOCAL_QUEUES,
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": lq, "namespace": namespace},
            "spec": {"clusterQueue": cq},
        },
    )


async def test_pod_is_gated_then_admitted_bound_and_running_and_overflow_stays_gated(
    kube: Client, kueue_namespace: str
) -> None:
    namespace = kueue_namespace
    suffix = uuid.uuid4().hex[:6]
    flavor, cq, lq = f"a10-{suffix}", f"cq-{suffix}", "gpus"
    first = await kube.create(resources.PODS, gpu_pod("first", namespace, lq, 4))
    assert GATE in [g["name"] for g in first["spec"]["schedulingGates"]], (
        "Kueue's webhook did not gate the Pod"
    )

    await queue(kube, namespace, flavor, cq, lq, quota="6400000")

    async def running() -> dict[str, Any] | None:
        pod = await kube.get(resources.PODS, "first", namespace)
        return pod if pod["status"].get("phase") == "Running" else None

    pod = await eventually(running, timeout=90, what="first Pod Running")
    assert pod["spec"]["nodeName"] == "a10-0"
    assert not pod["spec"].get("schedulingGates")

    await kube.create(resources.PODS, gpu_pod("second", namespace, lq, 1))

    async def pending_workload() -> bool:
        workloads = await kube.list(resources.WORKLOADS, namespace)
        for wl in workloads:
            owners = [o["name"] for o in wl["metadata"].get("ownerReferences", [])]
            conds = conditions(wl)
            if "second" in owners and "QuotaReserved" in conds:
                return conds["QuotaReserved"]["status"] == "False"
        return False

    await eventually(pending_workload, timeout=60, what="second Pod's Workload evaluated and refused quota")
    second = await kube.get(resources.PODS, "second", namespace)
    assert GATE in [g["name"] for g in second["spec"].get("schedulingGates", [])]
    assert not second["spec"].get("nodeName")

    for name in ("first", "second"):
        await kube.delete(resources.PODS, name, namespace)
    await kube.delete(resources.LOCAL_QUEUES, lq, namespace)
    await kube.delete(resources.CLUSTER_QUEUES, cq)
    await kube.delete(resources.RESOURCE_FLAVORS, flavor)


def sliced_pod(name: str, namespace: str, queue: str, resources_: dict[str, str]) -> dict[str, Any]:
    pod = gpu_pod(name, namespace, queue, 0)
    pod["spec"]["containers"][0]["resources"] = {"limits": resources_}
    return pod


async def test_two_slices_are_charged_twice_the_units_of_one(kube: Client, kueue_namespace: str) -> None:
    """The units transformation is multiplied by the `.sliced` card count (multiplyBy): a container asking
    two slices of 300,000 units is charged 600,000 credits, as the admission check counts it; one without
    `.sliced` is charged once. (Before multiplyBy, Kueue charged both 300,000.)"""
    namespace = kueue_namespace
    suffix = uuid.uuid4().hex[:6]
    flavor, cq, lq = f"a10-sliced-{suffix}", f"cq-sliced-{suffix}", "slices"
    await queue(kube, namespace, flavor, cq, lq, quota="6400000")
    asks = {
        "two": {"nvidia.com/gpu.sliced": "2", "nvidia.com/gpu.sliced.units": "300000"},
        "bare": {"nvidia.com/gpu.sliced.units": "300000"},
    }
    for name, ask in asks.items():
        await kube.create(resources.PODS, sliced_pod(name, namespace, lq, ask))

    async def charged() -> dict[str, str] | None:
        found = {}
        for wl in await kube.list(resources.WORKLOADS, namespace):
            owners = [o["name"] for o in wl["metadata"].get("ownerReferences", [])]
            admission = (wl.get("status") or {}).get("admission") or {}
            for assignment in admission.get("podSetAssignments") or ():
                for owner in owners:
                    found[owner] = assignment["resourceUsage"].get(CREDITS)
        return found if set(found) >= set(asks) else None

    usage = await eventually(charged, timeout=60, what="both Pods' Workloads admitted")
    assert usage["two"] == "600k", usage
    assert usage["bare"] == "300k", usage
    for name in asks:
        await kube.delete(resources.PODS, name, namespace)
    await kube.delete(resources.LOCAL_QUEUES, lq, namespace)
    await kube.delete(resources.CLUSTER_QUEUES, cq)
    await kube.delete(resources.RESOURCE_FLAVORS, flavor)
