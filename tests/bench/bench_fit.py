"""`instancetypes/fit`: how long one what-if answer takes on a pool of 1,000 nodes × 8 cards.

Run: `.venv/bin/python -m tests.bench.bench_fit` (starts and stops its own sandbox; a few minutes, most of
it writing the ledgers).

The pool is bench_admission_decision's (its builders: 1,000 Devices ledgers filled at random, seeded; one
ResourceFlavor selecting them), plus the pool's ClusterQueue with that flavor's credits quota, so Kueue's
part of the answer (flavor and free quota) is read as the worker reads it. The worker's check controller
runs in-process on real informers; once its cache holds every ledger, the same seeded mix of requests as
bench_admission_decision's (1, 4, 8 cards, 8 Pods × 8 cards, a slice, a share, 9 cards that fit nowhere) is
asked two ways, alternating: one fit answer (the request rendered as the chain's Pod, pod_template; then
AdmissionFit.fit: the ClusterQueue's flavor and quota, the flavor's cards less a read-only view of the
promise book, the placement, the answer with its largest free request, kept per node between answers)
and one admission decision of the same request as a Workload (decide, promising the plan's cards as the
controller does, the oldest released past 100).
So every fit sees a book of up to 100 promises, as on a busy pool.

Goal: a fit answer's p99 <= 50 ms. Baseline, same run: one admission decision; the ratio is fit ÷ decision.
What the HTTP round trip through kube-apiserver adds is not in these figures.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from collections import deque

from tests.bench.bench_admission_decision import FLAVOR, percentile, pool, workload
from tests.bench.bench_chain import control_only_sandbox
from tests.helpers import eventually
from tests.integration.chain_support import running_controllers

from gpustack_operator.api.json import JSONObj
from gpustack_operator.apiserver.registry.instancetypefit import pod_template
from gpustack_operator.controllers import node_devices_admission_check
from gpustack_operator.controllers.node_devices_admission_fit import AdmissionFit
from gpustack_operator.kube import resources
from gpustack_operator.kube.client import connect
from gpustack_operator.rules.cards import CARD_UNITS

QUEUE = "bench-fit"
GOAL_P99_MS = 50.0
H100_TYPE: JSONObj = {"spec": {"acceleratable": True, "manufacturer": "nvidia", "memory": "81559Mi"}}


def cluster_queue(nodes: int) -> JSONObj:
    res = resources.CLUSTER_QUEUES
    credits = "credits.gpustack.ai/nvidia"
    quota = [{"name": credits, "nominalQuota": str(nodes * 8 * CARD_UNITS)}]
    return {
        "apiVersion": res.api_version,
        "kind": res.kind,
        "metadata": {"name": QUEUE},
        "spec": {
            "resourceGroups": [
                {"coveredResources": [credits], "flavors": [{"name": FLAVOR, "resources": quota}]}
            ]
        },
    }


def measure(
    rec: node_devices_admission_check.NodeDevicesAdmissionReconciler, rounds: int, seed: int
) -> tuple[list[float], list[float], dict[str, list[tuple[float, bool]]]]:
    fit = AdmissionFit(rec)
    rng = random.Random(seed + 1)
    held: deque[str] = deque()
    fits: list[float] = []
    decisions: list[float] = []
    by_shape: dict[str, list[tuple[float, bool]]] = {}
    for i in range(rounds):
        shape, wl = workload(rng, i)
        pod_set = wl["spec"]["podSets"][0]
        limits = dict(pod_set["template"]["spec"]["containers"][0]["resources"]["limits"])
        if limits.pop("nvidia.com/gpu.sliced.units", None):  # a user names the slice's memory (25 % = 400k)
            limits["nvidia.com/gpu.sliced.memory-percentage"] = "25"
        start = time.perf_counter()
        template = pod_template({"limits": limits}, H100_TYPE)
        answer = fit.fit(QUEUE, "nvidia", template, pod_set["count"])
        spent = (time.perf_counter() - start) * 1000
        fits.append(spent)
        by_shape.setdefault(shape, []).append((spent, bool(answer["fits"])))
        key = f"bench/wl-{i}"
        start = time.perf_counter()
        placement, ledger = rec.decide(wl, key)
        if placement is not None:
            rec.promises.hold(key, placement.cards, ledger, rec.clock())
        decisions.append((time.perf_counter() - start) * 1000)
        if placement is not None:
            held.append(key)
            if len(held) > 100:
                rec.promises.drop(held.popleft())
        if (placement is not None) != answer["fits"]:
            print(f"  round {i} ({shape}): fit {answer['reason']}, decision Ready {placement is not None}")
    return fits, decisions, by_shape


async def run(nodes: int, rounds: int, seed: int) -> None:
    async with control_only_sandbox("bfit-") as box, await connect(box.kubeconfig) as kube:
        await pool(kube, nodes, seed)
        await kube.create(resources.CLUSTER_QUEUES, cluster_queue(nodes))
        async with running_controllers(kube, [node_devices_admission_check.controller]) as manager:
            rec = manager.controllers[node_devices_admission_check.NAME].spec.reconciler
            assert isinstance(rec, node_devices_admission_check.NodeDevicesAdmissionReconciler)

            async def cached() -> bool:
                return (
                    len(rec.cache.list(resources.DEVICES)) >= nodes
                    and rec.cache.get(resources.RESOURCE_FLAVORS, FLAVOR) is not None
                    and rec.cache.get(resources.CLUSTER_QUEUES, QUEUE) is not None
                )

            await eventually(cached, timeout=300, what="the check's cache holds every ledger and the queue")
            print(
                f"cache holds {nodes} ledgers, the flavor and the queue; timing {rounds} fits and decisions"
            )
            fits, decisions, by_shape = measure(rec, rounds, seed)
    report(fits, decisions, by_shape, nodes)


def report(
    fits: list[float], decisions: list[float], by_shape: dict[str, list[tuple[float, bool]]], nodes: int
) -> None:
    print(f"\nper fit answer, {len(fits)} answers, {nodes} nodes x 8 cards:")
    for shape, rows in sorted(by_shape.items()):
        spent = [t for t, _ in rows]
        fit = sum(ok for _, ok in rows)
        print(
            f"  {shape:<24} {len(rows):5d} answers ({fit:5d} fit)"
            f"  p50 {statistics.median(spent):7.2f} ms  p99 {percentile(spent, 99):7.2f} ms"
        )
    p50, p99 = statistics.median(fits), percentile(fits, 99)
    d50, d99 = statistics.median(decisions), percentile(decisions, 99)
    verdict = "meets the goal" if p99 <= GOAL_P99_MS else "MISSES the goal"
    print(f"  {'all':<24} {len(fits):5d} answers             p50 {p50:7.2f} ms  p99 {p99:7.2f} ms")
    print(f"baseline: one admission decision, same requests, same run: p50 {d50:.2f} ms  p99 {d99:.2f} ms")
    print(f"fit / decision: p50 {p50 / d50:.2f}x  p99 {p99 / d99:.2f}x")
    print(f"goal: fit p99 <= {GOAL_P99_MS:g} ms: p99 {p99:.2f} ms, {verdict}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000, help="nodes of 8 H100 cards in the pool")
    parser.add_argument("--rounds", type=int, default=1000, help="fit answers (and decisions) to time")
    parser.add_argument("--seed", type=int, default=7, help="seed of the ledgers and the request mix")
    args = parser.parse_args()
    asyncio.run(run(args.nodes, args.rounds, args.seed))
