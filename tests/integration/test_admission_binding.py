"""A Ready from the `gpustack-node-devices` check holds all the way to Allocate, on the sandbox (issue 25).

The chain runs as in test_admission_check (its `chain` fixture and helpers): real Kueue v0.17, the real
kube-scheduler, kwok, a device manager plus kubelet stand-in per GPU node. Both H100 nodes (8 cards each)
are half sliced: four plain Pods per node (no queue), each a 60 % slice, so the device plugin's packing puts
each on its own card. Then, through the pool's entrance LocalQueue, batch/v1 Jobs that name no node:

a. one node chosen at random (seeded; the seed is printed, `BIND_SEED` replays it) has its slices freed; a
   5-card exclusive Job is admitted, its Pod bound to that node and allocated 5 distinct cards;
   `BIND_ROUNDS` rounds (default 20);
b. a Job of two 4-card Pods on the half-sliced nodes: admitted, one Pod on each node (the only way it fits),
   4 distinct cards each; `BIND_PAIR_ROUNDS` rounds (default 3).

No Pod of the namespace ever fails (an UnexpectedAdmissionError from the kubelet's Allocate would), checked
throughout each round.
"""

from __future__ import annotations

import os
import random
import time
from functools import partial
from typing import Any

from gpustack_operator.api.json import JSONObj
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import NODES, PODS, Resource
from tests.helpers import eventually
from tests.integration.test_admission_check import (
    LONG,
    Chain,
    admitted,
    all_free,
    chain,
    check_entry,
    conditions,
    entrance_ready,
    frees,
    remove_pods,
    workload_of,
)
from tests.integration.test_admission_check import NODES as H100_NODES
from tests.integration.test_device_plugin import allocation, cards_of, gpu_pod, sliced_percent

__all__ = ["chain"]  # the module-scoped chain fixture, shared by import

JOBS = Resource("batch", "v1", "jobs", "Job", namespaced=True)
ROUNDS = int(os.environ.get("BIND_ROUNDS", "20"))
PAIR_ROUNDS = int(os.environ.get("BIND_PAIR_ROUNDS", "3"))
SLICES = 4
"""Slice Pods per node: each takes 60 % of a card, so 4 of the 8 cards carry a slice."""


def say(line: str) -> None:
    print(f"[admission-binding] {line}", flush=True)


def job(name: str, queue: str, cards: int, pods: int = 1) -> JSONObj:
    """A Job queued through the pool's entrance: `pods` Pods of `cards` whole cards, no node named."""
    template = {
        "spec": {
            "restartPolicy": "Never",
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": str(cards)}}}
            ],
        }
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {"parallelism": pods, "completions": pods, "backoffLimit": 0, "template": template},
    }


async def no_pod_failed(kube: Client, ns: str) -> None:
    for pod in await kube.list(PODS, ns):
        status = pod.get("status") or {}
        assert status.get("phase") != "Failed", (
            pod["metadata"]["name"],
            status.get("reason"),
            status.get("message"),
        )


async def slice_node(kube: Client, ns: str, node: str) -> list[str]:
    names = [f"slice-{node}-{i}-{random.getrandbits(24):06x}" for i in range(SLICES)]
    for name in names:
        await kube.create(PODS, gpu_pod(name, node, sliced_percent(60)), ns)
    return names


async def half_sliced(kube: Client, ns: str, want: tuple[int, ...]) -> None:
    """The ledger shows `want` free cards per node, and each node's plugin advertises as many whole cards
    as are free or held whole (what kube-scheduler counts)."""

    async def there() -> bool:
        await no_pod_failed(kube, ns)
        if await frees(kube) != want:
            return False
        offered = [
            int(
                ((await kube.get(NODES, node)).get("status") or {})
                .get("allocatable", {})
                .get("nvidia.com/gpu", 0)
            )
            for node in H100_NODES
        ]
        return tuple(offered) == want

    await eventually(there, timeout=LONG, what=f"free cards and nvidia.com/gpu allocatable {want}")


async def job_pods(kube: Client, ns: str, name: str, count: int) -> list[dict[str, Any]] | None:
    await no_pod_failed(kube, ns)
    pods = await kube.list(PODS, ns, label_selector=f"job-name={name}")
    up = [p for p in pods if p["status"].get("phase") in ("Running", "Succeeded") and allocation(p)]
    return up if len(up) == count else None


async def run_job(chain: Chain, ns: str, name: str, cards: int, pods: int) -> list[dict[str, Any]]:
    kube = chain.kube
    await kube.create(JOBS, job(name, chain.entrance, cards, pods), ns)
    running: list[dict[str, Any]] = await eventually(
        lambda: job_pods(kube, ns, name, pods),
        timeout=LONG,
        what=f"job {name}: {pods} Pods started with cards",
    )
    wl = await workload_of(kube, ns, name)
    assert admitted(wl) or conditions(wl).get("Finished") == "True"  # kwok completes a Job's Pods
    assert check_entry(wl)["state"] == "Ready"
    for pod in running:
        held = [card for card, mode, _ in cards_of(pod)]
        assert len(held) == len(set(held)) == cards, held
        assert all(mode == 1 for _, mode, _ in cards_of(pod))
    return running


async def end_job(kube: Client, ns: str, name: str) -> None:
    await kube.delete(JOBS, name, ns)
    pods = [p["metadata"]["name"] for p in await kube.list(PODS, ns, label_selector=f"job-name={name}")]
    await remove_pods(kube, ns, pods)


async def test_a_five_card_job_lands_on_the_one_node_whose_slices_were_freed_every_time(
    chain: Chain, kueue_namespace: str
) -> None:
    kube, ns = chain.kube, kueue_namespace
    seed = int(os.environ.get("BIND_SEED", str(time.time_ns() % 1_000_000)))
    rng = random.Random(seed)
    say(f"a: seed {seed} (BIND_SEED={seed} replays), {ROUNDS} rounds")
    await all_free(kube)
    await entrance_ready(kube, ns, chain.entrance)
    slices = {node: await slice_node(kube, ns, node) for node in H100_NODES}
    await half_sliced(kube, ns, (4, 4))
    started = time.monotonic()
    for n in range(ROUNDS):
        clock = time.monotonic()
        node = rng.choice(H100_NODES)
        await remove_pods(kube, ns, slices[node])
        want = tuple(8 if other == node else 4 for other in H100_NODES)
        await eventually(partial(_frees, kube, want), timeout=LONG, what=f"ledger free {want}")
        name = f"five-{n}"
        (pod,) = await run_job(chain, ns, name, 5, 1)
        assert pod["spec"]["nodeName"] == node, (pod["spec"]["nodeName"], node)
        wl = await workload_of(kube, ns, name)
        assert check_entry(wl).get("podSetUpdates") == [
            {"name": "main", "nodeSelector": {"kubernetes.io/hostname": node}}
        ]
        await end_job(kube, ns, name)
        slices[node] = await slice_node(kube, ns, node)
        await half_sliced(kube, ns, (4, 4))
        say(
            f"a: round {n + 1}/{ROUNDS}: freed {node}, the Job ran there on 5 cards "
            f"({time.monotonic() - clock:.1f}s)"
        )
    say(f"a: {ROUNDS} rounds in {time.monotonic() - started:.1f}s, no Pod failed")
    await remove_pods(kube, ns)
    await all_free(kube)


async def _frees(kube: Client, want: tuple[int, ...]) -> bool:
    return await frees(kube) == want


async def test_a_pair_of_four_card_pods_on_two_half_sliced_nodes_gets_one_node_each(
    chain: Chain, kueue_namespace: str
) -> None:
    kube, ns = chain.kube, kueue_namespace
    await all_free(kube)
    await entrance_ready(kube, ns, chain.entrance)
    for node in H100_NODES:
        await slice_node(kube, ns, node)
    await half_sliced(kube, ns, (4, 4))
    started = time.monotonic()
    for n in range(PAIR_ROUNDS):
        clock = time.monotonic()
        name = f"pair-{n}"
        pods = await run_job(chain, ns, name, 4, 2)
        assert sorted(p["spec"]["nodeName"] for p in pods) == sorted(H100_NODES)
        wl = await workload_of(kube, ns, name)
        assert not check_entry(wl).get("podSetUpdates"), "a podSet spread over two nodes is pinned to none"
        await end_job(kube, ns, name)
        await half_sliced(kube, ns, (4, 4))
        say(f"b: round {n + 1}/{PAIR_ROUNDS}: one 4-card Pod on each node ({time.monotonic() - clock:.1f}s)")
    say(f"b: {PAIR_ROUNDS} rounds in {time.monotonic() - started:.1f}s, no Pod failed")
    await remove_pods(kube, ns)
    await all_free(kube)
