"""`instancetypes/fit` on the sandbox, through kube-apiserver with the real kubectl (issue 27, part 1).

A worker process serves the aggregated API and runs the chain (real Kueue v0.17, kwok H100 nodes h100-0 and
h100-1 with device managers). Each round sets a background of whole-card blockers (plain Pods, no queue:
the ledger shows them, as any Pod), asks `kubectl create --raw .../instancetypes/<H100>/fit -f req.json`
about a generated request (exclusive, shared or sliced; 1-3 Pods), then submits the same request as a
batch/v1 Job through the pool's entrance LocalQueue: the check must pass it if and only if the answer said
it fits, and each Pod of a passed Job must land on a node the answer named; an answer that Kueue's quota
cannot hold it (`NoQuota`: more cards than the pool has, 3 x 6 say) must be Kueue's own verdict, the Workload
pending on insufficient quota and never checked. Each round starts once the last one's Workload is gone
and the ClusterQueue reserves nothing (Kueue keeps a Retry workload's quota until it is deleted, and the
answer reads that reservation). `FIT_REQUESTS` rounds (default 12: under 2 s a round, ~15 s with a new
background, on the 2-core machine; FIT_REQUESTS=100 runs the issue's 100), `FIT_SEED` replays a run.
Then one refusal with its reason (5 cards where no node has more than 3 free),
and a user without `create` on `instancetypes/fit` gets a 403.
"""

from __future__ import annotations

import json
import os
import random
import tempfile
import time
import uuid
from functools import partial
from typing import Any

from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.quantity import Quantity
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import CLUSTER_QUEUES, INSTANCE_TYPES, PODS, WORKLOADS
from tests.helpers import eventually
from tests.integration.test_admission_binding import JOBS, end_job
from tests.integration.test_admission_check import (
    H100,
    LONG,
    NODES,
    admitted,
    all_free,
    block,
    check_entry,
    entrance_ready,
    frees,
    remove_pods,
    workload_of,
)
from tests.integration.test_worker_instances import served, space
from tests.integration.worker_support import Kubectl

__all__ = ["served", "space"]

REQUESTS = int(os.environ.get("FIT_REQUESTS", "12"))
FIT = f"/apis/worker.gpustack.ai/v1/instancetypes/{H100}/fit"


def say(line: str) -> None:
    print(f"[fit] {line}", flush=True)


def generated(rng: random.Random) -> tuple[str, dict[str, str], int]:
    """(shape, one Pod's limits, Pods) in one of the three modes."""
    mode = rng.choice(("exclusive", "shared", "sliced"))
    pods = rng.randint(1, 3)
    if mode == "exclusive":
        cards = rng.randint(1, 8)
        return f"{pods} x {cards} cards", {"nvidia.com/gpu": str(cards)}, pods
    if mode == "shared":
        shares = rng.randint(1, 4)
        return f"{pods} x {shares} shares", {"nvidia.com/gpu.shared": str(shares)}, pods
    pct = rng.choice((10, 25, 50, 60, 100))
    # The units are named too, as the Pod webhook will fold them (pct x 16,000): Kueue builds the Workload
    # from the Job's template, which no webhook folds, so without them Kueue and the check would count
    # the slice as 1 unit (found by this test; the fit recomputes the units from the memory either way).
    limits = {
        "nvidia.com/gpu.sliced": "1",
        "nvidia.com/gpu.sliced.memory-percentage": str(pct),
        "nvidia.com/gpu.sliced.units": str(pct * 16_000),
    }
    return f"{pods} x {pct}% slice", limits, pods


def job(name: str, queue: str, limits: dict[str, str], pods: int) -> JSONObj:
    container = {"name": "main", "image": "busybox", "resources": {"limits": limits}}
    template = {
        "spec": {"restartPolicy": "Never", "tolerations": [{"operator": "Exists"}], "containers": [container]}
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {"parallelism": pods, "completions": pods, "backoffLimit": 0, "template": template},
    }


async def ask(kubectl: Kubectl, spec: JSONObj, *args: str) -> tuple[int, str, str]:
    body = {"apiVersion": "worker.gpustack.ai/v1", "kind": "InstanceTypeFit", "spec": spec}
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(body, f)
        f.flush()
        return await kubectl.run("create", "--raw", FIT, "-f", f.name, *args)


async def answer_of(kubectl: Kubectl, spec: JSONObj) -> JSONObj:
    rc, out, err = await ask(kubectl, spec)
    assert rc == 0, err
    answer: JSONObj = json.loads(out)
    assert answer["kind"] == "InstanceTypeFit"
    return answer["status"]


def quota_refused(wl: JSONObj | None) -> bool:
    """Kueue's scheduler found no flavor with quota for the Workload (its QuotaReserved reason)."""
    found = [
        c for c in ((wl or {}).get("status") or {}).get("conditions") or [] if c["type"] == "QuotaReserved"
    ]
    return (
        bool(found) and found[0]["status"] == "False" and "insufficient quota" in found[0].get("message", "")
    )


async def decided(kube: Client, ns: str, name: str) -> tuple[str, JSONObj] | None:
    """The Job's Workload once the chain has decided on it: the check's state (Ready or Retry), or
    "NoQuota" when Kueue's scheduler left it pending for want of quota (the check then never sees it)."""
    wl = await workload_of(kube, ns, name)
    if wl is None:
        return None
    state = check_entry(wl).get("state")
    if state in ("Ready", "Retry"):
        return str(state), wl
    return ("NoQuota", wl) if quota_refused(wl) else None


async def reserves_nothing(kube: Client, ns: str) -> bool:
    """No Workload left in the namespace, and the pool's ClusterQueue reserves no quota (what the answer's
    Kueue part reads)."""
    if await kube.list(WORKLOADS, ns):
        return False
    queue = await kube.get(CLUSTER_QUEUES, H100)
    totals = [
        Quantity.parse(str(res.get("total", "0"))).value()
        for flavor in (queue.get("status") or {}).get("flavorsReservation") or []
        for res in flavor.get("resources") or []
    ]
    return not any(totals)


async def placed(kube: Client, ns: str, name: str, pods: int) -> list[str] | None:
    found = await kube.list(PODS, ns, label_selector=f"job-name={name}")
    nodes = [p["spec"].get("nodeName") for p in found]
    return nodes if len(nodes) == pods and all(nodes) else None


async def background(
    kube: Client, ns: str, rng: random.Random, tag: str
) -> tuple[list[str], tuple[int, ...]]:
    """Whole-card blockers, a random number per node; returns them and the free cards they leave."""
    counts = {node: rng.choice((0, 2, 4, 5, 6, 7, 8)) for node in NODES}
    names = await block(kube, ns, counts, tag=tag)
    return names, tuple(8 - counts[node] for node in NODES)


async def frees_are(kube: Client, want: tuple[int, ...]) -> bool:
    return await frees(kube) == want


async def test_1_each_answer_is_what_the_chain_then_does_with_the_same_request(
    kube: Client, kubectl: Kubectl, space: str
) -> None:
    ns = space
    seed = int(os.environ.get("FIT_SEED", str(time.time_ns() % 1_000_000)))
    rng = random.Random(seed)
    say(f"seed {seed} (FIT_SEED={seed} replays), {REQUESTS} requests")
    await all_free(kube)
    entrance = (await kube.get(INSTANCE_TYPES, H100))["status"]["entrance"]
    await entrance_ready(kube, ns, entrance)
    await eventually(partial(reserves_nothing, kube, ns), timeout=LONG, what="no Workload nor quota held")
    blockers: list[str] = []
    want: tuple[int, ...] = (8, 8)
    tally: dict[str, int] = {}
    started = time.monotonic()
    try:
        for n in range(REQUESTS):
            clock = time.monotonic()
            if n % 4 == 0:
                await remove_pods(kube, ns, blockers)
                await all_free(kube)
                blockers, want = await background(kube, ns, rng, f"bg{n}")
            shape, limits, pods = generated(rng)
            answer = await answer_of(kubectl, {"pods": pods, "limits": limits})
            name = f"fit-{n}"
            await kube.create(JOBS, job(name, entrance, limits, pods), ns)
            verdict, wl = await eventually(
                partial(decided, kube, ns, name), timeout=LONG, what=f"the chain's decision on {name}"
            )
            said = {"Fits": "Ready", "NoRoom": "Retry", "NoCards": "Retry"}.get(
                answer["reason"], answer["reason"]
            )
            assert verdict == said, (shape, want, answer, verdict, wl.get("status"))
            if verdict == "Ready":
                named = {node["hostname"] for node in answer["nodes"]}
                nodes = await eventually(
                    partial(placed, kube, ns, name, pods), timeout=LONG, what=f"{name}'s Pods bound"
                )
                assert set(nodes) <= named, (shape, nodes, answer["nodes"])
                now = await workload_of(kube, ns, name)
                assert admitted(now) or check_entry(now)["state"] == "Ready"
            elif verdict == "NoQuota":
                assert not admitted(wl), wl.get("status")
                assert check_entry(wl).get("state") != "Ready", wl.get("status")
            tally[answer["reason"]] = tally.get(answer["reason"], 0) + 1
            await end_job(kube, ns, name)
            await eventually(
                partial(reserves_nothing, kube, ns), timeout=LONG, what=f"{name}'s Workload and quota gone"
            )
            await eventually(partial(frees_are, kube, want), timeout=LONG, what=f"free cards back to {want}")
            on = ",".join(sorted(x["hostname"] for x in answer.get("nodes") or []))
            say(
                f"{n + 1}/{REQUESTS}: free {want}, {shape}: {answer['reason']}{' on ' + on if on else ''}"
                f" ({time.monotonic() - clock:.1f}s)"
            )
        say(f"{REQUESTS} requests in {time.monotonic() - started:.1f}s: {tally}")
    finally:
        for left in await kube.list(JOBS, ns):
            await kube.delete(JOBS, left["metadata"]["name"], ns)
        await remove_pods(kube, ns)
    await all_free(kube)


async def test_2_a_refusal_says_which_pod_fits_nowhere_and_the_largest_request(
    kube: Client, kubectl: Kubectl, space: str
) -> None:
    ns = space
    await all_free(kube)
    blockers = await block(kube, ns, dict.fromkeys(NODES, 5), tag="refuse")
    answer = await answer_of(kubectl, {"pods": 1, "resources": {"accelerator": 5}})
    assert answer["fits"] is False
    assert answer["reason"] == "NoRoom"
    assert answer["unplacedPod"] == 1
    assert answer["largestFreeRequest"]["accelerator"] == "3"
    assert "Pod 1 of 1 fits on no node" in answer["message"]
    fits = await answer_of(kubectl, {"pods": 2, "resources": {"accelerator": 3}})
    assert fits["fits"] is True
    assert sorted(node["hostname"] for node in fits["nodes"]) == sorted(NODES)
    assert all(len(node["cards"]) == 3 for node in fits["nodes"])
    rc, _, err = await ask(kubectl, {"pods": 1, "resources": {"accelerator": 1}, "limits": {}})
    assert rc != 0
    assert "exactly one of resources and limits" in err
    await remove_pods(kube, ns, blockers)
    await all_free(kube)


async def test_3_a_user_without_create_on_fit_is_forbidden(
    kube: Client, kubectl: Kubectl, space: str
) -> None:
    user = f"dave-{uuid.uuid4().hex[:4]}"
    role: dict[str, Any] = {
        "metadata": {"name": user},
        "rules": [
            {"apiGroups": ["worker.gpustack.ai"], "resources": ["instancetypes"], "verbs": ["get", "list"]}
        ],
    }
    await kube.request("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", body=role)
    binding = {
        "metadata": {"name": user},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": user},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }
    await kube.request("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", body=binding)
    try:

        async def reads() -> bool:
            rc, _, _ = await kubectl.run(
                "get", "--raw", f"/apis/worker.gpustack.ai/v1/instancetypes/{H100}", f"--as={user}"
            )
            return rc == 0

        await eventually(reads, timeout=30, what=f"{user}'s ClusterRole in effect")
        rc, _, err = await ask(kubectl, {"resources": {"accelerator": 1}}, f"--as={user}")
        assert rc != 0
        assert "Error from server (Forbidden)" in err, err
        assert (
            f'User "{user}" cannot create resource "instancetypes/fit" in API group "worker.gpustack.ai"'
            in err
        )
    finally:
        await kube.request("DELETE", f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{user}")
        await kube.request("DELETE", f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{user}")
