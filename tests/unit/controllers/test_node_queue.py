"""NodeQueueReconciler under the real manager: quota from pool flavors, the node-devices check, draining.

Queues (as the InstanceType reconciler creates them), ResourceFlavors, the AdmissionCheck and what Kueue
reports are fed through scripted informers; writes go to a server-like client that echoes them back.
"""

from __future__ import annotations

import pytest

from gpustack_operator.api.json import JSONObj
from gpustack_operator.controllers import instance_type, node_queue
from gpustack_operator.controllers.instance_type_queue import new_cluster_queue, queue_labels
from gpustack_operator.kube.resources import (
    ADMISSION_CHECKS,
    CLUSTER_QUEUES,
    INSTANCE_TYPES,
    RESOURCE_FLAVORS,
)
from gpustack_operator.rules.capacity.quota import UNRATIONED_CPU

from .chain_world import World, world

ACC, OS, ARCH = "feature.gpustack.ai/acceleratable", "kubernetes.io/os", "kubernetes.io/arch"
G, A, TYPE = "general.feature.gpustack.ai/", "acceleratable.feature.gpustack.ai/", "resource.gpustack.ai/type"
T4, CPU = "gpustack--nvidia-tesla-t4-linux-amd64", "gpustack--generic-linux-amd64"
DRAINED = "schedule.gpustack.ai/drained"


def a_queue(name: str) -> JSONObj:
    """The queue as the InstanceType reconciler creates it."""
    spec = {
        "os": "linux",
        "arch": "amd64",
        "acceleratable": name == T4,
        "acceleratorGroup": "nvidia-tesla-t4",
    }
    return dict(new_cluster_queue(name, queue_labels(spec, aware=False)))


def a_flavor(count: int, nodes: int = 1, *, accelerated: bool = True, deleting: bool = False) -> JSONObj:
    key = f"{A}nvidia-tesla-t4" if accelerated else f"{G}amd-25-1"
    labels = {
        ACC: str(accelerated).lower(),
        OS: "linux",
        ARCH: "amd64",
        f"{G}amd-25-1": "true",
        TYPE: "nodes",
    }
    labels |= {key: "true", f"{key}.count": str(count), f"{key}.capacity": str(count * nodes)}
    middle = "--nvidia-tesla-t4" if accelerated else ""
    meta: JSONObj = {"name": f"gpustack--amd-25-1{middle}-linux-amd64-{count}{'d' if accelerated else 'c'}"}
    meta["labels"] = labels
    if deleting:
        meta |= {
            "deletionTimestamp": "2025-01-01T00:00:00Z",
            "finalizers": ["kueue.x-k8s.io/resource-in-use"],
        }
    return {"metadata": meta, "spec": {}}


def check(active: str | None) -> JSONObj:
    obj: JSONObj = {
        "metadata": {"name": "gpustack-node-devices"},
        "spec": {"controllerName": "worker.gpustack.ai/node-devices"},
    }
    if active is not None:
        obj["status"] = {"conditions": [{"type": "Active", "status": active, "reason": "Ready"}]}
    return obj


def spec_of(w: World, name: str = T4) -> JSONObj:
    return (w.get(CLUSTER_QUEUES, name) or {}).get("spec") or {}


def quotas(w: World, name: str = T4) -> list[tuple[str, str, str]]:
    """The rationed quotas (an accelerated queue's unrationed cpu left out)."""
    groups = spec_of(w, name).get("resourceGroups") or []
    return [
        (f["name"], r["name"], r["nominalQuota"])
        for g in groups
        for f in g["flavors"]
        for r in f["resources"]
        if r["nominalQuota"] != UNRATIONED_CPU
    ]


async def test_an_accelerated_queue_gets_credit_quota_from_its_flavors_small_nodes_first() -> None:
    async with world(node_queue.controller) as w:
        w.put(RESOURCE_FLAVORS, a_flavor(8, nodes=2))
        w.put(RESOURCE_FLAVORS, a_flavor(2, nodes=3))
        w.put(RESOURCE_FLAVORS, a_flavor(4, accelerated=False))  # the CPU pool's, not this one's
        w.put(CLUSTER_QUEUES, a_queue(T4))
        await w.settle(lambda: bool(quotas(w)))
        group = spec_of(w)["resourceGroups"][0]
        assert group["coveredResources"] == ["credits.gpustack.ai/nvidia", "cpu"]
        unrationed = {"name": "cpu", "nominalQuota": UNRATIONED_CPU}
        assert all(unrationed in f["resources"] for f in group["flavors"])
        assert quotas(w) == [
            ("gpustack--amd-25-1--nvidia-tesla-t4-linux-amd64-2d", "credits.gpustack.ai/nvidia", "9600k"),
            ("gpustack--amd-25-1--nvidia-tesla-t4-linux-amd64-8d", "credits.gpustack.ai/nvidia", "25600k"),
        ]
        assert {x.field_manager for x in w.client.writes} == {"gpustack-node-queue"}


async def test_a_cpu_queue_covers_only_cpu_and_a_flavor_being_finalized_counts_as_gone() -> None:
    async with world(node_queue.controller) as w:
        w.put(RESOURCE_FLAVORS, a_flavor(16, nodes=2, accelerated=False))
        w.put(RESOURCE_FLAVORS, a_flavor(8, accelerated=False))
        w.put(CLUSTER_QUEUES, a_queue(CPU))
        await w.settle(lambda: len(quotas(w, CPU)) == 2)
        w.put(RESOURCE_FLAVORS, a_flavor(8, accelerated=False, deleting=True))
        await w.settle(lambda: len(quotas(w, CPU)) == 1)
        assert quotas(w, CPU) == [("gpustack--amd-25-1-linux-amd64-16c", "cpu", "32")]


async def test_the_node_devices_check_is_referenced_only_while_it_is_active() -> None:
    async with world(node_queue.controller) as w:
        w.put(RESOURCE_FLAVORS, a_flavor(2))
        w.put(CLUSTER_QUEUES, a_queue(T4))
        await w.settle(lambda: bool(quotas(w)))
        assert "admissionChecksStrategy" not in spec_of(w)  # the check does not exist yet
        w.put(ADMISSION_CHECKS, check(None))
        await w.settle()
        assert "admissionChecksStrategy" not in spec_of(w)
        w.put(ADMISSION_CHECKS, check("True"))
        await w.settle(lambda: "admissionChecksStrategy" in spec_of(w))
        assert spec_of(w)["admissionChecksStrategy"] == {
            "admissionChecks": [{"name": "gpustack-node-devices"}]
        }
        w.put(ADMISSION_CHECKS, check("False"))
        await w.settle(lambda: "admissionChecksStrategy" not in spec_of(w))


async def test_a_cpu_queue_never_references_the_node_devices_check() -> None:
    async with world(node_queue.controller) as w:
        w.put(ADMISSION_CHECKS, check("True"))
        w.put(RESOURCE_FLAVORS, a_flavor(4, accelerated=False))
        w.put(CLUSTER_QUEUES, a_queue(CPU))
        await w.settle(lambda: bool(quotas(w, CPU)))
        assert "admissionChecksStrategy" not in spec_of(w, CPU)


async def test_a_deleting_queue_is_drained() -> None:
    async with world(node_queue.controller) as w:
        w.put(RESOURCE_FLAVORS, a_flavor(2))
        w.put(CLUSTER_QUEUES, a_queue(T4))
        await w.settle(lambda: bool(quotas(w)))
        held = {"deletionTimestamp": "2025-01-01T00:00:00Z", "finalizers": ["kueue.x-k8s.io/resource-in-use"]}
        w.update(CLUSTER_QUEUES, T4, {"metadata": held})  # Kueue holds it until its workloads are gone
        await w.settle(lambda: spec_of(w).get("stopPolicy") == "HoldAndDrain")


async def test_a_pool_that_loses_its_flavors_drains_then_empties_then_resumes_when_they_return() -> None:
    async with world(node_queue.controller) as w:
        w.put(RESOURCE_FLAVORS, a_flavor(2))
        w.put(CLUSTER_QUEUES, a_queue(T4))
        await w.settle(lambda: bool(quotas(w)))
        w.update(CLUSTER_QUEUES, T4, {"status": {"admittedWorkloads": 1}})
        w.remove(RESOURCE_FLAVORS, a_flavor(2)["metadata"]["name"])
        await w.settle(lambda: spec_of(w).get("stopPolicy") == "HoldAndDrain")
        assert quotas(w)  # the quota stays until nothing is reserved
        assert (w.get(CLUSTER_QUEUES, T4) or {})["metadata"]["annotations"] == {DRAINED: "no-flavors"}

        w.update(CLUSTER_QUEUES, T4, {"status": {"admittedWorkloads": 0}})  # Kueue evicted them
        await w.settle(lambda: "resourceGroups" not in spec_of(w))

        w.put(RESOURCE_FLAVORS, a_flavor(4))
        await w.settle(lambda: spec_of(w).get("stopPolicy") == "None")
        assert quotas(w) == [
            ("gpustack--amd-25-1--nvidia-tesla-t4-linux-amd64-4d", "credits.gpustack.ai/nvidia", "6400k")
        ]
        assert DRAINED not in ((w.get(CLUSTER_QUEUES, T4) or {})["metadata"].get("annotations") or {})


async def test_an_idle_pool_that_loses_its_flavors_is_drained_before_its_quota_goes() -> None:
    """Contract §6/§7.9: HoldAndDrain before the groups are emptied, even with nothing admitted."""
    async with world(node_queue.controller) as w:
        w.put(RESOURCE_FLAVORS, a_flavor(2))
        w.put(CLUSTER_QUEUES, a_queue(T4))
        await w.settle(lambda: bool(quotas(w)))
        start = len(w.client.writes)
        w.remove(RESOURCE_FLAVORS, a_flavor(2)["metadata"]["name"])
        await w.settle(lambda: "resourceGroups" not in spec_of(w))
        sent = [sorted((x.body or {}).get("spec") or {}) for x in w.client.writes[start:]]
        assert sent == [["stopPolicy"], ["resourceGroups"]]  # held and drained first, emptied after
        assert spec_of(w)["stopPolicy"] == "HoldAndDrain"
        assert (w.get(CLUSTER_QUEUES, T4) or {})["metadata"]["annotations"] == {DRAINED: "no-flavors"}

        w.put(RESOURCE_FLAVORS, a_flavor(2))
        await w.settle(lambda: spec_of(w).get("stopPolicy") == "None" and bool(quotas(w)))
        assert DRAINED not in ((w.get(CLUSTER_QUEUES, T4) or {})["metadata"].get("annotations") or {})


async def test_with_draining_switched_off_an_idle_flavorless_queue_just_loses_its_quota() -> None:
    async with world(node_queue.controller, drain_when_no_flavors="false") as w:
        w.put(RESOURCE_FLAVORS, a_flavor(2))
        w.put(CLUSTER_QUEUES, a_queue(T4))
        await w.settle(lambda: bool(quotas(w)))
        w.remove(RESOURCE_FLAVORS, a_flavor(2)["metadata"]["name"])
        await w.settle(lambda: not quotas(w))
        assert spec_of(w)["stopPolicy"] == "None"
        assert DRAINED not in ((w.get(CLUSTER_QUEUES, T4) or {})["metadata"].get("annotations") or {})


@pytest.mark.parametrize("policy", ["Hold", "HoldAndDrain"])
async def test_a_stop_an_admin_set_is_never_lifted_when_flavors_arrive(policy: str) -> None:
    async with world(node_queue.controller) as w:
        queue = a_queue(T4)
        queue["spec"]["stopPolicy"] = policy
        w.put(CLUSTER_QUEUES, queue)
        w.put(RESOURCE_FLAVORS, a_flavor(2))
        await w.settle(lambda: bool(quotas(w)))
        assert spec_of(w)["stopPolicy"] == policy


async def test_with_draining_switched_off_a_flavorless_queue_waits_for_its_workloads_to_finish() -> None:
    async with world(node_queue.controller, drain_when_no_flavors="false") as w:
        w.put(RESOURCE_FLAVORS, a_flavor(2))
        w.put(CLUSTER_QUEUES, a_queue(T4))
        await w.settle(lambda: bool(quotas(w)))
        w.update(CLUSTER_QUEUES, T4, {"status": {"reservingWorkloads": 1}})
        w.remove(RESOURCE_FLAVORS, a_flavor(2)["metadata"]["name"])
        await w.settle()
        assert spec_of(w)["stopPolicy"] == "None"
        assert quotas(w)
        w.update(CLUSTER_QUEUES, T4, {"status": {"reservingWorkloads": 0}})
        await w.settle(lambda: not quotas(w))


async def test_foreign_queues_are_left_alone_and_a_settled_controller_writes_nothing() -> None:
    async with world(node_queue.controller) as w:
        foreign = a_queue(T4)
        foreign["metadata"]["name"] = "admin-queue"
        del foreign["metadata"]["labels"][TYPE]
        w.put(CLUSTER_QUEUES, foreign)
        w.put(ADMISSION_CHECKS, check("True"))
        w.put(RESOURCE_FLAVORS, a_flavor(2))
        w.put(CLUSTER_QUEUES, a_queue(T4))
        await w.settle(lambda: bool(quotas(w)) and "admissionChecksStrategy" in spec_of(w))
        assert not quotas(w, "admin-queue")
        start = len(w.client.writes)
        w.update(
            CLUSTER_QUEUES,
            T4,
            {
                "spec": {
                    "resourceGroups": [
                        {
                            "coveredResources": ["credits.gpustack.ai/nvidia", "cpu"],
                            "flavors": [
                                {
                                    "name": a_flavor(2)["metadata"]["name"],
                                    "resources": [
                                        {"name": "credits.gpustack.ai/nvidia", "nominalQuota": "3200000"},
                                        {"name": "cpu", "nominalQuota": "1000000"},
                                    ],
                                }
                            ],
                        }
                    ]
                }
            },
        )
        w.update(CLUSTER_QUEUES, T4, {"status": {"pendingWorkloads": 3}})  # Kueue's status churn
        await w.settle()
        assert w.writes_since(start) == []  # 3200000 is 3200k, 1000000 is 1M: nothing to fix


async def test_with_both_chain_reconcilers_a_recovered_pool_stays_held_until_an_admin_clears_inactive() -> (
    None
):
    async with world(instance_type.controller, node_queue.controller) as w:
        w.put(RESOURCE_FLAVORS, a_flavor(2))
        spec = {"acceleratable": True, "acceleratorGroup": "nvidia-tesla-t4", "os": "linux", "arch": "amd64"}
        w.put(INSTANCE_TYPES, {"metadata": {"name": T4}, "spec": spec})
        await w.settle(lambda: bool(quotas(w)))
        w.update(CLUSTER_QUEUES, T4, {"status": {"admittedWorkloads": 1}})
        w.remove(RESOURCE_FLAVORS, a_flavor(2)["metadata"]["name"])
        await w.settle(lambda: (w.get(INSTANCE_TYPES, T4) or {})["spec"].get("inactive") is True)
        assert spec_of(w)["stopPolicy"] == "HoldAndDrain"
        w.update(CLUSTER_QUEUES, T4, {"status": {"admittedWorkloads": 0}})
        await w.settle(lambda: not quotas(w))

        w.put(RESOURCE_FLAVORS, a_flavor(2))
        await w.settle(lambda: bool(quotas(w)) and spec_of(w).get("stopPolicy") == "Hold")
        w.update(INSTANCE_TYPES, T4, {"spec": {"inactive": False}})
        await w.settle(lambda: spec_of(w).get("stopPolicy") == "None")


async def test_with_both_chain_reconcilers_an_idle_pool_that_lost_its_nodes_also_stays_held() -> None:
    async with world(instance_type.controller, node_queue.controller) as w:
        w.put(RESOURCE_FLAVORS, a_flavor(2))
        spec = {"acceleratable": True, "acceleratorGroup": "nvidia-tesla-t4", "os": "linux", "arch": "amd64"}
        w.put(INSTANCE_TYPES, {"metadata": {"name": T4}, "spec": spec})
        await w.settle(lambda: bool(quotas(w)))
        w.remove(RESOURCE_FLAVORS, a_flavor(2)["metadata"]["name"])
        await w.settle(lambda: not quotas(w) and spec_of(w).get("stopPolicy") == "HoldAndDrain")
        assert (w.get(INSTANCE_TYPES, T4) or {})["spec"].get("inactive") is True

        w.put(RESOURCE_FLAVORS, a_flavor(2))
        await w.settle(lambda: bool(quotas(w)) and spec_of(w).get("stopPolicy") == "Hold")
        assert (w.get(INSTANCE_TYPES, T4) or {})["spec"].get("inactive") is True
        w.update(INSTANCE_TYPES, T4, {"spec": {"inactive": False}})
        await w.settle(lambda: spec_of(w).get("stopPolicy") == "None")
