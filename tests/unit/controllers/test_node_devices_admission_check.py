"""The per-card AdmissionCheck under the real manager: Ready or Retry from the ledgers, promises, Active.

ResourceFlavors and Devices ledgers (as the chain and the device manager write them) and Workloads (as Kueue
writes them) are fed through scripted informers; the check's status applies go to a server-like client that
merges them back by entry name and refuses a stale resourceVersion.
"""

from __future__ import annotations

from typing import Any

from gpustack_operator.api.json import JSONObj
from gpustack_operator.controllers import node_devices_admission_check, node_devices_admission_check_active
from gpustack_operator.kube.resources import (
    ADMISSION_CHECKS,
    CLUSTER_QUEUES,
    DEVICES,
    NODES,
    RESOURCE_FLAVORS,
    WORKLOADS,
)

from .chain_world import World, world

KEY = "acceleratable.feature.gpustack.ai/nvidia-h100"
FLAVOR, NS = "gpustack--nvidia-h100-linux-amd64-8d", "team"
CHECK, D = "gpustack-node-devices", 1_600_000
RETRY = "no node in the assigned flavor pool currently has enough free cards; will retry as capacity frees"
READY = "the assigned flavor pool has enough free cards to place the request"
SELECTOR = {
    "gpustack.ai/managed": "true",
    "kubernetes.io/os": "linux",
    "kubernetes.io/arch": "amd64",
    KEY: "true",
}


def a_flavor() -> JSONObj:
    labels = {KEY: "true", "feature.gpustack.ai/acceleratable": "true", "resource.gpustack.ai/type": "nodes"}
    return {
        "metadata": {"name": FLAVOR, "labels": labels},
        "spec": {"nodeLabels": {**SELECTOR, f"{KEY}.count": "8"}},
    }


def devices(node: str, remaining: list[int], unhealthy: frozenset[int] = frozenset()) -> JSONObj:
    ids = [f"{node}-gpu{n}" for n in range(len(remaining))]
    accs = [{"id": cid, "index": n, "status": {"unhealthy": n in unhealthy}} for n, cid in enumerate(ids)]
    rows = [
        {"id": cid, "index": n, "mode": 0 if left == D else 1, "remaining": left}
        for n, (cid, left) in enumerate(zip(ids, remaining, strict=True))
    ]
    group = {"id": "h100", "manufacturer": "nvidia"}
    return {
        "metadata": {"name": node, "labels": SELECTOR},
        "spec": {"groups": [{**group, "accelerators": accs}]},
        "status": {"groups": [{**group, "accelerators": rows}]},
    }


def free(n: int, held: int = 0) -> list[int]:
    return [D] * n + [0] * held


def workload(name: str, cards: int, *conditions: str, state: str = "Pending") -> JSONObj:
    pod = {
        "spec": {"containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": str(cards)}}}]}
    }
    conds = [{"type": c, "status": "True", "reason": c} for c in ("QuotaReserved", *conditions)]
    flavors = {"credits.gpustack.ai/nvidia": FLAVOR, "cpu": FLAVOR}
    entry = {"name": CHECK, "state": state, "message": "", "lastTransitionTime": "2025-01-01T00:00:00Z"}
    return {
        "metadata": {"name": name, "namespace": NS},
        "spec": {"podSets": [{"name": "main", "count": 1, "template": pod}]},
        "status": {
            "conditions": conds,
            "admission": {
                "clusterQueue": "q",
                "podSetAssignments": [{"name": "main", "flavors": flavors, "count": 1}],
            },
            "admissionChecks": [
                {"name": "other", "state": "Ready", "message": "", "lastTransitionTime": "x"},
                entry,
            ],
        },
    }


def entry(w: World, name: str) -> JSONObj:
    wl = w.get(WORKLOADS, f"{NS}/{name}") or {}
    return next(e for e in wl["status"]["admissionChecks"] if e["name"] == CHECK)


def state(w: World, name: str) -> str:
    return str(entry(w, name)["state"])


async def pool(w: World, a: list[int], b: list[int]) -> None:
    w.put(RESOURCE_FLAVORS, a_flavor())
    w.put(DEVICES, devices("node-a", a))
    w.put(DEVICES, devices("node-b", b))
    await w.settle()


async def test_cards_are_counted_per_node_and_a_freed_node_turns_retry_into_ready() -> None:
    async with world(node_devices_admission_check.controller) as w:
        await pool(w, free(3, held=5), free(2, held=6))
        w.put(WORKLOADS, workload("five", 5))
        await w.settle(lambda: state(w, "five") != "Pending")
        retry = entry(w, "five")
        assert retry | {"lastTransitionTime": "t"} == {
            "name": CHECK,
            "state": "Retry",
            "message": RETRY,
            "requeueAfterSeconds": 30,
            "lastTransitionTime": "t",
        }
        [write] = w.client.of("apply/status", "Workload")
        assert write.field_manager == "gpustack-node-devices"
        assert write.body is not None
        assert write.body["metadata"]["resourceVersion"]
        assert [e["name"] for e in write.body["status"]["admissionChecks"]] == [CHECK]  # only our entry
        w.put(DEVICES, devices("node-a", free(5, held=3)))
        await w.settle(lambda: state(w, "five") == "Ready")
        assert entry(w, "five")["message"] == READY
        assert retry["lastTransitionTime"] != "2025-01-01T00:00:00Z"  # moved with the state


async def test_the_last_free_cards_are_promised_to_one_workload_only() -> None:
    async with world(node_devices_admission_check.controller) as w:
        await pool(w, free(4, held=4), free(0, held=8))
        w.put(WORKLOADS, workload("one", 4))
        w.put(WORKLOADS, workload("two", 4))
        await w.settle(lambda: "Pending" not in (state(w, "one"), state(w, "two")))
        assert sorted([state(w, "one"), state(w, "two")]) == ["Ready", "Retry"]
        first, second = ("one", "two") if state(w, "one") == "Ready" else ("two", "one")
        # the first finishes before its Pod ever took the cards; Kueue requeues the second (Pending again)
        w.update(
            WORKLOADS,
            f"{NS}/{first}",
            {"status": {"conditions": workload(first, 4, "Finished")["status"]["conditions"]}},
        )
        w.update(WORKLOADS, f"{NS}/{second}", workload(second, 4))
        await w.settle(lambda: state(w, second) == "Ready")


async def test_the_promise_holds_until_the_ledger_shows_the_cards_taken() -> None:
    async with world(node_devices_admission_check.controller) as w:
        await pool(w, free(4, held=4), free(0, held=8))
        w.put(WORKLOADS, workload("one", 2))
        await w.settle(lambda: state(w, "one") == "Ready")
        w.update(WORKLOADS, f"{NS}/one", workload("one", 2, "Admitted", state="Ready"))
        w.put(WORKLOADS, workload("two", 3))
        await w.settle(lambda: state(w, "two") == "Retry")  # 4 free in the ledger, 2 of them promised
        w.put(DEVICES, devices("node-a", [0, 0, D, D, D, 0, 0, 0]))  # "one" started; another card freed
        w.update(WORKLOADS, f"{NS}/two", workload("two", 3))
        await w.settle(lambda: state(w, "two") == "Ready")


async def test_a_ready_workload_not_admitted_yet_is_promised_its_cards_again_after_a_restart() -> None:
    async with world(node_devices_admission_check.controller) as w:
        # a new controller (empty promise book) finds "one" Ready from before, Kueue not having admitted it
        await pool(w, free(4, held=4), free(0, held=8))
        w.put(WORKLOADS, workload("one", 4, state="Ready"))
        await w.settle()
        assert w.client.writes == []
        w.put(WORKLOADS, workload("two", 4))
        await w.settle(lambda: state(w, "two") == "Retry")
        assert state(w, "one") == "Ready"


async def test_unhealthy_cards_do_not_count() -> None:
    async with world(node_devices_admission_check.controller) as w:
        w.put(RESOURCE_FLAVORS, a_flavor())
        w.put(DEVICES, devices("node-a", free(8), unhealthy=frozenset({0, 1, 2, 3})))
        w.put(WORKLOADS, workload("five", 5))
        await w.settle(lambda: state(w, "five") == "Retry")


async def test_nothing_is_written_at_rest_nor_on_evicted_finished_or_admitted_workloads() -> None:
    async with world(node_devices_admission_check.controller) as w:
        await pool(w, free(8), free(8))
        w.put(WORKLOADS, workload("ready", 1))
        await w.settle(lambda: state(w, "ready") == "Ready")
        start = len(w.client.writes)
        w.update(WORKLOADS, f"{NS}/ready", {"metadata": {"labels": {"touched": "yes"}}})
        for name, condition in (("evicted", "Evicted"), ("finished", "Finished"), ("admitted", "Admitted")):
            w.put(
                WORKLOADS,
                workload(name, 1, condition, state="Retry" if condition != "Admitted" else "Pending"),
            )
        w.put(WORKLOADS, workload("inactive", 1) | {"spec": {**workload("x", 1)["spec"], "active": False}})
        w.put(DEVICES, devices("node-b", free(7, held=1)))
        await w.settle()
        assert w.writes_since(start) == []


def unlisted(name: str, cards: int, queue: str) -> JSONObj:
    """A workload whose quota `queue` reserved before Kueue's workload controller listed any check."""
    wl = workload(name, cards)
    wl["status"]["admission"]["clusterQueue"] = queue
    wl["status"]["admissionChecks"] = []
    return wl


def cluster_queue(name: str, *rules: JSONObj) -> JSONObj:
    return {"metadata": {"name": name}, "spec": {"admissionChecksStrategy": {"admissionChecks": list(rules)}}}


async def test_the_entry_is_written_once_quota_is_reserved_without_waiting_for_kueue_to_list_it() -> None:
    """Kueue's workload controller lags its scheduler under load: a queue that names the check gets our
    decision right after the reservation; a queue that does not, or names it for other flavors, none."""
    async with world(node_devices_admission_check.controller) as w:
        await pool(w, free(8), free(8))
        w.put(CLUSTER_QUEUES, cluster_queue("checked", {"name": CHECK}))
        w.put(CLUSTER_QUEUES, cluster_queue("plain", {"name": "other"}))
        w.put(CLUSTER_QUEUES, cluster_queue("elsewhere", {"name": CHECK, "onFlavors": ["another-flavor"]}))
        w.put(WORKLOADS, unlisted("early", 2, "checked"))
        w.put(WORKLOADS, unlisted("plain", 2, "plain"))
        w.put(WORKLOADS, unlisted("elsewhere", 2, "elsewhere"))
        await w.settle(
            lambda: any(
                e["name"] == CHECK for e in w.get(WORKLOADS, f"{NS}/early")["status"]["admissionChecks"]
            )
        )
        written = entry(w, "early")
        assert (written["state"], written["message"]) == ("Ready", READY)
        assert written["lastTransitionTime"]
        await w.settle()
        assert [write.body["metadata"]["name"] for write in w.client.of("apply/status", "Workload")] == [
            "early"
        ]


async def test_the_node_devices_check_is_kept_active() -> None:
    async with world(node_devices_admission_check_active.controller) as w:
        check = {
            "metadata": {"name": CHECK, "generation": 1},
            "spec": {"controllerName": "worker.gpustack.ai/node-devices"},
        }
        w.put(ADMISSION_CHECKS, check)
        w.put(
            ADMISSION_CHECKS, {"metadata": {"name": "foreign"}, "spec": {"controllerName": "example.com/x"}}
        )
        await w.settle(lambda: bool((w.get(ADMISSION_CHECKS, CHECK) or {}).get("status")))
        [active] = (w.get(ADMISSION_CHECKS, CHECK) or {})["status"]["conditions"]
        assert active | {"lastTransitionTime": "t"} == {
            "type": "Active",
            "status": "True",
            "reason": "Ready",
            "message": "The admission check is active",
            "observedGeneration": 1,
            "lastTransitionTime": "t",
        }
        assert [(x.verb, x.key, x.field_manager) for x in w.client.writes] == [
            ("apply/status", CHECK, "gpustack-node-devices")
        ]
        w.update(ADMISSION_CHECKS, CHECK, {"metadata": {"finalizers": ["kueue.x-k8s.io/resource-in-use"]}})
        await w.settle()
        assert len(w.client.writes) == 1


def node(name: str, hostname: str) -> JSONObj:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": hostname}}}


def pods_of(wl: Any, count: int) -> Any:
    wl["spec"]["podSets"][0]["count"] = count
    wl["status"]["admission"]["podSetAssignments"][0]["count"] = count
    return wl


def pinned(e: JSONObj) -> list[JSONObj]:
    return list(e.get("podSetUpdates") or [])


async def test_a_ready_podset_planned_on_one_node_is_pinned_to_that_nodes_hostname() -> None:
    async with world(node_devices_admission_check.controller) as w:
        w.put(NODES, node("node-a", "host-a"))
        w.put(NODES, node("node-b", "host-b"))
        await pool(w, free(4, held=4), free(8))
        w.put(WORKLOADS, workload("five", 5))
        await w.settle(lambda: state(w, "five") == "Ready")
        assert pinned(entry(w, "five")) == [
            {"name": "main", "nodeSelector": {"kubernetes.io/hostname": "host-b"}}
        ]


async def test_a_podset_the_plan_spreads_over_two_nodes_is_not_pinned_to_either() -> None:
    async with world(node_devices_admission_check.controller) as w:
        await pool(w, free(4, held=4), free(4, held=4))
        w.put(WORKLOADS, pods_of(workload("pair", 4), 2))
        await w.settle(lambda: state(w, "pair") == "Ready")
        assert pinned(entry(w, "pair")) == []


async def test_a_podset_whose_template_selects_a_hostname_gets_no_second_one() -> None:
    async with world(node_devices_admission_check.controller) as w:
        await pool(w, free(8), free(0, held=8))
        wl: Any = workload("own", 2)
        wl["spec"]["podSets"][0]["template"]["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "node-a"}
        w.put(WORKLOADS, wl)
        await w.settle(lambda: state(w, "own") == "Ready")
        assert pinned(entry(w, "own")) == []


async def test_after_a_restart_a_pinned_ready_workload_is_promised_the_cards_of_its_pinned_node() -> None:
    async with world(node_devices_admission_check.controller) as w:
        # "one" was pinned to node-b before the restart; a fresh plan would have picked node-a (tie, by name)
        await pool(w, free(4, held=4), free(4, held=4))
        one: Any = workload("one", 4, state="Ready")
        one["status"]["admissionChecks"][1]["podSetUpdates"] = [
            {"name": "main", "nodeSelector": {"kubernetes.io/hostname": "node-b"}}
        ]
        w.put(WORKLOADS, one)
        await w.settle()
        assert w.client.writes == []
        w.put(WORKLOADS, workload("two", 4))
        await w.settle(lambda: state(w, "two") == "Ready")
        assert pinned(entry(w, "two")) == [
            {"name": "main", "nodeSelector": {"kubernetes.io/hostname": "node-a"}}
        ]
