"""Scheduling-chain benchmark: the real worker process builds the chain for 1,000 nodes in 10 pools.

Run: `.venv/bin/python -m tests.bench.bench_chain` (starts and stops its own sandbox; several minutes).

The sandbox runs with one small control node; the benchmark then adds 1,000 kwok nodes in 10 pools (8
accelerator models, 800 GPU nodes; 150 CPU-only linux/amd64 and 50 CPU-only linux/arm64 nodes) and, in
this one process, writes what each node's agents would: nfd-worker's NodeFeature (the sandbox's stand-in
builder), and the device manager's NodeFeature, Devices object and empty ledger (the device manager's own
builders, fed with simulated cards), plus the device plugin's `<base>`, `.shared` and `.sliced` node
capacities. Once nfd-master has labelled every node, `gpustack-operator worker` is started and measured:

- time from the process start to every chain object present: the worker's NodeFeature of every node and
  the managed mark NFD publishes from it, the mark copied onto every Devices, the four `.sliced.*`
  capacities on every sliceable node, the 10 InstanceTypes Active with their full capacity (so their
  queues hold every flavor and their views every ledger), and an entrance in every user namespace;
- API writes per object written: the worker's own count of the requests it sent, by method and resource
  (its `gpustack_rest_client_requests_total` metric, from the client's request observer, which counts
  every attempt, retries and refused writes included); Prepare's writes and lease renewals are shown
  apart;
- writes during 60 s at rest (the chain's, and the lease renewals leader election makes by design);
- the worker's resident memory (VmRSS) at rest, and its peak (VmHWM).

Goals: <= 30 s, <= 2 writes per object, 0 chain writes at rest, <= 250 MB. Baseline, measured in the same
run on the same server: the time kube-apiserver takes to accept as many plain ConfigMap creates as the
worker wrote objects, sent with as many requests in flight as the worker has reconcile workers (10).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import signal
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from tests.helpers import eventually

from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import DEFAULT_SYSTEM_NAMESPACE, MANAGED_LABEL, QUEUE_ANNOTATION
from gpustack_operator.api.quantity import Quantity
from gpustack_operator.device_manager import reporting
from gpustack_operator.device_manager.grouping import group_cards
from gpustack_operator.device_manager.ledger import rebuild
from gpustack_operator.device_manager.model import Card
from gpustack_operator.device_manager.simulated import simulated_uuid
from gpustack_operator.kube import resources
from gpustack_operator.kube.client import Client, connect
from gpustack_operator.rules.naming.groups import accelerator_key
from gpustack_operator.rules.naming.manufacturers import manufacturers
from gpustack_operator.rules.naming.resources import ResourceKind, resource_name_for
from gpustack_operator.sandbox import nfdworker
from gpustack_operator.sandbox.cluster import Sandbox
from gpustack_operator.sandbox.inventory import CPU, GPU, InventoryNode, node_manifest
from gpustack_operator.sandbox.process import free_port

EXECUTABLE = Path(sys.executable).parent / "gpustack-operator"
SYSTEM = DEFAULT_SYSTEM_NAMESPACE
WRITES = ("POST", "PUT", "PATCH", "DELETE")
PREPARE = {"namespaces", "customresourcedefinitions", "secrets", "nodefeaturerules", "admissionchecks"}
"""Resources only Prepare writes (once per start, not per chain object)."""
EPYC = CPU("AMD", "AMD EPYC 9654 96-Core Processor", "25", "17", 96)
XEON = CPU("Intel", "Intel(R) Xeon(R) Platinum 8358 CPU @ 2.60GHz", "6", "106", 32)
KUNPENG = CPU("VendorUnknown", "Kunpeng 920", "8", "3393", 96, threads_per_core=1)
POOLS: tuple[tuple[str, GPU | None, str, tuple[CPU, ...], int], ...] = (
    ("h100", GPU("nvidia", "NVIDIA H100 80GB HBM3", 8, 81559), "amd64", (EPYC, XEON), 100),
    ("a100", GPU("nvidia", "NVIDIA A100-SXM4-80GB", 8, 81920), "amd64", (EPYC, XEON), 100),
    ("l40s", GPU("nvidia", "NVIDIA L40S", 4, 46068), "amd64", (EPYC, XEON), 100),
    ("a10", GPU("nvidia", "NVIDIA A10", 4, 23028), "amd64", (XEON,), 100),
    ("t4", GPU("nvidia", "Tesla T4", 2, 15360), "amd64", (XEON,), 100),
    ("mi300x", GPU("amd", "AMD Instinct MI300X", 8, 196608), "amd64", (EPYC,), 100),
    ("mxc500", GPU("metax", "MXC500", 8, 65536), "amd64", (XEON,), 100),
    ("910b", GPU("ascend", "Ascend910B2", 8, 65536, "1200"), "arm64", (KUNPENG,), 100),
    ("cpu", None, "amd64", (EPYC, XEON), 150),
    ("cpu-arm", None, "arm64", (KUNPENG,), 50),
)
"""(name, GPU model, arch, CPUs the nodes alternate between, nodes): 1,000 nodes, 10 InstanceTypes."""
CONTROL = InventoryNode("bench-cp", XEON, "64Gi")
"""The sandbox's own node (nfd-master's "master node"); it joins the CPU pool too."""


# ---- the fleet, as its agents would report it --------------------------------------------------------------
def fleet(scale: float = 1.0) -> list[InventoryNode]:
    nodes = []
    for name, gpu, arch, cpus, count in POOLS:
        for i in range(max(1, round(count * scale))):
            gpus = (gpu,) if gpu else ()
            nodes.append(
                InventoryNode(f"bench-{name}-{i:03d}", cpus[i % len(cpus)], "512Gi", "linux", arch, gpus)
            )
    return nodes


def cards(node: InventoryNode) -> list[Card]:
    """What the simulated device manager detects on the node (its stable UUIDs)."""
    found = []
    for gpu in node.gpus:
        for index in range(gpu.count):
            uuid_ = simulated_uuid(node.name, gpu.manufacturer, index)
            found.append(Card(gpu.manufacturer, gpu.product, gpu.memory_mib, uuid_, index, index))
    return found


def node_object(node: InventoryNode, groups: list[Any]) -> JSONObj:
    """The kwok Node with what the kubelet reports from the device plugin: `<base>`, `.shared`, `.sliced`."""
    manifest = node_manifest(node)
    known = manufacturers()
    for group in groups:
        base = known[group["manufacturer"]].resource_name
        n = len(group["accelerators"])
        extra = {resource_name_for(base, ResourceKind.SHARED): str(n * 10)}
        slices = ((group.get("acceleratorsFeature") or {}).get("logicalSliced") or {}).get("maxSize", 0)
        if slices:
            extra[resource_name_for(base, ResourceKind.SLICED)] = str(n * slices)
        for field in ("capacity", "allocatable"):
            manifest["status"][field].update(extra)
    return manifest


async def bounded(jobs: Iterable[Callable[[], Awaitable[object]]], concurrency: int = 32) -> None:
    slots = asyncio.Semaphore(concurrency)

    async def one(job: Callable[[], Awaitable[object]]) -> None:
        async with slots:
            await job()

    await asyncio.gather(*(one(job) for job in jobs))


async def build_fleet(kube: Client, nodes: list[InventoryNode]) -> dict[str, Any]:
    """Create the nodes and write their agents' objects; returns what the chain must end up showing."""
    groups = {node.name: group_cards(cards(node)) for node in nodes}
    await bounded(partial(kube.create, resources.NODES, node_object(n, groups[n.name])) for n in nodes)
    created = {n["metadata"]["name"]: n for n in await kube.list(resources.NODES)}

    async def agents(node: InventoryNode) -> None:
        obj = created[node.name]
        feature = nfdworker.node_feature(node, obj)
        await kube.apply(resources.NODE_FEATURES, feature, field_manager=nfdworker.FIELD_MANAGER)
        if not groups[node.name]:
            return
        fm = reporting.FIELD_MANAGER
        dm_feature = reporting.desired_node_feature(obj, SYSTEM, groups[node.name])
        await kube.apply(resources.NODE_FEATURES, dm_feature, field_manager=fm)
        devices = reporting.desired_devices(obj, groups[node.name])
        await kube.apply(resources.DEVICES, devices, field_manager=fm)
        status = rebuild(devices["spec"], []).status
        await kube.patch(resources.DEVICES, node.name, {"status": status}, subresource="status")

    await bounded(partial(agents, node) for node in nodes)
    return expectations([*nodes, CONTROL], groups)


def expectations(nodes: list[InventoryNode], groups: dict[str, list[Any]]) -> dict[str, Any]:
    """Pool name -> capacity its InstanceType must show; the sliceable and GPU nodes."""
    pools: Counter[str] = Counter()
    sliceable, gpu_nodes = set(), set()
    for node in nodes:
        pools[f"gpustack--generic-{node.os}-{node.arch}"] += node.cpu.cores * node.cpu.threads_per_core
        for group in groups.get(node.name, []):
            key = accelerator_key(group["manufacturer"], group["id"])
            pools[f"gpustack--{key}-{node.os}-{node.arch}"] += len(group["accelerators"])
            gpu_nodes.add(node.name)
            if group.get("acceleratorsFeature"):
                sliceable.add(node.name)
    return {"pools": dict(pools), "sliceable": sliceable, "gpu_nodes": gpu_nodes}


async def labelled_by_nfd(kube: Client, count: int) -> bool:
    nodes = await kube.list(resources.NODES, label_selector="feature.node.kubernetes.io/cpu-model.family")
    return len(nodes) >= count


# ---- the worker and what it converges to -------------------------------------------------------------------
class Worker:
    def __init__(self, kubeconfig: Path, log: Path, args: list[str]) -> None:
        self.kubeconfig, self.log, self.args = kubeconfig, log, args
        self.metrics_port, self.health_port = free_port(), free_port()
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        env.update(KUBERNETES_POD_NAMESPACE=SYSTEM, KUBERNETES_POD_NAME="bench-worker")
        with self.log.open("wb") as sink:
            self.proc = await asyncio.create_subprocess_exec(
                str(EXECUTABLE),
                "worker",
                f"--kubeconfig={self.kubeconfig}",
                f"--metrics-bind-address=127.0.0.1:{self.metrics_port}",
                f"--health-probe-bind-address=127.0.0.1:{self.health_port}",
                *self.args,
                stdout=sink,
                stderr=asyncio.subprocess.STDOUT,
                env=env,
            )

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(self.proc.wait(), 60)

    async def metrics(self) -> str:
        """The worker's /metrics as text."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        async with aiohttp.ClientSession() as session, session.get(url) as resp:
            return await resp.text()

    async def requests(self) -> Counter[tuple[str, str, str]]:
        """(method, resource, code) -> requests sent so far, from the worker's /metrics."""
        text = await self.metrics()
        found: Counter[tuple[str, str, str]] = Counter()
        pattern = re.compile(
            r'^gpustack_rest_client_requests_total\{code="(\d+)",method="(\w+)",resource="([^"]+)"\} (\S+)$'
        )
        for line in text.splitlines():
            if match := pattern.match(line):
                code, method, resource, value = match.groups()
                found[(method, resource, code)] = int(float(value))
        return found

    def memory(self) -> tuple[float, float]:
        """(VmRSS, VmHWM) in MB."""
        assert self.proc is not None
        lines = Path(f"/proc/{self.proc.pid}/status").read_text().splitlines()
        fields = dict(line.split(":", 1) for line in lines if ":" in line)
        return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def mark(labels: dict[str, str] | None) -> bool:
    return (labels or {}).get(MANAGED_LABEL) == "true"


async def stages(
    kube: Client, expected: dict[str, Any], nodes: int
) -> list[tuple[str, Callable[[], Awaitable[bool]]]]:
    """Checks in build order; each holds once reached (nothing the worker does undoes it)."""
    sliced_units = {
        resource_name_for(m.resource_name, ResourceKind.SLICED_UNITS) for m in manufacturers().values()
    }

    async def features() -> bool:
        found = await kube.list(resources.NODE_FEATURES, SYSTEM)
        return bool(sum(f["metadata"]["name"].endswith("-gpustack-worker") for f in found) >= nodes)

    async def marked_nodes() -> bool:
        return len(await kube.list(resources.NODES, label_selector=f"{MANAGED_LABEL}=true")) >= nodes

    async def marked_devices() -> bool:
        found = await kube.list(resources.DEVICES, label_selector=f"{MANAGED_LABEL}=true")
        return len(found) >= len(expected["gpu_nodes"])

    async def capacities() -> bool:
        found = await kube.list(resources.NODES, label_selector="feature.gpustack.ai/acceleratable=true")
        ready = {
            n["metadata"]["name"]
            for n in found
            if sliced_units & set((n.get("status") or {}).get("capacity", {}))
        }
        return bool(expected["sliceable"] <= ready)

    async def pools() -> bool:
        types = {
            t["metadata"]["name"]: t.get("status") or {} for t in await kube.list(resources.INSTANCE_TYPES)
        }
        if set(types) != set(expected["pools"]):
            return False
        for name, want in expected["pools"].items():
            status = types[name]
            view = status.get("accelerator") or status.get("cpu") or {}
            if status.get("phase") != "Active" or Quantity.parse(view.get("capacity", "0")).value() != want:
                return False
        return True

    async def entrances() -> bool:
        namespaces = [
            ns["metadata"]["name"]
            for ns in await kube.list(resources.NAMESPACES)
            if ns["metadata"]["name"] != SYSTEM
        ]
        queues = [
            q
            for q in await kube.list(resources.LOCAL_QUEUES)
            if QUEUE_ANNOTATION in (q["metadata"].get("annotations") or {})
        ]
        namespaces = [ns for ns in namespaces if ns != "kube-system"]
        return len(queues) >= len(namespaces) * len(expected["pools"])

    return [
        ("worker NodeFeatures", features),
        ("managed mark on nodes (NFD)", marked_nodes),
        ("managed mark on Devices", marked_devices),
        (".sliced.* capacities", capacities),
        ("10 InstanceTypes Active, full capacity", pools),
        ("entrances in every namespace", entrances),
    ]


async def objects_written(kube: Client, expected: dict[str, Any], nodes: int) -> dict[str, int]:
    """Objects the worker wrote, by the resource its writes name."""
    flavors = [
        f for f in await kube.list(resources.RESOURCE_FLAVORS) if "gpustack--" in f["metadata"]["name"]
    ]
    queues = [
        q
        for q in await kube.list(resources.LOCAL_QUEUES)
        if QUEUE_ANNOTATION in (q["metadata"].get("annotations") or {})
    ]
    return {
        "nodefeatures": nodes,
        "devices": len(expected["gpu_nodes"]),
        "nodes/status": len(expected["sliceable"]),
        "resourceflavors": len(flavors),
        "instancetypes": len(expected["pools"]),
        "clusterqueues": len(expected["pools"]),
        "localqueues": len(queues),
    }


# ---- the baseline ------------------------------------------------------------------------------------------
async def plain_creates(kube: Client, count: int, concurrency: int = 10) -> float:
    namespace = f"bench-{uuid.uuid4().hex[:6]}"
    await kube.create(resources.NAMESPACES, {"metadata": {"name": namespace}})
    body = {"data": {"k": "v" * 256}}
    t0 = time.perf_counter()
    await bounded(
        (
            partial(
                kube.create,
                resources.CONFIGMAPS,
                {"metadata": {"name": f"cm-{i}", "namespace": namespace}, **body},
            )
            for i in range(count)
        ),
        concurrency,
    )
    elapsed = time.perf_counter() - t0
    await kube.delete(resources.NAMESPACES, namespace)
    return elapsed


# ---- the run -----------------------------------------------------------------------------------------------
def report(what: str, value: float, goal: float, unit: str) -> None:
    ratio = value / goal if goal else float("inf") if value else 0.0
    verdict = "meets" if value <= goal else "MISSES"
    print(f"  {what:<44} {value:10.2f} {unit:<6} goal <= {goal:g} {unit:<6} ratio {ratio:5.2f}  {verdict}")


async def run(box: Sandbox, rest_seconds: float, scale: float, worker_args: list[str]) -> None:
    nodes = fleet(scale)
    async with await connect(box.kubeconfig) as kube:
        t0 = time.perf_counter()
        expected = await build_fleet(kube, nodes)
        print(
            f"fleet: {len(nodes)} nodes and their agents' objects written in {time.perf_counter() - t0:.1f}s"
        )
        await eventually(
            lambda: labelled_by_nfd(kube, len(nodes) + 1),
            timeout=600,
            interval=2.0,
            what="nfd-master labels every node",
        )
        print(f"nfd-master labelled every node after {time.perf_counter() - t0:.1f}s")
        total_nodes = len(nodes) + 1

        worker = Worker(box.kubeconfig, box.run_dir / "bench-worker.log", worker_args)
        print(f"worker: gpustack-operator worker {' '.join(worker_args) or '(default flags)'}")
        checks = await stages(kube, expected, total_nodes)
        started = time.perf_counter()
        await worker.start()
        reached: list[tuple[str, float]] = []
        try:
            for name, check in checks:
                await eventually(check, timeout=900, interval=1.0, what=name)
                reached.append((name, time.perf_counter() - started))
                print(f"  {reached[-1][1]:6.1f}s  {name}")
            converge = reached[-1][1]
            after_build = await worker.requests()
            rss_built, _ = worker.memory()
            await asyncio.sleep(rest_seconds)
            after_rest = await worker.requests()
            rss, peak = worker.memory()
            written = await objects_written(kube, expected, total_nodes)
        finally:
            await worker.stop()
        baseline = await plain_creates(kube, sum(written.values()))
    marks = dict(reached)["managed mark on nodes (NFD)"]
    print(f"  the worker's own part after nfd-master's last mark: {converge - marks:.1f}s")
    print_results(after_build, after_rest, written, converge, baseline, rest_seconds, (rss_built, rss, peak))


def writes_by_resource(counts: Counter[tuple[str, str, str]]) -> Counter[str]:
    """Writes per resource; a status write counts for its object (but a Node's status is all we write)."""
    found: Counter[str] = Counter()
    for (method, resource, _), n in counts.items():
        if method in WRITES:
            found[resource if resource == "nodes/status" else resource.split("/")[0]] += n
    return found


def print_results(
    built: Counter[tuple[str, str, str]],
    rested: Counter[tuple[str, str, str]],
    written: dict[str, int],
    converge: float,
    baseline: float,
    rest_seconds: float,
    memory: tuple[float, float, float],
) -> None:
    by_resource = writes_by_resource(built)
    chain = {r: n for r, n in by_resource.items() if r not in PREPARE | {"leases", "events"}}
    conflicts = sum(n for (m, _, code), n in built.items() if m in WRITES and code == "409")
    objects = sum(written.values())
    print("\nwrites while building (the worker's own request count; 409s included):")
    for resource in sorted(set(chain) | set(written)):
        n, obj = chain.get(resource, 0), written.get(resource, 0)
        per = f"{n / obj:5.2f}" if obj else "  -  "
        print(f"  {resource:<22} {n:6d} writes  {obj:6d} objects  {per} per object")
    print(
        f"  (of which 409 conflicts: {conflicts}; Prepare: {sum(by_resource[r] for r in PREPARE)} writes;"
        f" lease renewals: {by_resource['leases']}; events: {by_resource['events']})"
    )
    rest = writes_by_resource(rested) - writes_by_resource(built)
    chain_rest = sum(n for r, n in rest.items() if r not in {"leases", "events"})
    reads = sum(n for (m, _, _), n in built.items() if m not in WRITES)
    rss_built, rss, peak = memory
    print(f"\nresults ({objects} objects; {reads} reads and watches while building):")
    report("time from process start to every object", converge, 30, "s")
    report("chain writes per object written", sum(chain.values()) / objects, 2, "writes")
    report(f"chain writes during {rest_seconds:.0f} s at rest", chain_rest, 0, "writes")
    print(f"  {'lease renewals during the rest (by design)':<44} {rest['leases']:10d}")
    report("worker RSS at rest", rss, 250, "MB")
    print(f"  {'worker RSS once built / peak (VmHWM)':<44} {rss_built:10.1f} / {peak:.1f} MB")
    print(
        f"\nbaseline: kube-apiserver accepts {objects} plain ConfigMap creates (10 in flight) in "
        f"{baseline:.1f}s; the worker's build took {converge / baseline:.2f}x that"
    )


@contextlib.asynccontextmanager
async def control_only_sandbox(prefix: str, **options: Any) -> AsyncIterator[Sandbox]:
    """A sandbox whose inventory is the one control node (the benchmark adds what it measures);
    `options` go to Sandbox."""
    run_dir = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))  # unix socket paths below it must stay short
    inventory = run_dir / "inventory.yaml"
    cpu = CONTROL.cpu
    control = {
        "name": CONTROL.name,
        "cpu": {"vendor": cpu.vendor, "model": cpu.model, "family": int(cpu.family), "id": int(cpu.id)}
        | {"cores": cpu.cores},
        "memory": CONTROL.memory,
    }
    inventory.write_text(yaml.safe_dump({"nodes": [control]}))
    async with Sandbox(
        run_dir, inventory_file=inventory, progress=lambda text: print(text, flush=True), **options
    ) as box:
        yield box


async def main(args: argparse.Namespace) -> None:
    async with control_only_sandbox("bc-") as box:
        await run(box, args.rest, args.scale, args.worker_arg)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rest", type=float, default=60.0, help="seconds at rest to count writes over")
    parser.add_argument(
        "--scale", type=float, default=1.0, help="fraction of each pool's nodes (a quick try)"
    )
    parser.add_argument(
        "--worker-arg",
        action="append",
        default=[],
        help="an extra worker flag, e.g. --worker-arg=--kube-api-qps=200 (repeatable)",
    )
    asyncio.run(main(parser.parse_args()))
