"""Per-card admission check: Kueue's admission rate with our check vs the same queue without it.

Run: `.venv/bin/python -m tests.bench.bench_admission` (starts and stops its own sandbox; about fifteen
minutes on the 2-core development machine). `--kueue-qps` sets Kueue's own client rate (its release
manifests' 50 requests/s by default).

The pool: 250 Devices ledgers of 8 free H100 cards each (2,000 cards, written straight to the API server
as the device manager's builders make them) and one ResourceFlavor selecting them. Two ClusterQueues over
that flavor with room for every card, identical except that one names the `gpustack-node-devices`
AdmissionCheck in its admissionChecksStrategy; a LocalQueue for each in the run's namespace. The check's
two controllers (its decisions and its Active condition) run in a separate process, on real informers and
their own client at the worker's default rate limit (50 requests/s, burst 100), as `gpustack-operator
worker` runs them.

Each run submits 2,000 single-card batch/v1 Jobs (one Pod asking `nvidia.com/gpu: 1`; Kueue suspends
them, admits them, and unsuspends them; their Pods select no node, so they stay Pending and the
promises the check makes stay held, which is why the pool has a card for every Job) and measures, from
the first create to the 2,000th Workload `Admitted=True` (counted from a watch), admitted workloads per
second, and where the time went (each Workload's own transition times: created to quota reserved,
reserved to our check Ready, to admitted). The queue without the check runs first and last (a drift
check of the machine). Between them the checked queue runs twice: with our check, and with a no-op check
(the same reconciler class, process, client rate and status write, but `decide` answers "fits, on no card"
without reading a ledger, planning or promising: `NoOpCheck`). Kueue without any AdmissionCheck admits
with one write per workload; any check costs Kueue a second one (the admission after the check's Ready),
which no check can avoid, so the ratio that measures our part is with our check over the no-op check.
Goal: >= 0.9x the no-op check. The ratio to no check at all is printed beside it. Kueue's own published
figures are 42.7-50.9 workloads/s on envtest.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import signal
import statistics
import sys
import time
from collections.abc import AsyncIterator
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from tests.bench.bench_admission_decision import FLAVOR, flavor, write_ledgers
from tests.bench.bench_admission_decision import fleet as pool_nodes
from tests.bench.bench_chain import bounded, control_only_sandbox
from tests.helpers import eventually
from tests.integration.chain_support import running_controllers

from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import CREDITS_PREFIX
from gpustack_operator.api.keys import NODE_DEVICES_ADMISSION_CHECK as CHECK
from gpustack_operator.controllerkit.cache import Cache
from gpustack_operator.controllerkit.manager import Manager
from gpustack_operator.controllerkit.spec import ControllerSpec
from gpustack_operator.controllers import node_devices_admission_check, node_devices_admission_check_active
from gpustack_operator.controllers.dependencies import Dependencies
from gpustack_operator.controllers.node_devices_admission_check import NAME as CHECK_NAME
from gpustack_operator.kube import errors, resources
from gpustack_operator.kube.client import Client, connect
from gpustack_operator.kube.informer import Informer
from gpustack_operator.rules.admission.placement import Plan
from gpustack_operator.rules.capacity.credits import CREDITS_PER_CARD
from gpustack_operator.rules.capacity.kueueconfig import Tuning
from gpustack_operator.runtime import Supervisor
from gpustack_operator.worker.prepare import install_admission_check

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
        last = 0.0

        def all_admitted() -> bool:
            nonlocal last
            count = admitted(workloads)
            if time.perf_counter() - last > 10:
                print(f"  {label}: {count:5d} admitted at {time.perf_counter() - started:6.1f}s", flush=True)
                last = time.perf_counter()
            return count >= jobs

        await eventually(all_admitted, timeout=1800, interval=0.2, what=f"{label}: {jobs} admitted")
        spent = time.perf_counter() - started
        print(f"  {label}: {stages(workloads.store.list())}")
    rate = jobs / spent
    print(f"{label}: {jobs} admitted in {spent:.1f}s ({rate:.1f}/s; submitting took {submitted:.1f}s)")
    await clear(kube, ns)
    return rate


def stages(workloads: list[JSONObj]) -> str:
    """Where an admission's time went, from the Workloads' own transition times (whole seconds)."""
    waits: dict[str, list[float]] = {"created->reserved": [], "reserved->check Ready": [], "->admitted": []}
    for wl in workloads:
        status = wl.get("status") or {}
        when = {c["type"]: _seconds(c["lastTransitionTime"]) for c in status.get("conditions") or []}
        created = _seconds(wl["metadata"]["creationTimestamp"])
        ready = [_seconds(e["lastTransitionTime"]) for e in status.get("admissionChecks") or []]
        if "QuotaReserved" in when and "Admitted" in when:
            waits["created->reserved"].append(when["QuotaReserved"] - created)
            before = ready[0] if ready else when["QuotaReserved"]
            if ready:
                waits["reserved->check Ready"].append(ready[0] - when["QuotaReserved"])
            waits["->admitted"].append(when["Admitted"] - before)
    return ", ".join(
        f"{k} p50 {statistics.median(v):.0f}s p90 {sorted(v)[int(0.9 * (len(v) - 1))]:.0f}s"
        for k, v in waits.items()
        if v
    )


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


async def clear(kube: Client, ns: str) -> None:
    """The run's Jobs, Pods and Workloads deleted in one request per kind (the namespace controller and
    the garbage collector would take minutes at kube-controller-manager's request rate), then the
    namespace."""
    for res in (JOBS_API, resources.PODS, resources.WORKLOADS):
        body = {"propagationPolicy": "Background"}
        await kube.request("DELETE", res.path(namespace=ns), body=body, timeout=300)
    await kube.delete(resources.NAMESPACES, ns)
    await eventually(lambda: _gone(kube, ns), timeout=900, interval=2.0, what=f"namespace {ns} deleted")
    print(f"  {ns}: cleared")


async def _gone(kube: Client, ns: str) -> bool:
    return await kube.get_or_none(resources.NAMESPACES, ns) is None


def outcomes(manager: Manager) -> dict[str, int]:
    """The check controller's reconciles so far, by outcome (success, conflict, error...)."""
    found: dict[str, int] = {}
    for metric in manager.metrics.registry.collect():
        for sample in metric.samples:
            labels = sample.labels
            ours = labels.get("controller") == CHECK_NAME
            if sample.name == "gpustack_controller_reconcile_total" and ours:
                found[labels["result"]] = found.get(labels["result"], 0) + int(sample.value)
    return found


class TimedWrites:
    """Stands in for the check reconciler's client: forwards everything, times each status write."""

    def __init__(self, inner: Client, cache: Cache) -> None:
        self.inner, self.cache = inner, cache
        self.seconds: list[float] = []
        self.reactions: list[float] = []
        """Seconds from Kueue writing our entry Pending (its lastTransitionTime) to our write."""

    async def apply(self, res: Any, body: JSONObj, **kwargs: Any) -> JSONObj:
        meta = body["metadata"]
        seen = self.cache.get(resources.WORKLOADS, f"{meta['namespace']}/{meta['name']}") or {}
        for entry in (seen.get("status") or {}).get("admissionChecks") or []:
            if entry.get("name") == CHECK and entry.get("state") == "Pending":
                self.reactions.append(time.time() - _seconds(entry["lastTransitionTime"]))
        start = time.perf_counter()
        try:
            return await self.inner.apply(res, body, **kwargs)
        finally:
            self.seconds.append(time.perf_counter() - start)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def summary(self) -> str:
        if not self.seconds:
            return "none"
        ordered, reactions = sorted(self.seconds), sorted(self.reactions) or [0.0]
        p50, p99 = ordered[len(ordered) // 2], ordered[int(0.99 * (len(ordered) - 1))]
        r50, r90 = reactions[len(reactions) // 2], reactions[int(0.9 * (len(reactions) - 1))]
        return (
            f"{len(ordered)}, latency p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms; from Kueue's Pending "
            f"entry to our write (1 s resolution) p50 {r50:.1f} s, p90 {r90:.1f} s"
        )


class NoOpCheck(node_devices_admission_check.NodeDevicesAdmissionReconciler):
    """The baseline check: every workload holding quota is Ready at once; no card is read, planned,
    pinned or promised. Everything else (which workloads, the entry, the write) is the real check's."""

    def decide(self, wl: JSONObj, key: str, pinned: Any = None) -> tuple[Plan | None, dict[str, Any]]:
        return Plan(cards={}, pods=()), {}

    def pins(self, wl: JSONObj, found: Plan) -> dict[str, str]:
        return {}


def no_op_check(deps: Dependencies) -> ControllerSpec:
    """The check's controller as the worker declares it, deciding with NoOpCheck."""
    real = node_devices_admission_check.controller(deps)
    return dataclasses.replace(real, reconciler=NoOpCheck(deps.client, deps.cache, deps.now))


async def check_controllers(kubeconfig: Path, no_op: bool = False) -> None:
    """The check's two controllers on their own client and event loop, until SIGTERM (then their
    reconciles by outcome are printed): this process plays the worker. `no_op`: the decisions are
    NoOpCheck's."""
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    worker = await connect(kubeconfig, qps=50.0, burst=100)
    decisions = no_op_check if no_op else node_devices_admission_check.controller
    factories = [decisions, node_devices_admission_check_active.controller]
    try:
        async with running_controllers(worker, factories) as manager:
            rec = manager.controllers[CHECK_NAME].spec.reconciler
            assert isinstance(rec, node_devices_admission_check.NodeDevicesAdmissionReconciler)
            timed = TimedWrites(rec.client, rec.cache)
            rec.client = timed  # type: ignore[assignment]  # a transparent proxy
            print(f"check controllers running{' (no-op decisions)' if no_op else ''}", flush=True)
            await stop.wait()
            print(f"  the check's reconciles by outcome: {outcomes(manager)}", flush=True)
            print(f"  the check's writes: {timed.summary()}", flush=True)
    finally:
        await worker.close()


async def run(jobs: int, tuning: Tuning) -> None:
    print(
        f"Kueue: client {tuning.qps:g} requests/s, burst {tuning.burst}, "
        f"{tuning.workload_workers} Workload workers"
    )
    async with (
        control_only_sandbox("ba-", kueue_tuning=tuning) as box,
        await connect(box.kubeconfig) as kube,
    ):
        nodes = pool_nodes((jobs + 7) // 8)
        labels = await write_ledgers(kube, nodes, seed=0, fill=False)
        await kube.create(resources.RESOURCE_FLAVORS, flavor(labels))
        print(f"pool: {len(nodes)} ledgers of 8 free cards written, flavor {FLAVOR}")
        await install_admission_check(kube)
        await kube.create(resources.CLUSTER_QUEUES, cluster_queue("plain", jobs, checked=False))
        await kube.create(resources.CLUSTER_QUEUES, cluster_queue("checked", jobs, checked=True))
        await eventually(partial(queue_ready, kube, "plain"), timeout=120, what="ClusterQueue plain Active")
        without = [await one_run(kube, "without-1", "plain", jobs)]
        async with check_process(box.kubeconfig, no_op=False):  # its Active condition opens the queue
            await eventually(
                partial(queue_ready, kube, "checked"), timeout=120, what="ClusterQueue checked Active"
            )
            with_check = await one_run(kube, "with-check", "checked", jobs)
        async with check_process(box.kubeconfig, no_op=True):
            no_op = await one_run(kube, "with-no-op-check", "checked", jobs)
        without.append(await one_run(kube, "without-2", "plain", jobs))
    baseline = sum(without) / len(without)
    ratio = with_check / no_op
    verdict = "meets the goal" if ratio >= GOAL else "MISSES the goal"
    print(f"\n{jobs} single-card Jobs through Kueue, admitted workloads per second:")
    print(f"  without any check  {without[0]:6.1f}/s then {without[1]:6.1f}/s (mean {baseline:.1f}/s)")
    print(f"  with a no-op check {no_op:6.1f}/s ({no_op / baseline:.2f}x no check)")
    print(f"  with our check     {with_check:6.1f}/s ({with_check / baseline:.2f}x no check)")
    print(f"  ratio to the no-op check {ratio:.2f} (goal >= {GOAL}x): {verdict}")


@contextlib.asynccontextmanager
async def check_process(kubeconfig: Path, *, no_op: bool) -> AsyncIterator[None]:
    """The check's controllers in a child process (this module with --check-controllers) while the block
    runs; SIGTERM and wait after it (the child prints its reconciles and writes)."""
    argv = ["--check-controllers", str(kubeconfig), *(["--no-op"] if no_op else [])]
    child = await asyncio.create_subprocess_exec(sys.executable, "-m", "tests.bench.bench_admission", *argv)
    try:
        yield
    finally:
        child.send_signal(signal.SIGTERM)
        await child.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000, help="Jobs per run (the pool gets a card for each)")
    parser.add_argument(
        "--kueue-qps",
        type=float,
        default=Tuning.qps,
        help="Kueue's client requests/s (burst twice that); default as Kueue's release manifests",
    )
    parser.add_argument(
        "--kueue-workload-workers",
        type=int,
        default=Tuning.workload_workers,
        help="Kueue's Workload reconcile workers; default as Kueue's release manifests",
    )
    parser.add_argument("--check-controllers", type=Path, metavar="KUBECONFIG", help=argparse.SUPPRESS)
    parser.add_argument("--no-op", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    try:
        if args.check_controllers:
            asyncio.run(check_controllers(args.check_controllers, no_op=args.no_op))
        else:
            tuning = Tuning(args.kueue_qps, int(2 * args.kueue_qps), args.kueue_workload_workers)
            asyncio.run(run(args.jobs, tuning))
    except errors.KubeError as e:
        raise SystemExit(f"bench_admission: {e}") from e
