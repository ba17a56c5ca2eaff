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
                            {"name": flavor, "resources": [{"name": CREDITS, "nominalQuota": "6400000"}]}
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
