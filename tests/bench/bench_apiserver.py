"""Aggregated-API benchmark: v1 InstanceType reads through the aggregator against the v1alpha1 CRD directly.

Run: `.venv/bin/python -m tests.bench.bench_apiserver` (starts and stops its own sandbox; about five
minutes; `--quick` takes fewer samples).

The real `gpustack-operator worker` serves `instancetypes.worker.gpustack.ai/v1`; the script creates CPU-only
InstanceTypes through the CRD (so through our webhooks), waits for the worker to be at rest, then measures,
in the same run against the same kube-apiserver, with one request in flight:

- GET of one object and LIST of 100 and of 1,000 objects, as JSON and as the Table kubectl asks for, on three
  paths: the CRD (`/apis/worker.gpustack.ai/v1alpha1/...`, the baseline), v1 as served (from the worker's
  informer cache where registry/generic/cachedreads.py allows), and v1 forced onto the proxied path (an extra
  query parameter the cache does not know sends the read to the CRD, as before the cache; kube ignores it).
  Samples of the three paths alternate, so a busy machine slows all three alike. Ratio: the median latency
  over the CRD's. A read the worker proxies goes through its own client, so it waits for that client's rate
  limit (`--kube-api-qps`, 50/s by default, shared with the controllers): pass
  `--worker-arg=--kube-api-qps=1000 --worker-arg=--kube-api-burst=2000` to see the proxy's cost alone.
- WATCH fan-out: `--watchers` watches open on each path from the version of that path's list, then
  `--updates` label patches to one object; each watcher's delay from the patch's answer to its event
  (p50/p99), and the ratio of the medians (v1 as served: from the worker's informer), with the CPU
  kube-apiserver and the worker spent per event delivered. Three more paths take this apart: "v1 direct"
  watches the worker's port itself (with the front-proxy certificate kube-apiserver presents), so without
  the aggregator's hop; "floor h1" and "floor h2" watch, through the aggregator like v1, the cheapest
  backend there can be (tests/bench/floor: Go, one upstream watch, each line passed on as it came, over
  HTTP/1.1 as the worker serves, and over HTTP/2, which lets the aggregator carry every watch on one
  connection). A floor's ratio is what the aggregator alone costs; `--no-floor` skips them (they need Go).
- The worker's resident memory (VmRSS) with 100 and with 1,000 InstanceTypes cached.

Goal: every ratio <= 1.3. Nothing about time is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import ssl
import statistics
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from tests.bench.bench_chain import Worker, bounded, control_only_sandbox
from tests.helpers import eventually
from tests.integration.worker_support import cpu_type

from gpustack_operator.apiserver import registration
from gpustack_operator.apiserver.catalog import CATALOG
from gpustack_operator.apiserver.webhooks.server import MUTATING_CONFIGURATION, VALIDATING_CONFIGURATION
from gpustack_operator.kube import resources
from gpustack_operator.kube.client import Client, connect
from gpustack_operator.sandbox.build import go_env
from gpustack_operator.sandbox.cluster import Sandbox
from gpustack_operator.sandbox.process import free_port

CRD = "/apis/worker.gpustack.ai/v1alpha1/instancetypes"
V1 = "/apis/worker.gpustack.ai/v1/instancetypes"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
PATHS: tuple[tuple[str, str, dict[str, str]], ...] = (
    ("CRD v1alpha1", CRD, {}),
    ("v1 served", V1, {}),
    ("v1 proxied", V1, {"benchProxied": "1"}),
)
"""(label, base path, extra query): the baseline first."""


# ---- a raw client: bytes in, bytes out, so the client's own decoding weighs on no path -------------------
class Raw:
    """HTTPS to kube-apiserver with the sandbox kubeconfig's admin certificate."""

    def __init__(self, server: str, ctx: ssl.SSLContext, headers: dict[str, str] | None = None) -> None:
        self.server = server
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=ctx, limit=0),
            timeout=aiohttp.ClientTimeout(total=None),
            headers=headers,
        )

    @classmethod
    def admin(cls, kubeconfig: Path) -> Raw:
        """To kube-apiserver, as the kubeconfig's admin."""
        config = yaml.safe_load(kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        user = config["users"][0]["user"]
        ctx = ssl.create_default_context(cafile=cluster["certificate-authority"])
        ctx.load_cert_chain(user["client-certificate"], user["client-key"])
        return cls(cluster["server"], ctx)

    @classmethod
    def front_proxy(cls, box: Sandbox, port: int) -> Raw:
        """Straight to the worker's port, as kube-apiserver's aggregator reaches it: with the front-proxy
        client certificate, and the admin user in the X-Remote-* headers that certificate vouches for."""
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # the worker's self-signed serving certificate
        ctx.load_cert_chain(box.certs.front_proxy_client_crt, box.certs.front_proxy_client_key)
        admin = {"X-Remote-User": "kubernetes-admin", "X-Remote-Group": "system:masters"}
        return cls(f"https://127.0.0.1:{port}", ctx, admin)

    async def close(self) -> None:
        await self.session.close()

    async def get(self, path: str, params: dict[str, str], accept: str = "application/json") -> bytes:
        async with self.session.get(self.server + path, params=params, headers={"Accept": accept}) as resp:
            body = await resp.read()
            if resp.status != 200:
                raise RuntimeError(f"GET {path} {params}: {resp.status} {body[:300]!r}")
            return body

    @contextlib.asynccontextmanager
    async def watch(self, path: str, params: dict[str, str]) -> AsyncIterator[aiohttp.ClientResponse]:
        query = {**params, "watch": "1", "timeoutSeconds": "600"}
        async with self.session.get(self.server + path, params=query) as resp:
            if resp.status != 200:
                raise RuntimeError(f"WATCH {path}: {resp.status} {(await resp.read())[:300]!r}")
            yield resp


# ---- measuring -------------------------------------------------------------------------------------------
@dataclass
class Sampled:
    label: str
    latencies: list[float]

    @property
    def p50(self) -> float:
        return statistics.median(self.latencies)

    @property
    def p99(self) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


async def reads(raw: Raw, what: str, name: str | None, accept: str, samples: int) -> list[Sampled]:
    """`samples` requests per path, the paths taking turns; the first round warms connections."""
    found = [Sampled(label, []) for label, _, _ in PATHS]
    for round_ in range(samples + 1):
        for sampled, (_, base, extra) in zip(found, PATHS, strict=True):
            path = f"{base}/{name}" if name else base
            start = time.perf_counter()
            await raw.get(path, dict(extra), accept)
            if round_:
                sampled.latencies.append(time.perf_counter() - start)
    show(what, found)
    return found


def show(what: str, found: list[Sampled], unit: float = 1000.0) -> None:
    base = found[0].p50
    print(f"\n{what}")
    for sampled in found:
        print(
            f"  {sampled.label:<14} p50 {sampled.p50 * unit:8.2f} ms  p99 {sampled.p99 * unit:8.2f} ms"
            f"  ratio {sampled.p50 / base:5.2f}",
            flush=True,
        )


@dataclass
class FanOut:
    """One path's watchers: each waits for its `updates` label values and records when each first came.

    Only values with this path's `prefix` count, once each: a controller's later write to the object
    (which keeps the label) is a MODIFIED event too, and may reach the next path's watchers.
    """

    raw: Raw
    base: str
    prefix: str
    watchers: int
    updates: int
    sent: dict[str, float]
    received: list[tuple[str, float]]
    opened: int = 0

    def delays(self) -> list[float]:
        """From each patch's answer to each watcher's event (a tie can come out just below zero)."""
        return [max(0.0, at - self.sent[value]) for value, at in self.received]

    async def watch(self, params: dict[str, str], all_open: asyncio.Event) -> None:
        async with self.raw.watch(self.base, params) as resp:
            self.opened += 1
            if self.opened == self.watchers:
                all_open.set()
            seen: set[str] = set()
            async for line in resp.content:
                event = json.loads(line)
                value = ((event["object"].get("metadata") or {}).get("labels") or {}).get("bench") or ""
                if event["type"] == "MODIFIED" and value.startswith(self.prefix) and value not in seen:
                    self.received.append((value, time.perf_counter()))
                    seen.add(value)
                    if len(seen) == self.updates:
                        return


@dataclass(frozen=True)
class WatchPath:
    """A path the fan-out watches: how it is reached, and the extra query it is read with."""

    label: str
    raw: Raw
    base: str
    extra: dict[str, str]


async def fan_out(
    paths: list[WatchPath], kube: Client, name: str, watchers: int, updates: int, pids: dict[str, int]
) -> list[Sampled]:
    """Per path: `watchers` watches from its list's version, `updates` patches, each event's delay.

    Each path's watchers start where a LIST of that path left them, as kubectl's `get -w` does (with its
    `limit=500`): on v1 as served, the list and then the watches come from the worker's informer
    (registry/generic/watchcache.py); on the proxied path, every watch is a watch of the CRD. The CPU of each
    process in `pids` over the patches, per event delivered, includes the patches' own cost (through the
    worker's webhooks), alike on every path.
    """
    found = []
    for index, path in enumerate(paths):
        listed = await path.raw.get(path.base, {"limit": "500", **path.extra})
        version = json.loads(listed)["metadata"]["resourceVersion"]
        group = FanOut(path.raw, path.base, f"path{index}-", watchers, updates, {}, [])
        all_open = asyncio.Event()
        params = {"resourceVersion": version, "fieldSelector": f"metadata.name={name}", **path.extra}
        tasks = [asyncio.create_task(group.watch(params, all_open)) for _ in range(watchers)]
        try:
            await asyncio.wait_for(all_open.wait(), 60)
            await asyncio.sleep(0.5)
            before = {what: cpu_seconds(pid) for what, pid in pids.items()}
            for i in range(updates):
                value = f"path{index}-{i}"
                await kube.patch(resources.INSTANCE_TYPES, name, {"metadata": {"labels": {"bench": value}}})
                group.sent[value] = time.perf_counter()
                await asyncio.sleep(0.05)
            await asyncio.wait_for(asyncio.gather(*tasks), 120)
            spent = {what: cpu_seconds(pid) - before[what] for what, pid in pids.items()}
        finally:
            for task in tasks:
                task.cancel()
        found.append(Sampled(path.label, group.delays()))
        per_event = ", ".join(f"{what} {1e6 * sec / (watchers * updates):.0f}" for what, sec in spent.items())
        print(f"  {path.label:<14} CPU per event delivered (us): {per_event}", flush=True)
    show(f"WATCH fan-out: {watchers} watchers x {updates} updates, delay from the patch's answer", found)
    return found


# ---- the floor: the cheapest backend behind the aggregator (tests/bench/floor) ----------------------------
FLOOR_SOURCE = Path(__file__).parent / "floor"
FLOOR_SERVICE = "bench-floor"


@contextlib.asynccontextmanager
async def floors(box: Sandbox, kube: Client, raw: Raw) -> AsyncIterator[list[tuple[str, str, int]]]:
    """The floor backend built and served over HTTP/1.1 and over HTTP/2, each behind its own APIService.

    Each watches kube-apiserver at `raw.server` as the sandbox's admin. Yields (label, base path, pid) per
    backend; everything is removed and stopped on the way out.
    """
    binary = box.run_dir / "bench-floor"
    build = await asyncio.create_subprocess_exec(
        "go", "build", "-o", str(binary), ".", cwd=FLOOR_SOURCE, env=go_env()
    )
    if await build.wait() != 0:
        raise RuntimeError(f"go build in {FLOOR_SOURCE} failed")
    upstream = [
        f"--upstream={raw.server}",
        f"--ca={box.certs.ca_crt}",
        f"--cert={box.certs.admin_crt}",
        f"--key={box.certs.admin_key}",
    ]
    procs: list[asyncio.subprocess.Process] = []
    names: list[str] = []
    backends: list[tuple[str, str, int]] = []
    try:
        await kube.create(resources.SERVICES, registration.external_name_service("default", FLOOR_SERVICE))
        for label, flags in (("floor h1", []), ("floor h2", ["--http2"])):
            group = f"{label.replace(' ', '-')}.bench.gpustack.ai"
            port = free_port()
            with (box.run_dir / f"bench-{label.replace(' ', '-')}.log").open("wb") as sink:
                proc = await asyncio.create_subprocess_exec(
                    str(binary),
                    f"--port={port}",
                    f"--served=/apis/{group}/v1",
                    *upstream,
                    *flags,
                    stdout=sink,
                    stderr=asyncio.subprocess.STDOUT,
                )
            procs.append(proc)
            body = registration.apiservice(group, "v1", "default", FLOOR_SERVICE, port, None)
            await kube.create(resources.APISERVICES, body)
            names.append(body["metadata"]["name"])
            backends.append((label, f"/apis/{group}/v1/instancetypes", proc.pid))
        for name in names:
            await eventually(partial(available, kube, name), timeout=60, what=f"APIService {name} Available")
        yield backends
    finally:
        for name in names:
            await kube.delete(resources.APISERVICES, name)
        await kube.delete(resources.SERVICES, FLOOR_SERVICE, "default")
        for proc in procs:
            proc.terminate()
            await proc.wait()


async def available(kube: Client, name: str) -> bool:
    service = await kube.get(resources.APISERVICES, name)
    conditions = (service.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Available" and c.get("status") == "True" for c in conditions)


# ---- the worker and its objects ----------------------------------------------------------------------------
async def worker_ready(worker: Worker) -> bool:
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{worker.health_port}/readyz") as resp,
        ):
            return resp.status == 200
    except aiohttp.ClientConnectionError:
        return False


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def settled(worker: Worker) -> None:
    """Until the worker spends under a tenth of a core over two seconds (done reconciling new types)."""
    assert worker.proc is not None
    pid = worker.proc.pid

    async def quiet() -> bool:
        before = cpu_seconds(pid)
        await asyncio.sleep(2)
        return cpu_seconds(pid) - before < 0.2

    await eventually(quiet, timeout=600, interval=0, what="the worker at rest")


async def create_types(kube: Client, first: int, last: int) -> None:
    def job(i: int) -> Any:
        doc = cpu_type(f"bench-{i:04d}", resources.INSTANCE_TYPES.api_version)
        doc["spec"]["unitResources"]["ram"] = f"{1 + i % 8}Gi"
        return partial(kube.create, resources.INSTANCE_TYPES, doc)

    start = time.perf_counter()
    await bounded((job(i) for i in range(first, last)), concurrency=16)
    print(f"created InstanceTypes {first}..{last - 1} in {time.perf_counter() - start:.1f}s", flush=True)


async def served_count(raw: Raw, count: int) -> bool:
    return len(json.loads(await raw.get(V1, {}))["items"]) >= count


async def unregister(kube: Client) -> None:
    await kube.delete(resources.MUTATING_WEBHOOKS, MUTATING_CONFIGURATION)
    await kube.delete(resources.VALIDATING_WEBHOOKS, VALIDATING_CONFIGURATION)
    for name in CATALOG.apiservice_names:
        await kube.delete(resources.APISERVICES, name)


def rss_mb(worker: Worker) -> float:
    return worker.memory()[0]


async def measure_at(raw: Raw, worker: Worker, count: int, args: argparse.Namespace) -> dict[str, float]:
    await eventually(partial(served_count, raw, count), timeout=120, what=f"v1 lists {count} types")
    await settled(worker)
    rss = rss_mb(worker)
    print(f"\n== {count} InstanceTypes; worker VmRSS {rss:.1f} MB", flush=True)
    ratios = {}
    for what, accept in (("JSON", "application/json"), ("Table", TABLE)):
        found = await reads(raw, f"LIST of {count}, {what}", None, accept, args.samples)
        ratios[f"LIST {count} {what}"] = found[1].p50 / found[0].p50
    return ratios | {f"RSS {count}": rss}


async def watch_paths(
    box: Sandbox, kube: Client, raw: Raw, worker: Worker, port: int, args: argparse.Namespace
) -> dict[str, float]:
    """The WATCH fan-out on every path: the CRD, v1 (served, proxied, direct) and the floors."""
    assert worker.proc is not None
    assert box.state is not None
    direct = Raw.front_proxy(box, port)
    paths = [WatchPath(label, raw, base, extra) for label, base, extra in PATHS]
    paths.append(WatchPath("v1 direct", direct, V1, {}))
    pids = {"kube-apiserver": box.state.pids["kube-apiserver"], "worker": worker.proc.pid}
    try:
        async with contextlib.AsyncExitStack() as stack:
            if args.floor:
                for label, base, pid in await stack.enter_async_context(floors(box, kube, raw)):
                    paths.append(WatchPath(label, raw, base, {}))
                    pids[label] = pid
            watched = await fan_out(paths, kube, "bench-0003", args.watchers, args.updates, pids)
    finally:
        await direct.close()
    crd = watched[0].p50
    ratios = {"WATCH": watched[1].p50 / crd, "WATCH v1 direct": watched[3].p50 / crd}
    return ratios | {f"WATCH {sampled.label}": sampled.p50 / crd for sampled in watched[4:]}


async def run(args: argparse.Namespace) -> None:
    async with control_only_sandbox("bapi-") as box, await connect(box.kubeconfig) as kube:
        raw = Raw.admin(box.kubeconfig)
        cert_dir = box.run_dir / "bench-worker-tls"
        port = free_port()
        worker = Worker(
            box.kubeconfig,
            box.run_dir / "bench-worker.log",
            [f"--secure-port={port}", f"--cert-dir={cert_dir}", *args.worker_arg],
        )
        await worker.start()
        try:
            await eventually(partial(worker_ready, worker), timeout=180, what="the worker is ready")
            summary: dict[str, float] = {}
            await create_types(kube, 0, 100)
            summary |= await measure_at(raw, worker, 100, args)
            for what, accept in (("JSON", "application/json"), ("Table", TABLE)):
                found = await reads(raw, f"GET of one, {what}", "bench-0007", accept, args.samples * 2)
                summary[f"GET {what}"] = found[1].p50 / found[0].p50
            summary |= await watch_paths(box, kube, raw, worker, port, args)
            await create_types(kube, 100, args.types)
            summary |= await measure_at(raw, worker, args.types, args)
        finally:
            if worker.proc is not None and worker.proc.returncode is None:
                worker.proc.send_signal(signal.SIGTERM)
                await asyncio.wait_for(worker.proc.wait(), 60)
            await unregister(kube)
            await raw.close()
    print("\nsummary (v1 served over the CRD, median latency; RSS in MB):")
    for key, value in summary.items():
        print(f"  {key:<22} {value:7.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=100, help="requests per path per measure")
    parser.add_argument("--types", type=int, default=1000, help="InstanceTypes for the large list")
    parser.add_argument("--watchers", type=int, default=50, help="watches per path")
    parser.add_argument("--updates", type=int, default=20, help="patches the watchers see")
    parser.add_argument(
        "--no-floor", dest="floor", action="store_false", help="skip the floor backends (they need Go)"
    )
    parser.add_argument("--quick", action="store_true", help="20 samples, 10 watchers, 5 updates")
    parser.add_argument("--worker-arg", action="append", default=[], help="an extra worker flag (repeatable)")
    args = parser.parse_args()
    if args.quick:
        args.samples, args.watchers, args.updates = 20, 10, 5
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
