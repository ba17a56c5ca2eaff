"""Informer benchmark: our list+watch cache against a plain kubernetes-asyncio loop, on one sandbox.

Run: `.venv/bin/python -m tests.bench.bench_informer` (starts and stops its own sandbox; a few minutes).

Three numbers, each printed with the plain loop's next to it and the ratio ours/plain (lower is better):

- initial sync: time from nothing to a complete cache of N ConfigMaps (ours: paginated list into the
  Store; plain: `CoreV1Api.list_namespaced_config_map` into a dict of models);
- watch throughput: N updates were made while no watch was open; time for each implementation, watching
  from the same resourceVersion, to have seen all N (the server replays them as fast as a client reads);
- memory: resident set growth per 1,000 cached Nodes (Nodes shaped like the sandbox's GPU nodes, with
  NFD labels and full status, but without kwok's annotation), and the Python heap growth per 1,000 Nodes
  measured with tracemalloc.

Targets (issue 4): initial sync no slower than 1.2x the plain loop; under 8 MB per 1,000 Nodes.
Numbers are medians over rounds; the machine is shared, so read ratios rather than absolute times.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import gc
import json
import statistics
import sys
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import Awaitable, Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio import watch as k8s_watch

from gpustack_operator.api.json import JSONObj
from gpustack_operator.kube import resources
from gpustack_operator.kube.client import Client, connect
from gpustack_operator.kube.informer import Informer
from gpustack_operator.runtime import Supervisor
from gpustack_operator.sandbox.cluster import Sandbox

CM = resources.CONFIGMAPS
NODE_SELECTOR = "bench=informer"


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


async def bounded(jobs: Iterable[Callable[[], Awaitable[object]]], concurrency: int = 32) -> None:
    slots = asyncio.Semaphore(concurrency)

    async def one(job: Callable[[], Awaitable[object]]) -> None:
        async with slots:
            await job()

    await asyncio.gather(*(one(job) for job in jobs))


class Counter:
    """EventHandler that sets `done` once it has seen `want` updates."""

    def __init__(self, want: int) -> None:
        self.want, self.updates, self.done = want, 0, asyncio.Event()

    def on_add(self, obj: JSONObj) -> None:
        pass

    def on_update(self, old: JSONObj, new: JSONObj) -> None:
        self.updates += 1
        if self.updates >= self.want:
            self.done.set()

    def on_delete(self, obj: JSONObj) -> None:
        pass


async def in_turn(
    r: int, ours: Callable[[], Awaitable[float]], plain: Callable[[], Awaitable[float]]
) -> tuple[float, float]:
    """Time both; ours goes first in even rounds, so neither always meets the warmer server."""
    if r % 2 == 0:
        first = await ours()
        return first, await plain()
    second = await plain()
    return await ours(), second


async def ours_sync(informer: Informer) -> float:
    """Seconds from start to synced; leaves the informer stopped at its list's resourceVersion."""
    t0 = time.perf_counter()
    async with Supervisor("bench") as sup:
        sup.spawn("informer", informer.run)
        await informer.wait_synced()
        return time.perf_counter() - t0


async def plain_sync(v1: Any, namespace: str) -> float:
    t0 = time.perf_counter()
    answer = await v1.list_namespaced_config_map(namespace)
    cache = {item.metadata.name: item for item in answer.items}
    elapsed = time.perf_counter() - t0
    assert cache
    return elapsed


async def ours_replay(informer: Informer, updates: int) -> float:
    counter = Counter(updates)
    informer.add_handler(counter)
    t0 = time.perf_counter()
    async with Supervisor("bench") as sup:
        sup.spawn("informer", informer.run)
        await counter.done.wait()
        return time.perf_counter() - t0


async def plain_replay(v1: Any, namespace: str, since: str, updates: int) -> float:
    cache: dict[str, Any] = {}
    seen = 0
    t0 = time.perf_counter()
    watcher = k8s_watch.Watch()
    async with watcher.stream(
        v1.list_namespaced_config_map, namespace, resource_version=since, timeout_seconds=300
    ) as stream:
        async for event in stream:
            cache[event["object"].metadata.name] = event["object"]
            seen += event["type"] == "MODIFIED"
            if seen >= updates:
                break
    return time.perf_counter() - t0


async def update_all(kube: Client, namespace: str, count: int, tag: str) -> None:
    patch = {"data": {"round": tag}}
    await bounded(partial(kube.patch, CM, f"cm-{i}", patch, namespace=namespace) for i in range(count))


def line(what: str, ours: list[float], plain: list[float], unit: str = "s") -> None:
    o, p = statistics.median(ours), statistics.median(plain)
    print(f"{what:<34} ours {o:8.3f} {unit}   plain {p:8.3f} {unit}   ratio ours/plain {o / p:5.2f}")


async def bench_configmaps(kube: Client, v1: Any, count: int, rounds: int) -> None:
    namespace = f"bench-{uuid.uuid4().hex[:6]}"
    await kube.create(resources.NAMESPACES, {"metadata": {"name": namespace}})
    payload = {f"key-{k}": "x" * 64 for k in range(8)}  # ~1 KiB of data per object
    await bounded(
        partial(kube.create, CM, {"metadata": {"name": f"cm-{i}", "namespace": namespace}, "data": payload})
        for i in range(count)
    )
    sync_ours: list[float] = []
    sync_plain: list[float] = []
    replay_ours: list[float] = []
    replay_plain: list[float] = []
    for r in range(rounds):
        informer = Informer(kube, CM, namespace=namespace)
        o, p = await in_turn(r, partial(ours_sync, informer), partial(plain_sync, v1, namespace))
        sync_ours.append(o)
        sync_plain.append(p)
        since = informer.resource_version
        await update_all(kube, namespace, count, f"r{r}")
        o, p = await in_turn(
            r, partial(ours_replay, informer, count), partial(plain_replay, v1, namespace, since, count)
        )
        replay_ours.append(o)
        replay_plain.append(p)
        assert informer.relists == 0, "the replay expired; the throughput number would include a relist"
        print(
            f"round {r}: sync ours {sync_ours[-1]:.3f}s plain {sync_plain[-1]:.3f}s; "
            f"replay ours {replay_ours[-1]:.3f}s plain {replay_plain[-1]:.3f}s"
        )
    print()
    line(f"initial sync of {count} ConfigMaps", sync_ours, sync_plain)
    line(f"watch replay of {count} updates", replay_ours, replay_plain)
    print(
        f"{'watch throughput (events/s)':<34} ours {count / statistics.median(replay_ours):8.0f}     "
        f"plain {count / statistics.median(replay_plain):8.0f}"
    )


async def bench_nodes(kube: Client, kubeconfig_path: Path, count: int) -> None:
    template = await kube.get(resources.NODES, "h100-0")
    meta = template["metadata"]
    for field in ("uid", "resourceVersion", "creationTimestamp", "managedFields"):
        meta.pop(field, None)
    meta.get("annotations", {}).pop("kwok.x-k8s.io/node", None)

    label, value = NODE_SELECTOR.split("=")

    def node(i: int) -> JSONObj:
        obj = copy.deepcopy(template)
        obj["metadata"]["name"] = f"bench-node-{i}"
        obj["metadata"]["labels"].update({"kubernetes.io/hostname": f"bench-node-{i}", label: value})
        return obj

    await bounded(partial(kube.create, resources.NODES, node(i)) for i in range(count))
    kubeconfig = str(kubeconfig_path)
    ours_rss = await probe("ours", kubeconfig, count)
    ours_heap = await probe("ours-heap", kubeconfig, count)
    plain_rss = await probe("plain", kubeconfig, count)
    mb = 1024 * 1024
    print(f"memory per 1,000 cached Nodes ({count} Nodes of {len(json.dumps(template))} bytes of JSON each):")
    print(f"  ours  RSS growth {ours_rss / mb:6.2f} MB   Python heap (tracemalloc) {ours_heap / mb:6.2f} MB")
    print(f"  plain RSS growth {plain_rss / mb:6.2f} MB   (kubernetes-asyncio V1Node models)")
    print(f"  target < 8 MB per 1,000 Nodes; ratio ours/plain RSS {ours_rss / plain_rss:5.2f}")


async def probe(kind: str, kubeconfig: str, count: int) -> float:
    """Bytes per 1,000 Nodes that a fresh process grows by when it caches them (see `measure`)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.bench.bench_informer",
        "--probe",
        kind,
        "--kubeconfig",
        kubeconfig,
        "--nodes",
        str(count),
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await proc.communicate()
    if proc.returncode:
        raise RuntimeError(f"probe {kind} failed with {proc.returncode}")
    return float(out.decode().split()[-1])


async def measure(kind: str, kubeconfig: str, count: int) -> float:
    """In a fresh process: connect, then cache every bench Node; return the growth per 1,000 Nodes.

    "ours" and "plain" read VmRSS before and after; "ours-heap" traces Python allocations instead
    (tracemalloc's own bookkeeping would distort RSS, so it gets a process of its own).
    """
    configuration = k8s_client.Configuration()
    await k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    async with await connect(Path(kubeconfig)) as kube, k8s_client.ApiClient(configuration) as api:
        v1 = k8s_client.CoreV1Api(api)
        await kube.list_page(resources.NODES, limit=1)  # warm up the connection and TLS
        await v1.list_node(limit=1)
        if kind == "ours-heap":
            tracemalloc.start()
        gc.collect()
        before = tracemalloc.get_traced_memory()[0] if kind == "ours-heap" else rss_bytes()
        cache: Any
        if kind == "plain":
            cache = {n.metadata.name: n for n in (await v1.list_node(label_selector=NODE_SELECTOR)).items}
        else:
            cache = Informer(kube, resources.NODES, label_selector=NODE_SELECTOR)
            await ours_sync(cache)
        gc.collect()
        after = tracemalloc.get_traced_memory()[0] if kind == "ours-heap" else rss_bytes()
        assert len(cache.store if isinstance(cache, Informer) else cache) == count
        return (after - before) / count * 1000


async def main(args: argparse.Namespace) -> None:
    if args.probe:
        print(await measure(args.probe, args.kubeconfig, args.nodes))
        return
    run_dir = Path(tempfile.mkdtemp(prefix="bi-", dir="/tmp"))  # unix socket paths below it must stay short
    async with Sandbox(run_dir, progress=lambda text: print(text, flush=True)) as box:
        configuration = k8s_client.Configuration()
        await k8s_config.load_kube_config(config_file=str(box.kubeconfig), client_configuration=configuration)
        async with await connect(box.kubeconfig) as kube, k8s_client.ApiClient(configuration) as api:
            v1 = k8s_client.CoreV1Api(api)
            await bench_configmaps(kube, v1, args.configmaps, args.rounds)
            print()
            await bench_nodes(kube, box.kubeconfig, args.nodes)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configmaps", type=int, default=5000)
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--probe", choices=["ours", "ours-heap", "plain"], help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    asyncio.run(main(parser.parse_args()))
