"""Per-card admission check: Kueue's admission rate with our check vs the same queue without it.

Run: `.venv/bin/python -m tests.bench.bench_admission` (starts and stops its own sandbox; about ten
minutes on the 2-core development machine).

The pool: 250 Devices ledgers of 8 free H100 cards each (2,000 cards, written straight to the API server
as the device manager's builders make them) and one ResourceFlavor selecting them. Two ClusterQueues over
that flavor with room for every card, identical except that one names the `gpustack-node-devices`
AdmissionCheck in its admissionChecksStrategy; a LocalQueue for each in its own namespace. The check's
two controllers (its decisions and its Active condition) run in-process on real informers, with their own
client at the worker's default rate limit (50 requests/s, burst 100), as `gpustack-operator worker` runs
them.

Each run submits 2,000 single-card batch/v1 Jobs (one Pod asking `nvidia.com/gpu: 1`; Kueue suspends
them, admits them, and unsuspends them; their Pods select no node, so they stay Pending and the
promises the check makes stay held, which is why the pool has a card for every Job) and measures, from
the first create to the 2,000th Workload `Admitted=True`, admitted workloads per second. The queue
without the check runs first and last (a drift check of the machine); the ratio is with-check over the
mean of the two runs without. Goal: >= 0.9x. Kueue's own published figures are 42.7-50.9 workloads/s on
envtest.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from functools import partial
from typing import Any

from tests.bench.bench_admission_decision import FLAVOR, flavor, write_ledgers
from tests.bench.bench_admission_decision import fleet as pool_nodes
from tests.bench.bench_chain import bounded, control_only_sandbox, wait_for
from tests.integration.chain_support import running_controllers

from gpustack_operator.api.keys import CREDITS_PREFIX
from gpustack_operator.api.keys import NODE_DEVICES_ADMISSION_CHECK as CHECK
from gpustack_operator.controllers import admission_check, admission_check_active
from gpustack_operator.kube import errors, resources
from gpustack_operator.kube.client import Client, connect
from gpustack_operator.kube.informer import Informer
from gpustack_operator.nodefeature.credits import CREDITS_PER_CARD
from gpustack_operator.runtime import Supervisor
from gpustack_operator.worker.prepare import install_admission_check

JSONObj = dict[str, Any]
JOBS_API = resources.Resource("batch", "v1", "jobs", "Job", namespaced=True)
GOAL = 0.9


def cluster_queue(name: str, cards: int, checked: bool) -> JSONObj:
    spec: JSONObj = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": [f"{CREDITS_PREFIX}nvidia"],
                "flavors": [
                    {
                        "name": FLAVOR,
                        "resources": [
                            {"name": f"{CREDITS_PREFIX}nvidia", "nominalQuota": str(cards * CREDITS_PER_CARD)}
                        ],
                    }
                ],
            }
        ],
    }
    if checked:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": CHECK}]}
    res = resources.CLUSTER_QUEUES
    return {"apiVersion": res.api_version, "kind": res.kind, "metadata": {"name": name}, "spec": spec}


def job(name: str, queue: str) -> JSONObj:
    container = {"name": "main", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {
            "suspend": True,
            "completions": 1,
            "parallelism": 1,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {"bench.gpustack.ai/nowhere": "true"},
                    "containers": [container],
                }
            },
        },
    }


async def queue_ready(kube: Client, name: str) -> bool:
    queue = await kube.get_or_none(resources.CLUSTER_QUEUES, name)
    conditions = ((queue or {}).get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Active" and c.get("status") == "True" for c in conditions)


def admitted(workloads: Informer) -> int:
    found = 0
    for wl in workloads.store.list():
        conditions = (wl.get("status") or {}).get("conditions") or []
        found += any(c.get("type") == "Admitted" and c.get("status") == "True" for c in conditions)
    return found


async def one_run(kube: Client, label: str, queue: str, jobs: int) -> float:
    """Admitted workloads per second for `jobs` Jobs into `queue` (its LocalQueue in namespace `label`)."""
    ns = label
    await kube.create(resources.NAMESPACES, {"metadata": {"name": ns}})
    lq = resources.LOCAL_QUEUES
    local = {"apiVersion": lq.api_version, "kind": lq.kind, "metadata": {"name": "q"}}
    await kube.create(lq, local | {"spec": {"clusterQueue": queue}}, ns)
    workloads = Informer(kube, resources.WORKLOADS, namespace=ns)  # counted from a watch, not lists
    async with Supervisor(f"{label} workloads") as sup:
        sup.spawn("informer", workloads.run)
        await workloads.wait_synced()
        started = time.perf_counter()
        await bounded((partial(kube.create, JOBS_API, job(f"j-{i:04d}", "q"), ns) for i in range(jobs)), 16)
        submitted = time.perf_counter() - started
        count, last = 0, 0.0
        while count < jobs:
            await asyncio.sleep(0.2)
            count = admitted(workloads)
            if time.perf_counter() - started > 1800:
                raise TimeoutError(f"{label}: {count} of {jobs} admitted after 30 min")
            if time.perf_counter() - last > 10:
                print(f"  {label}: {count:5d} admitted at {time.perf_counter() - started:6.1f}s", flush=True)
                last = time.perf_counter()
        spent = time.perf_counter() - started
    rate = jobs / spent
    print(f"{label}: {jobs} admitted in {spent:.1f}s ({rate:.1f}/s; submitting took {submitted:.1f}s)")
    await clear(kube, ns)
    return rate


async def clear(kube: Client, ns: str) -> None:
    """The run's Jobs, Pods and Workloads deleted in one request per kind (the namespace controller and
    the garbage collector would take minutes at kube-controller-manager's request rate), then the
    namespace."""
    for res in (JOBS_API, resources.PODS, resources.WORKLOADS):
        body = {"propagationPolicy": "Background"}
        await kube.request("DELETE", res.path(namespace=ns), body=body, timeout=300)
    await kube.delete(resources.NAMESPACES, ns)
    await wait_for(lambda: _gone(kube, ns), 900, f"namespace {ns} deleted", interval=2.0)
    print(f"  {ns}: cleared")


async def _gone(kube: Client, ns: str) -> bool:
    return await kube.get_or_none(resources.NAMESPACES, ns) is None


async def run(jobs: int) -> None:
    async with control_only_sandbox("ba-") as box, await connect(box.kubeconfig) as kube:
        nodes = pool_nodes((jobs + 7) // 8)
        labels = await write_ledgers(kube, nodes, seed=0, fill=False)
        await kube.create(resources.RESOURCE_FLAVORS, flavor(labels))
        print(f"pool: {len(nodes)} ledgers of 8 free cards written, flavor {FLAVOR}")
        await install_admission_check(kube)
        await kube.create(resources.CLUSTER_QUEUES, cluster_queue("plain", jobs, checked=False))
        await kube.create(resources.CLUSTER_QUEUES, cluster_queue("checked", jobs, checked=True))
        factories = [admission_check.controller, admission_check_active.controller]
        worker = await connect(box.kubeconfig, qps=50.0, burst=100)
        try:
            async with running_controllers(worker, factories):
                for name in ("plain", "checked"):
                    await wait_for(partial(queue_ready, kube, name), 120, f"ClusterQueue {name} Active")
                without = [await one_run(kube, "without-1", "plain", jobs)]
                with_check = await one_run(kube, "with-check", "checked", jobs)
                without.append(await one_run(kube, "without-2", "plain", jobs))
        finally:
            await worker.close()
    baseline = sum(without) / len(without)
    ratio = with_check / baseline
    verdict = "meets the goal" if ratio >= GOAL else "MISSES the goal"
    print(f"\n{jobs} single-card Jobs through Kueue, admitted workloads per second:")
    print(f"  without the check  {without[0]:6.1f}/s then {without[1]:6.1f}/s (mean {baseline:.1f}/s)")
    print(f"  with the check     {with_check:6.1f}/s")
    print(f"  ratio {ratio:.2f} (goal >= {GOAL}x): {verdict}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000, help="Jobs per run (the pool gets a card for each)")
    args = parser.parse_args()
    try:
        asyncio.run(run(args.jobs))
    except errors.KubeError as e:
        raise SystemExit(f"bench_admission: {e}") from e
