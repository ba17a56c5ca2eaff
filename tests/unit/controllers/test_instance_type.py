"""InstanceTypeReconciler under the real manager: the ClusterQueue, the Inactive switch, status and teardown.

InstanceTypes, Devices ledgers and what Kueue writes on queues are fed through scripted informers; writes
go to a server-like client that echoes them back, so each test watches the controller settle and checks
what a user would see, and that a settled controller writes nothing more.
"""

from __future__ import annotations

from typing import Any

from gpustack_operator.api.json import JSONObj
from gpustack_operator.controllers import instance_type
from gpustack_operator.kube.resources import CLUSTER_QUEUES, DEVICES, INSTANCE_TYPES

from .chain_world import World, world

ACC, OS, ARCH = "feature.gpustack.ai/acceleratable", "kubernetes.io/os", "kubernetes.io/arch"
G, A, TYPE = "general.feature.gpustack.ai/", "acceleratable.feature.gpustack.ai/", "resource.gpustack.ai/type"
T4 = "gpustack--nvidia-tesla-t4-linux-amd64"
CPU = "gpustack--generic-linux-amd64"
FINALIZER = "gpustack.ai/controlled"
D = 1_600_000


def an_instance_type(name: str = T4, **spec: Any) -> JSONObj:
    base = {"acceleratable": True, "acceleratorGroup": "nvidia-tesla-t4", "generalGroup": "generic"}
    if name == CPU:
        base = {"acceleratable": False, "generalGroup": "generic"}
    unit = {"unitResources": {"cpu": "4", "ram": "16Gi"}, "localStorage": "100Gi"}
    return {
        "metadata": {"name": name, "uid": f"uid-{name}"},
        "spec": {**base, "os": "linux", "arch": "amd64", **unit, **spec},
    }


def ledger(
    node: str, *remaining: int, mode: int = 0, sliceable: bool = True, managed: str = "true"
) -> JSONObj:
    group: JSONObj = {"id": "tesla-t4", "manufacturer": "nvidia", "name": "Tesla T4", "memory": 15360}
    if sliceable:
        group["acceleratorsFeature"] = {"logicalSliced": {"maxSize": 128}}
    rows = [
        {"id": str(n), "index": n, "mode": mode if r < D else 0, "remaining": r}
        for n, r in enumerate(remaining)
    ]
    labels = {f"{A}nvidia-tesla-t4": "true", OS: "linux", ARCH: "amd64", "gpustack.ai/managed": managed}
    return {
        "metadata": {"name": node, "labels": labels},
        "spec": {"groups": [group]},
        "status": {"groups": [{"id": "tesla-t4", "manufacturer": "nvidia", "accelerators": rows}]},
    }


def active(w: World, name: str = T4, status: str = "True") -> None:
    """Kueue reports on the queue."""
    w.update(
        CLUSTER_QUEUES,
        name,
        {"status": {"conditions": [{"type": "Active", "status": status, "reason": "Ready"}]}},
    )


def status(w: World, name: str = T4) -> JSONObj:
    return (w.get(INSTANCE_TYPES, name) or {}).get("status") or {}


def spec_of(w: World, name: str = T4) -> JSONObj:
    return (w.get(CLUSTER_QUEUES, name) or {}).get("spec") or {}


async def test_an_instance_type_gets_a_finalizer_and_an_isolated_queue_labelled_for_its_pool() -> None:
    async with world(instance_type.controller) as w:
        w.put(INSTANCE_TYPES, an_instance_type())
        await w.settle(lambda: w.get(CLUSTER_QUEUES, T4) is not None)
        queue = w.get(CLUSTER_QUEUES, T4)
        assert queue is not None
        assert queue["metadata"]["labels"] == {
            ACC: "true",
            OS: "linux",
            ARCH: "amd64",
            f"{A}nvidia-tesla-t4": "true",
            TYPE: "instancetypes",
        }
        assert queue["spec"]["namespaceSelector"] == {}
        assert queue["spec"]["stopPolicy"] == "None"
        assert "cohortName" not in queue["spec"]
        assert (w.get(INSTANCE_TYPES, T4) or {})["metadata"]["finalizers"] == [FINALIZER]
        assert {x.field_manager for x in w.client.writes} == {"gpustack-instance-type"}
        assert status(w)["phase"] == "Activating"
        assert status(w)["entrance"] == "gpustack-fnv64-6b371caa2da0b799"


async def test_status_shows_the_pool_ledger_as_three_views_and_follows_kueue() -> None:
    async with world(instance_type.controller) as w:
        w.put(DEVICES, ledger("n1", D, D, 0, mode=1))
        w.put(DEVICES, ledger("n2", D, 800_000, mode=3))
        w.put(DEVICES, ledger("unmanaged", D, D, D, managed="false"))
        w.put(INSTANCE_TYPES, an_instance_type())
        await w.settle(lambda: w.get(CLUSTER_QUEUES, T4) is not None)
        active(w)
        await w.settle(lambda: status(w).get("phase") == "Active")
        assert status(w)["accelerator"] == {"capacity": "5", "remaining": "3", "onceMaxRequest": "2"}
        assert status(w)["acceleratorShared"] == {"capacity": "50", "remaining": "30", "onceMaxRequest": "20"}
        assert status(w)["acceleratorSliced"] == {
            "capacity": "500",
            "remaining": "350",
            "onceMaxRequest": "100",
        }

        w.put(DEVICES, ledger("n2", 0, 800_000, mode=1))  # an allocation moves the view at once
        await w.settle(lambda: status(w)["accelerator"]["remaining"] == "2")
        assert status(w)["acceleratorSliced"]["remaining"] == "200"


async def test_a_settled_controller_writes_nothing_more() -> None:
    async with world(instance_type.controller) as w:
        w.put(DEVICES, ledger("n1", D))
        w.put(INSTANCE_TYPES, an_instance_type())
        await w.settle(lambda: w.get(CLUSTER_QUEUES, T4) is not None)
        active(w)
        await w.settle(lambda: status(w).get("phase") == "Active")
        start = len(w.client.writes)
        for kind, name in ((INSTANCE_TYPES, T4), (CLUSTER_QUEUES, T4), (DEVICES, "n1")):
            w.informer(kind).add(w.get(kind, name) or {})  # a resync delivers every object again
        await w.settle()
        assert w.writes_since(start) == []


async def test_inactive_holds_the_queue_and_clearing_it_resumes_the_queue() -> None:
    async with world(instance_type.controller) as w:
        w.put(INSTANCE_TYPES, an_instance_type())
        await w.settle(lambda: w.get(CLUSTER_QUEUES, T4) is not None)
        w.update(INSTANCE_TYPES, T4, {"spec": {"inactive": True}})
        await w.settle(lambda: spec_of(w).get("stopPolicy") == "Hold")
        assert status(w)["phase"] == "Inactive"
        w.update(INSTANCE_TYPES, T4, {"spec": {"inactive": False}})
        await w.settle(lambda: spec_of(w).get("stopPolicy") == "None")


async def test_a_queue_drained_by_anyone_marks_the_type_inactive_for_good() -> None:
    async with world(instance_type.controller) as w:
        w.put(INSTANCE_TYPES, an_instance_type())
        await w.settle(lambda: w.get(CLUSTER_QUEUES, T4) is not None)
        w.update(
            CLUSTER_QUEUES, T4, {"spec": {"stopPolicy": "HoldAndDrain"}, "status": {"admittedWorkloads": 1}}
        )
        await w.settle(lambda: (w.get(INSTANCE_TYPES, T4) or {})["spec"].get("inactive") is True)
        assert status(w)["phase"] == "Draining"
        assert status(w)["accelerator"] == {"capacity": "0", "remaining": "0", "onceMaxRequest": "0"}
        assert spec_of(w)["stopPolicy"] == "HoldAndDrain"  # never downgraded to Hold

        w.update(CLUSTER_QUEUES, T4, {"spec": {"stopPolicy": "None"}})  # the pool recovered
        await w.settle(lambda: spec_of(w).get("stopPolicy") == "Hold")  # still inactive: held


async def test_turning_cpu_awareness_on_relabels_the_queue_and_prunes_stale_keys() -> None:
    async with world(instance_type.controller) as w:
        w.put(INSTANCE_TYPES, an_instance_type(generalGroup="amd-25-1"))
        await w.settle(lambda: w.get(CLUSTER_QUEUES, T4) is not None)
        w.update(CLUSTER_QUEUES, T4, {"metadata": {"labels": {f"{G}intel-6-1": "true", "team": "ml"}}})
        await w.settle()
        labels = (w.get(CLUSTER_QUEUES, T4) or {})["metadata"]["labels"]
        assert f"{G}intel-6-1" not in labels
        assert labels["team"] == "ml"
        w.set(aware_cpu_manufacturer="true")
        await w.settle(
            lambda: (w.get(CLUSTER_QUEUES, T4) or {})["metadata"]["labels"].get(f"{G}amd-25-1") == "true"
        )


async def test_a_queue_deleted_under_a_live_type_is_recreated() -> None:
    async with world(instance_type.controller) as w:
        w.put(INSTANCE_TYPES, an_instance_type(name=CPU))
        await w.settle(lambda: w.get(CLUSTER_QUEUES, CPU) is not None)
        w.remove(CLUSTER_QUEUES, CPU)
        await w.settle(lambda: w.get(CLUSTER_QUEUES, CPU) is not None)
        assert [x.verb for x in w.client.of("create")] == ["create", "create"]


async def test_deleting_a_type_deletes_its_queue_and_releases_the_type_once_the_queue_is_gone() -> None:
    async with world(instance_type.controller) as w:
        w.put(INSTANCE_TYPES, an_instance_type())
        await w.settle(lambda: w.get(CLUSTER_QUEUES, T4) is not None)
        w.update(CLUSTER_QUEUES, T4, {"metadata": {"finalizers": ["kueue.x-k8s.io/resource-in-use"]}})
        w.update(INSTANCE_TYPES, T4, {"metadata": {"deletionTimestamp": "2025-01-01T00:00:00Z"}})
        await w.settle(
            lambda: (w.get(CLUSTER_QUEUES, T4) or {})["metadata"].get("deletionTimestamp") is not None
        )
        assert status(w)["phase"] == "Inactive"
        assert status(w)["phaseMessage"] == "instance type is terminating"
        assert w.get(INSTANCE_TYPES, T4) is not None  # held while the queue lives

        w.update(CLUSTER_QUEUES, T4, {"metadata": {"finalizers": None}})
        w.remove(CLUSTER_QUEUES, T4)  # Kueue let it go
        await w.settle(lambda: w.get(INSTANCE_TYPES, T4) is None)
        assert [x.key for x in w.client.of("delete")] == [T4]


async def test_a_type_that_names_no_pool_gets_a_warning_event_and_no_queue() -> None:
    async with world(instance_type.controller) as w:
        w.put(INSTANCE_TYPES, an_instance_type(os=""))
        await w.settle(lambda: bool(w.recorder.events))
        (_, kind, reason, note) = w.recorder.events[0]
        assert (kind, reason) == ("Warning", "InvalidSpec")
        assert "spec.os" in note
        assert w.get(CLUSTER_QUEUES, T4) is None


async def test_an_unreadable_ledger_is_left_out_and_the_rest_still_counts() -> None:
    async with world(instance_type.controller) as w:
        broken = ledger("bad", D)
        broken["status"]["groups"][0]["accelerators"][0]["remaining"] = "lots"
        w.put(DEVICES, broken)
        w.put(DEVICES, ledger("good", D, D))
        w.put(INSTANCE_TYPES, an_instance_type())
        await w.settle(lambda: w.get(CLUSTER_QUEUES, T4) is not None)
        await w.settle(lambda: "accelerator" in status(w))
        assert status(w)["accelerator"]["capacity"] == "2"
