"""Pod mutating webhook latency: called directly at 200 reviews/s, and Pod creation through kube-apiserver
with our webhooks installed vs without them.

Run: `.venv/bin/python -m tests.bench.bench_webhooks` (starts and stops its own sandbox, one control node;
about ten minutes; `--seconds 10` is a quick try).

Direct: an open-loop load generator (requests leave on schedule, whether or not earlier ones have been
answered, up to `--in-flight` at once) POSTs an AdmissionReview for a sliced-GPU Pod (`nvidia.com/gpu.sliced:
1`, `memory-percentage: 25`; the Pod as kube-apiserver defaulted it in a dry-run create, Kueue's own mutation
included) to the real `gpustack-operator worker`'s mutating Pod path at `--rate` reviews/s for `--seconds`,
over HTTPS with keep-alive, verifying the worker's certificate for the Service name kube-apiserver verifies.
The address, path and CA come from the MutatingWebhookConfiguration the worker installed. A second run sends
the `memory-mib: 4096` form, whose fold reads the card VRAM of the InstanceType entered through the Pod's
queue (the worker's InstanceType cache; its API reads of InstanceTypes during the run are printed, since a
cache miss would show there). Baseline, same run, same rate, before and after ours: the same TLS and aiohttp
server stack (apiserver.serving, same certificate) in its own process, answering `allowed` with no patch after
decoding the review; the difference is our routing, review parsing, fold and JSON patch. Reported: p50/p99/max
per review, the achieved rate, and the server's CPU time per review. Goal: p99 <= 10 ms.

Through kube-apiserver: server-side dry-run creates (`dryRun=All`: every admission webhook runs, nothing is
stored) of the same Pod labelled `kueue.x-k8s.io/queue-name`, at `--api-rate` creates/s, open loop, from this
process's kube client (no client rate limit). Kueue's own Pod webhooks run on every one of them, as in a
real cluster. Runs, in order: without our webhooks (before the worker starts); with ours (the worker
running, its configurations installed, once it is at rest after creating the InstanceType) for three Pods,
each calling what its matchConditions select: the sliced one (the mutating hook, which folds and checks),
a whole-card one (`nvidia.com/gpu: 1`: the validating hook) and a CPU-only one (no call); twice with no-op
webhooks for the sliced Pod (worker stopped, its configurations deleted, copies of our Pod webhooks' entries,
rules, selector, conditions and settings, sent to the baseline server, which answers `allowed`, first
without a patch, then with a one-operation patch adding a label: what one call on this stack costs, and
what kube-apiserver's applying a patch adds); and without again (a drift check of the shared machine).
Reported: p50/p99 per create, each run's ratio to the mean of the two without runs (the issue's goal: 1.5x
at p50, 2x at p99), the worker's CPU per create and its full (generation 2) garbage collections during each
run, and how many connections kube-apiserver opened to the baseline server. A slot that finds
`--in-flight` requests still waiting is skipped and counted: the achieved rate says whether the machine
kept up (when it does not, the latencies are queueing, not service times).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import copy
import json
import os
import signal
import ssl
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import aiohttp
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families
from tests.bench.bench_chain import Worker, control_only_sandbox
from tests.helpers import eventually
from tests.integration.test_worker_webhooks import accelerated_type

from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import KUEUE_QUEUE_NAME_LABEL
from gpustack_operator.apiserver import serving
from gpustack_operator.apiserver.catalog import CATALOG
from gpustack_operator.apiserver.webhooks.review import API_VERSION
from gpustack_operator.apiserver.webhooks.server import MUTATING_CONFIGURATION, VALIDATING_CONFIGURATION
from gpustack_operator.kube import errors, resources
from gpustack_operator.kube.client import Client, connect
from gpustack_operator.rules.naming.queues import format_local_queue_name
from gpustack_operator.sandbox.process import free_port

GPU = "nvidia.com/gpu"
SLICED, UNITS = f"{GPU}.sliced", f"{GPU}.sliced.units"
MEM_PCT, MEM_MIB = f"{GPU}.sliced.memory-percentage", f"{GPU}.sliced.memory-mib"
NAMESPACE = "bench-hooks"
INSTANCE_TYPE = "bench-hooks"
"""An accelerated InstanceType with 40960Mi cards (no node serves it): the memory-mib fold divides by it."""
GOAL_P99_MS = 10.0
LATE = 0.005
"""A request leaving this many seconds after its slot counts as late (the generator fell behind)."""
WARM_UP = 20


# ---- the open-loop load generator --------------------------------------------------------------------------
@dataclass
class Load:
    """One run's answered requests' latencies (seconds), and what went wrong."""

    what: str
    rate: float
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    first_error: str = ""
    skipped: int = 0
    """Slots not sent because `in_flight` requests were already waiting."""
    late: int = 0
    """Slots whose request left over `LATE` after its time: this process fell behind (a stall here)."""
    elapsed: float = 0.0
    cpu: float | None = None
    """The server's CPU seconds during the run (direct runs)."""

    def ms(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return 1000 * ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1)))] if ordered else float("nan")

    @property
    def achieved(self) -> float:
        return len(self.latencies) / self.elapsed if self.elapsed else 0.0

    def line(self) -> str:
        text = (
            f"  {self.what:<40} p50 {self.ms(0.5):6.2f} ms  p99 {self.ms(0.99):7.2f} ms"
            f"  max {self.ms(1):7.2f} ms  {self.achieved:6.1f}/s of {self.rate:g}/s"
        )
        if self.cpu is not None and self.latencies:
            text += f"  server CPU {1000 * self.cpu / len(self.latencies):.2f} ms/review"
        problems = [f"{n} {what}" for n, what in ((self.errors, "errors"), (self.skipped, "skipped")) if n]
        if self.late:
            problems.append(f"{self.late} sent > {LATE * 1000:.0f} ms late")
        if problems:
            text += f"  ({', '.join(problems)}{'; first error: ' + self.first_error if self.errors else ''})"
        return text


async def open_loop(
    what: str, send: Callable[[], Awaitable[None]], rate: float, seconds: float, in_flight: int
) -> Load:
    """`send` at `rate` per second for `seconds`, each on its own schedule (an open loop: a slow answer
    does not delay the next request, so queueing shows in the latencies), at most `in_flight` at once."""
    result = Load(what, rate)
    pending: set[asyncio.Task[None]] = set()

    async def one() -> None:
        t0 = time.perf_counter()
        try:
            await send()
        except (errors.KubeError, aiohttp.ClientError, TimeoutError, ValueError) as err:
            result.errors += 1
            result.first_error = result.first_error or f"{type(err).__name__}: {err}"[:200]
        else:
            result.latencies.append(time.perf_counter() - t0)

    loop = asyncio.get_running_loop()
    start = loop.time()
    for i in range(round(rate * seconds)):
        due = start + i / rate
        if due > loop.time():
            await asyncio.sleep(due - loop.time())
        if loop.time() - due > LATE:
            result.late += 1
        if len(pending) >= in_flight:
            result.skipped += 1
            continue
        task = asyncio.create_task(one())
        pending.add(task)
        task.add_done_callback(pending.discard)
    await asyncio.gather(*pending)
    result.elapsed = loop.time() - start
    print(result.line(), flush=True)
    return result


async def warm_up(send: Callable[[], Awaitable[None]]) -> None:
    """A few requests one after another: connections open, TLS done, caches touched."""
    for _ in range(WARM_UP):
        await send()


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ---- what is sent ------------------------------------------------------------------------------------------
def sliced_pod(queue: str, memory: dict[str, str]) -> JSONObj:
    """A queued Pod whose one container asks for a card slice by `memory` (one of the two memory keys)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "bench-",
            "namespace": NAMESPACE,
            "labels": {KUEUE_QUEUE_NAME_LABEL: queue},
        },
        "spec": {
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"limits": {SLICED: "1", **memory}}}
            ]
        },
    }


def as_admitted(stored: JSONObj) -> JSONObj:
    """A dry-run create's answer as the object of a CREATE review: no name (generateName), uid or time."""
    pod = copy.deepcopy(stored)
    for key in ("name", "uid", "creationTimestamp", "resourceVersion"):
        pod["metadata"].pop(key, None)
    return pod


def review(pod: JSONObj, uid: str) -> bytes:
    """The AdmissionReview kube-apiserver sends our mutating Pod webhook for creating `pod`."""
    gvk = {"group": "", "version": "v1", "kind": "Pod"}
    gvr = {"group": "", "version": "v1", "resource": "pods"}
    request = {
        "uid": uid,
        "kind": gvk,
        "resource": gvr,
        "requestKind": gvk,
        "requestResource": gvr,
        "namespace": NAMESPACE,
        "operation": "CREATE",
        "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]},
        "object": pod,
        "oldObject": None,
        "dryRun": False,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
    }
    return json.dumps({"apiVersion": API_VERSION, "kind": "AdmissionReview", "request": request}).encode()


def units_of(pod: JSONObj) -> str | None:
    return ((pod["spec"]["containers"][0].get("resources") or {}).get("limits") or {}).get(UNITS)


# ---- direct calls ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Target:
    """Where kube-apiserver sends our mutating Pod reviews, from the installed configuration."""

    port: int
    path: str
    host: str
    """The Service name the serving certificate is verified against (`<service>.<namespace>.svc`)."""
    ca_pem: str

    def url(self, port: int | None = None, path: str | None = None) -> str:
        return f"https://127.0.0.1:{port or self.port}{path or self.path}"

    def ssl(self) -> ssl.SSLContext:
        return ssl.create_default_context(cadata=self.ca_pem)


async def installed_target(kube: Client) -> Target:
    config = await kube.get(resources.MUTATING_WEBHOOKS, MUTATING_CONFIGURATION)
    hook = next(w for w in config["webhooks"] if "pods" in w["rules"][0]["resources"])
    client = hook["clientConfig"]
    service = client["service"]
    host = f"{service['name']}.{service['namespace']}.svc"
    return Target(int(service["port"]), service["path"], host, base64.b64decode(client["caBundle"]).decode())


def direct_sender(
    session: aiohttp.ClientSession, target: Target, url: str, body: bytes, patched: bool = True
) -> Callable[[], Awaitable[None]]:
    """One review POSTed as kube-apiserver would; ValueError unless it is allowed (with a patch when
    `patched`)."""
    headers = {"Content-Type": "application/json"}

    async def send() -> None:
        async with session.post(url, data=body, headers=headers, server_hostname=target.host) as resp:
            text = await resp.read()
        if resp.status != 200:
            raise ValueError(f"HTTP {resp.status}: {text[:200]!r}")
        response = json.loads(text)["response"]
        if not response.get("allowed") or (patched and "patch" not in response):
            raise ValueError(f"not allowed with a patch: {response}")

    return send


async def direct(
    target: Target, url: str, body: bytes, pid: int, args: argparse.Namespace, what: str, patched: bool = True
) -> Load:
    connector = aiohttp.TCPConnector(ssl=target.ssl(), limit=args.in_flight)
    async with aiohttp.ClientSession(connector=connector) as session:
        send = direct_sender(session, target, url, body, patched)
        await warm_up(send)
        cpu = cpu_seconds(pid)
        load = await open_loop(what, send, args.rate, args.seconds, args.in_flight)
        load.cpu = cpu_seconds(pid) - cpu
        return load


BASELINE_PATH = "/bench-baseline"
PATCHING_PATH = "/bench-baseline-patching"
"""The baseline server's route that answers with a one-operation patch (a label) instead of none."""
PATCHED_LABEL = "bench.gpustack.ai~1patched"
PROBE_LABEL = "bench.gpustack.ai/probe"
"""A Pod labelled so is refused by the baseline server: a dry-run create of one says whether kube-apiserver
calls it."""
NO_OP_PREFIX = "bench-no-op"


async def baseline_server(port: int, cert_dir: Path) -> None:
    """The baseline's server (its own process): apiserver.serving's TLS and aiohttp stack with the worker's
    certificate, answering every review `allowed` without a patch; until SIGTERM."""

    connections: set[int] = set()
    reviews = 0

    async def handle(request: web.Request) -> web.Response:
        nonlocal reviews
        reviews += 1
        connections.add(id(request.transport))
        asked = json.loads(await request.read())["request"]
        labels = ((asked.get("object") or {}).get("metadata") or {}).get("labels") or {}
        response = {"uid": asked["uid"], "allowed": PROBE_LABEL not in labels}
        if request.path == PATCHING_PATH:
            ops = [{"op": "add", "path": f"/metadata/labels/{PATCHED_LABEL}", "value": "1"}]
            response |= {
                "patchType": "JSONPatch",
                "patch": base64.b64encode(json.dumps(ops).encode()).decode(),
            }
        return web.json_response({"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response})

    app = web.Application(client_max_size=serving.MAX_BODY_BYTES)
    app.router.add_post(BASELINE_PATH, handle)
    app.router.add_post(PATCHING_PATH, handle)
    ctx = serving.ssl_context(serving.load_or_create(cert_dir, []), "")
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    server = asyncio.create_task(serving.serve(app, ("127.0.0.1", port), ctx))
    await stop.wait()
    print(
        f"  (the baseline server answered {reviews} reviews over {len(connections)} connections)", flush=True
    )
    server.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await server


@contextlib.asynccontextmanager
async def baseline_process(cert_dir: Path) -> AsyncIterator[tuple[int, int]]:
    """The baseline server running; yields (port, pid)."""
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.bench.bench_webhooks",
        f"--baseline-server={port}",
        f"--cert-dir={cert_dir}",
    )
    try:
        await eventually(partial(listening, port), timeout=30, what="the baseline server listens")
        yield port, proc.pid
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.wait(), 30)


async def listening(port: int) -> bool:
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return False
    writer.close()
    await writer.wait_closed()
    return True


# ---- through kube-apiserver --------------------------------------------------------------------------------
async def dry_run(kube: Client, pod: JSONObj) -> JSONObj:
    return await kube.create(resources.PODS, pod, NAMESPACE, dry_run=True)


async def accepted(kube: Client, pod: JSONObj) -> JSONObj | None:
    """The dry-run-created Pod; None while Kueue's webhook does not know the namespace yet."""
    try:
        return await dry_run(kube, pod)
    except errors.KubeError:
        return None


async def folded(kube: Client, pod: JSONObj, want: bool) -> bool:
    """A dry-run create comes back with (`want`) or without our units: kube-apiserver sees our
    configurations as they are now."""
    return (units_of(await dry_run(kube, pod)) is not None) == want


Durations = dict[tuple[str, str], tuple[float, float]]
"""(family, label) -> (sum of seconds, count) of kube-apiserver's admission histograms."""


async def admission_durations(kube: Client) -> Durations:
    """kube-apiserver's own admission timings so far: per webhook (`apiserver_admission_webhook_…`, by name)
    and per phase (`apiserver_admission_step_…`, admit or validate)."""
    text = b""
    async with kube.stream_bytes("/metrics", params={}, read_timeout=30) as chunks:
        async for chunk in chunks:
            text += chunk
    found: Durations = {}
    for family in text_string_to_metric_families(text.decode()):
        key = {
            "apiserver_admission_webhook_admission_duration_seconds": "name",
            "apiserver_admission_step_admission_duration_seconds": "type",
        }.get(family.name)
        for sample in family.samples if key else ():
            part = sample.name.rsplit("_", 1)[-1]
            if part in ("sum", "count") and sample.labels.get("operation") == "CREATE":
                label = (family.name, sample.labels[key])
                total, count = found.get(label, (0.0, 0.0))
                found[label] = (
                    (total + sample.value, count) if part == "sum" else (total, count + sample.value)
                )
    return found


def print_durations(before: Durations, after: Durations) -> None:
    """Mean time kube-apiserver spent per create in each webhook and phase between the two readings."""
    for (family, label), (total, count) in sorted(after.items()):
        total0, count0 = before.get((family, label), (0.0, 0.0))
        if count > count0:
            what = "webhook" if "webhook" in family else "phase"
            mean = 1000 * (total - total0) / (count - count0)
            print(f"    kube-apiserver, {what} {label}: {mean:.2f} ms mean")


async def through_api(kube: Client, pod: JSONObj, args: argparse.Namespace, what: str) -> Load:
    async def send() -> None:
        await dry_run(kube, pod)

    await warm_up(send)
    before = await admission_durations(kube)
    load = await open_loop(what, send, args.api_rate, args.seconds, args.in_flight)
    print_durations(before, await admission_durations(kube))
    return load


CONFIGURATIONS = (
    (resources.MUTATING_WEBHOOKS, MUTATING_CONFIGURATION),
    (resources.VALIDATING_WEBHOOKS, VALIDATING_CONFIGURATION),
)


def no_op_configuration(ours: JSONObj, port: int, patching: bool) -> JSONObj:
    """`ours` (a live configuration) with only its Pod webhooks, sent to the baseline server on `port`
    (its patching route for a mutating one when `patching`)."""
    hooks = [copy.deepcopy(w) for w in ours["webhooks"] if "pods" in w["rules"][0]["resources"]]
    path = PATCHING_PATH if patching and ours["kind"] == "MutatingWebhookConfiguration" else BASELINE_PATH
    for hook in hooks:
        hook["clientConfig"]["service"].update(port=port, path=path)
    name = f"{NO_OP_PREFIX}-{ours['metadata']['name']}"
    return {
        "apiVersion": ours["apiVersion"],
        "kind": ours["kind"],
        "metadata": {"name": name},
        "webhooks": hooks,
    }


async def probed(kube: Client, pod: JSONObj, want: bool) -> bool:
    """kube-apiserver calls (`want`) or does not call the baseline server for a labelled Pod."""
    probe = copy.deepcopy(pod)
    probe["metadata"]["labels"][PROBE_LABEL] = "1"
    try:
        await dry_run(kube, probe)
    except errors.KubeError:
        return want
    return not want


async def through_no_op(
    kube: Client, pod: JSONObj, ours: list[JSONObj], cert_dir: Path, args: argparse.Namespace, patching: bool
) -> Load:
    """Pod creates with no-op webhooks: copies of our Pod webhooks' entries (rules, selector, conditions,
    settings) on the same TLS and aiohttp stack and certificate, answering `allowed` without reading the
    Pod, with a one-label patch from the mutating one when `patching`."""
    what = "with no-op webhooks, " + ("a one-label patch" if patching else "no patch")
    async with baseline_process(cert_dir) as (port, pid):
        created = [
            (res, no_op_configuration(config, port, patching))
            for (res, _), config in zip(CONFIGURATIONS, ours, strict=True)
        ]
        for res, config in created:
            await kube.create(res, config)
        try:
            await eventually(
                partial(probed, kube, pod, True), timeout=60, what="kube-apiserver calls the no-op"
            )
            cpu = cpu_seconds(pid)
            load = await through_api(kube, pod, args, f"{what} (sliced Pod)")
            cpu = cpu_seconds(pid) - cpu
            per_create = 1000 * cpu / max(1, len(load.latencies))
            print(f"  the no-op server's CPU per create: {per_create:.2f} ms")
        finally:
            for res, config in created:
                await kube.delete(res, config["metadata"]["name"])
    await eventually(partial(probed, kube, pod, False), timeout=60, what="the no-op webhooks gone")
    return load


async def unregister(kube: Client) -> None:
    """What the stopped worker left: its webhook configurations (they fail closed) and APIServices."""
    await kube.delete(resources.MUTATING_WEBHOOKS, MUTATING_CONFIGURATION)
    await kube.delete(resources.VALIDATING_WEBHOOKS, VALIDATING_CONFIGURATION)
    for name in CATALOG.apiservice_names:
        await kube.delete(resources.APISERVICES, name)


async def worker_ready(worker: Worker) -> bool:
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{worker.health_port}/readyz") as resp,
        ):
            return resp.status == 200
    except aiohttp.ClientConnectionError:
        return False


async def instance_type_reads(worker: Worker) -> int:
    """GET requests the worker has sent for InstanceTypes (reads, lists and watches)."""
    counts = await worker.requests()
    return sum(n for (method, res, _), n in counts.items() if res == "instancetypes" and method == "GET")


# ---- the run -----------------------------------------------------------------------------------------------
async def at_rest(pid: int, what: str) -> None:
    """Until process `pid` spends under a tenth of a core over a second (a worker done reacting to setup)."""

    async def quiet() -> bool:
        before = cpu_seconds(pid)
        await asyncio.sleep(1)
        return cpu_seconds(pid) - before < 0.1

    await eventually(quiet, timeout=120, interval=0, what=f"{what} at rest")


async def run(args: argparse.Namespace) -> None:
    print(
        f"direct: {args.rate:g} reviews/s, through kube-apiserver: {args.api_rate:g} creates/s; "
        f"{args.seconds:g} s each, at most {args.in_flight} in flight"
    )
    async with control_only_sandbox("bw-") as box, await connect(box.kubeconfig) as kube:
        await kube.create(resources.NAMESPACES, {"metadata": {"name": NAMESPACE}})
        queue = format_local_queue_name(INSTANCE_TYPE)
        percent = sliced_pod(queue, {MEM_PCT: "25"})
        stored = await eventually(
            partial(accepted, kube, percent), timeout=60, what=f"Kueue's webhook knows {NAMESPACE}"
        )
        print("\nthrough kube-apiserver, dry-run Pod creates:", flush=True)
        without = [await through_api(kube, percent, args, "without our webhooks (no worker yet)")]

        cert_dir = box.run_dir / "bench-worker-tls"
        worker = Worker(
            box.kubeconfig,
            box.run_dir / "bench-worker.log",
            [f"--secure-port={free_port()}", f"--cert-dir={cert_dir}", *args.worker_arg],
        )
        await worker.start()
        assert worker.proc is not None
        try:
            await eventually(partial(worker_ready, worker), timeout=180, what="the worker is ready")
            await eventually(partial(folded, kube, percent, True), timeout=60, what="kube-apiserver calls us")
            await kube.create(resources.INSTANCE_TYPES, accelerated_type(INSTANCE_TYPE))
            target = await installed_target(kube)
            mib = review(with_memory(as_admitted(stored), {MEM_MIB: "4096"}), "bench-mib")
            await eventually(partial(type_cached, target, mib), timeout=60, what="the type's queue entrance")
            await at_rest(worker.proc.pid, "the worker")
            ours_by_kind = []
            for kind, pod in (
                ("sliced Pod: the mutating hook", percent),
                ("whole-card Pod: the validating hook", with_limits(percent, {GPU: "1"})),
                ("CPU-only Pod: no call", with_limits(percent, {"cpu": "1"})),
            ):
                cpu, full = cpu_seconds(worker.proc.pid), await full_collections(worker)
                load = await through_api(kube, pod, args, f"with our webhooks ({kind})")
                cpu = cpu_seconds(worker.proc.pid) - cpu
                full = await full_collections(worker) - full
                per_create = 1000 * cpu / max(1, len(load.latencies))
                print(f"  the worker's CPU per create: {per_create:.2f} ms; full garbage collections: {full}")
                ours_by_kind.append(load)
            percentage = review(as_admitted(stored), "bench-percentage")
            direct_runs = await direct_calls(worker, target, percentage, mib, cert_dir, args)
            ours = [await kube.get(r, n) for r, n in CONFIGURATIONS]
        finally:
            await worker.stop()
            await unregister(kube)
        await eventually(partial(folded, kube, percent, False), timeout=60, what="our webhooks gone")
        no_op = [await through_no_op(kube, percent, ours, cert_dir, args, p) for p in (False, True)]
        without.append(await through_api(kube, percent, args, "without our webhooks (worker stopped)"))
    summary(direct_runs, without, ours_by_kind, no_op)


async def full_collections(worker: Worker) -> int:
    """Generation-2 garbage collections the worker has run (prometheus_client's process collector)."""
    text = await worker.metrics()
    line = next(x for x in text.splitlines() if x.startswith('python_gc_collections_total{generation="2"}'))
    return int(float(line.split()[-1]))


def with_limits(pod: JSONObj, limits: dict[str, str]) -> JSONObj:
    """`pod` with its container's limits replaced by `limits`."""
    changed = copy.deepcopy(pod)
    changed["spec"]["containers"][0]["resources"]["limits"] = dict(limits)
    return changed


def with_memory(pod: JSONObj, memory: dict[str, str]) -> JSONObj:
    """`pod` asking for its slice by `memory` instead of the memory key it has (in limits, and in the
    requests kube-apiserver defaulted from them)."""
    changed = copy.deepcopy(pod)
    for section in changed["spec"]["containers"][0]["resources"].values():
        for key in (MEM_PCT, MEM_MIB):
            section.pop(key, None)
        section.update(memory)
    return changed


async def direct_calls(
    worker: Worker, target: Target, percentage: bytes, mib: bytes, cert_dir: Path, args: argparse.Namespace
) -> list[Load]:
    """Baseline, ours (memory-percentage), ours (memory-mib), baseline again."""
    assert worker.proc is not None
    pid = worker.proc.pid
    print(f"\ndirect, {target.url()} (certificate verified for {target.host}):", flush=True)
    async with baseline_process(cert_dir) as (port, baseline_pid):
        url = target.url(port, BASELINE_PATH)
        runs = [await direct(target, url, percentage, baseline_pid, args, "baseline server", patched=False)]
        runs.append(await direct(target, target.url(), percentage, pid, args, "ours, memory-percentage"))
        reads = await instance_type_reads(worker)
        runs.append(await direct(target, target.url(), mib, pid, args, "ours, memory-mib (VRAM lookup)"))
        reads = await instance_type_reads(worker) - reads
        runs.append(
            await direct(target, url, percentage, baseline_pid, args, "baseline again", patched=False)
        )
    print(f"  the worker's InstanceType reads from the API during the memory-mib run: {reads}")
    return runs


async def type_cached(target: Target, body: bytes) -> bool:
    """The memory-mib review folds (the InstanceType and its queue-entrance label exist)."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=target.ssl())) as session:
        try:
            await direct_sender(session, target, target.url(), body)()
        except ValueError:
            return False
    return True


def summary(direct_runs: list[Load], without: list[Load], ours: list[Load], no_op: list[Load]) -> None:
    print("\nresults (the machine is shared; latencies include the client's own scheduling):")
    baselines, ours_direct = [direct_runs[0], direct_runs[-1]], direct_runs[1:-1]
    for load in direct_runs:
        print(load.line())
    p50, p99 = (sum(b.ms(q) for b in baselines) / len(baselines) for q in (0.5, 0.99))
    for load in ours_direct:
        verdict = "meets" if load.ms(0.99) <= GOAL_P99_MS else "MISSES"
        print(
            f"  {load.what}: p99 {load.ms(0.99):.2f} ms, goal <= {GOAL_P99_MS:g} ms ({verdict}); "
            f"{load.ms(0.5) / p50:.2f}x / {load.ms(0.99) / p99:.2f}x the baselines' mean p50 / p99"
        )
    for load in (*without, *no_op, *ours):
        print(load.line())
    p50 = sum(w.ms(0.5) for w in without) / len(without)
    p99 = sum(w.ms(0.99) for w in without) / len(without)
    print(f"  Pod creates / without any webhook of ours (mean of both runs, {p50:.2f} / {p99:.2f} ms):")
    for load in (*no_op, *ours):
        verdict = "meets" if load.ms(0.5) <= 1.5 * p50 and load.ms(0.99) <= 2 * p99 else "MISSES"
        print(
            f"    {load.what}: p50 {load.ms(0.5) / p50:.2f}x, p99 {load.ms(0.99) / p99:.2f}x "
            f"(goal 1.5x / 2x: {verdict})"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="seconds of load per run")
    parser.add_argument("--rate", type=float, default=200.0, help="direct reviews per second")
    parser.add_argument(
        "--api-rate", type=float, default=200.0, help="Pod creates per second via kube-apiserver"
    )
    parser.add_argument(
        "--in-flight", type=int, default=100, help="most requests waiting at once (else skipped)"
    )
    parser.add_argument("--worker-arg", action="append", default=[], help="an extra worker flag (repeatable)")
    parser.add_argument("--baseline-server", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--cert-dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    try:
        if args.baseline_server:
            asyncio.run(baseline_server(args.baseline_server, args.cert_dir))
        else:
            asyncio.run(run(args))
    except errors.KubeError as e:
        raise SystemExit(f"bench_webhooks: {e}") from e
    except KeyboardInterrupt:
        raise SystemExit("bench_webhooks: interrupted (what it started is stopped)") from None
