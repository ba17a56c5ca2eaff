"""Run `gpustack-operator worker` as a real subprocess against the sandbox, and read what it serves.

The leader-election and Prepare tests need the real process: its signal handling, exit code, servers and
lease. Each worker gets its own ports, a pod name (its lease identity starts with it), a log file that a
failing test prints, and a system namespace of the test's own, so tests never share a lease or Secret.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from gpustack_operator.apiserver.webhooks.server import MUTATING_CONFIGURATION, VALIDATING_CONFIGURATION
from gpustack_operator.kube import resources
from gpustack_operator.kube.client import Client
from gpustack_operator.sandbox import build
from gpustack_operator.sandbox.cluster import Sandbox
from gpustack_operator.sandbox.process import free_port
from tests.helpers import eventually

LEASE = "worker.gpustack.ai"
APISERVICE = "v1.worker.gpustack.ai"
SETTINGS_APISERVICE = "v1.gpustack.ai"
WEBHOOK_CONFIGURATIONS = (
    (resources.MUTATING_WEBHOOKS, MUTATING_CONFIGURATION),
    (resources.VALIDATING_WEBHOOKS, VALIDATING_CONFIGURATION),
)
EXECUTABLE = Path(sys.executable).parent / "gpustack-operator"


@dataclass
class Worker:
    name: str
    proc: asyncio.subprocess.Process
    metrics_port: int
    health_port: int
    log: Path

    async def get(self, port: int, path: str) -> tuple[int, str]:
        """(status, body); (0, "") while the worker is not listening yet, so callers can poll."""
        try:
            async with (
                aiohttp.ClientSession() as session,
                session.get(f"http://127.0.0.1:{port}{path}") as resp,
            ):
                return resp.status, await resp.text()
        except aiohttp.ClientConnectionError:
            return 0, ""

    async def metrics(self) -> str:
        return (await self.get(self.metrics_port, "/metrics"))[1]

    async def probe(self, path: str) -> int:
        return (await self.get(self.health_port, path))[0]

    def signal(self, sig: signal.Signals) -> None:
        self.proc.send_signal(sig)

    async def wait(self, timeout: float = 60.0) -> int:
        return await asyncio.wait_for(self.proc.wait(), timeout)

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


class Workers:
    """Starts workers in one system namespace of its own (see `worker_pool`)."""

    def __init__(self, sandbox: Sandbox, log_dir: Path, namespace: str | None = None) -> None:
        self.namespace = namespace or f"sys-{uuid.uuid4().hex[:8]}"
        self.started: list[Worker] = []
        self._sandbox = sandbox
        self._log_dir = log_dir

    async def start(
        self, name: str, *args: str, env: dict[str, str] | None = None, in_cluster: bool = False
    ) -> Worker:
        """`in_cluster`: no --kubeconfig; `env` then says where the API server and the token are."""
        metrics_port, health_port = free_port(), free_port()
        log = self._log_dir / f"{name}.log"
        environ = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        environ.update(KUBERNETES_POD_NAMESPACE=self.namespace, KUBERNETES_POD_NAME=name)
        environ.update(env or {})  # a test may name another system namespace (the walkthrough: make run's)
        with log.open("wb") as sink:
            proc = await asyncio.create_subprocess_exec(
                str(EXECUTABLE),
                "worker",
                *(() if in_cluster else (f"--kubeconfig={self._sandbox.kubeconfig}",)),
                f"--metrics-bind-address=127.0.0.1:{metrics_port}",
                f"--health-probe-bind-address=127.0.0.1:{health_port}",
                # No aggregated API unless a test asks (--secure-port=N): its APIService is cluster-wide,
                # and one left pointing at a stopped worker would hold up namespace deletion for every test.
                "--secure-port=0",
                *args,
                stdout=sink,
                stderr=asyncio.subprocess.STDOUT,
                env=environ,
            )
        worker = Worker(name, proc, metrics_port, health_port, log)
        self.started.append(worker)
        return worker


def cpu_type(name: str, api_version: str = "worker.gpustack.ai/v1") -> dict[str, Any]:
    """A CPU-only InstanceType manifest (10Gi local storage) in the given version."""
    return {
        "apiVersion": api_version,
        "kind": "InstanceType",
        "metadata": {"name": name},
        "spec": {
            "acceleratable": False,
            "generalGroup": "generic",
            "os": "linux",
            "arch": "amd64",
            "unitResources": {"cpu": "1", "ram": "2Gi"},
            "localStorage": "10Gi",
        },
    }


class Kubectl:
    """The sandbox's kubectl (built from tools/k8s at the cluster's version) against its kubeconfig.

    Every run gets a discovery cache of its own (`--cache-dir` in a new directory, removed afterwards)
    unless the Kubectl is made with `cache_dir`. kubectl keeps what discovery told it for six hours, in
    `~/.kube/cache/discovery/<host_port>/`, and resolves a resource name from that cache as long as the
    name is found there; so with the default cache, whichever test's kubectl first asked while the
    `v1.worker.gpustack.ai` APIService was absent decided, for every later test, that `instancetypes`
    means the v1alpha1 CRD (issue 21). A test sees the discovery of the moment it runs kubectl; a test
    about caching itself passes the directory it means to share between runs.
    """

    def __init__(self, sandbox: Sandbox, cache_dir: Path | None = None) -> None:
        self.binary = str(build.binary_path("kubectl"))
        self.env = {**os.environ, "KUBECONFIG": str(sandbox.kubeconfig)}
        self.cache_dir = cache_dir

    @contextlib.contextmanager
    def discovery(self) -> Iterator[Path]:
        """The cache directory for one run: `cache_dir`, or a new one removed when the run ends."""
        if self.cache_dir is not None:
            yield self.cache_dir
            return
        path = Path(tempfile.mkdtemp(prefix="kubectl-cache-"))
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)

    def command(self, cache: Path, *args: str) -> list[str]:
        """The argv of one run with discovery cached in `cache`."""
        return [self.binary, f"--cache-dir={cache}", *args]

    async def run(self, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
        with self.discovery() as cache:
            proc = await asyncio.create_subprocess_exec(
                *self.command(cache, *args),
                stdin=asyncio.subprocess.PIPE if stdin is not None else None,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self.env,
            )
            out, err = await asyncio.wait_for(proc.communicate(stdin.encode() if stdin else None), 60)
        return proc.returncode or 0, out.decode(), err.decode()

    async def ok(self, *args: str, stdin: str | None = None) -> str:
        rc, out, err = await self.run(*args, stdin=stdin)
        assert rc == 0, f"kubectl {' '.join(args)} failed ({rc}): {err}"
        assert "stale GroupVersion" not in err
        return out


@contextlib.asynccontextmanager
async def worker_pool(
    sandbox: Sandbox, kube: Client, log_dir: Path, namespace: str | None = None
) -> AsyncIterator[Workers]:
    """Workers for one test; at the end, kill those still running, print their logs, drop the namespace,
    the webhook configurations and the Settings APIService a worker with `--secure-port` installed: the
    webhooks fail closed, so one left pointing at a stopped worker would refuse every later InstanceType
    and queued Pod in the session, and an unavailable APIService holds up namespace deletion. (The
    `v1.worker.gpustack.ai` APIService is left to the tests, which check it after the worker stops.)"""
    pool = Workers(sandbox, log_dir, namespace)
    try:
        yield pool
    finally:
        for worker in pool.started:
            if worker.proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    worker.proc.kill()
                await worker.proc.wait()
            print(f"\n--- {worker.name} (exit {worker.proc.returncode}) ---\n{worker.tail()}")
        for res, name in WEBHOOK_CONFIGURATIONS:
            await kube.delete(res, name)
        await kube.delete(resources.APISERVICES, SETTINGS_APISERVICE)
        await kube.delete(resources.NAMESPACES, pool.namespace)


@dataclass
class Served:
    """A worker serving the aggregated API and the webhooks on `port`."""

    worker: Worker
    port: int
    namespace: str
    """The worker's system namespace (its Lease, settings Secret and routing Service)."""


@contextlib.asynccontextmanager
async def serving_worker(sandbox: Sandbox, kube: Client, log_dir: Path, name: str) -> AsyncIterator[Served]:
    """One worker with the aggregated API and webhooks (`--cert-dir` under `log_dir`), ready (its
    APIService Available); at the end its APIService is removed (and, by worker_pool, its webhooks)."""
    async with worker_pool(sandbox, kube, log_dir) as pool:
        port = free_port()
        worker = await pool.start(name, f"--secure-port={port}", f"--cert-dir={log_dir / 'tls'}")
        try:
            await eventually(lambda: ready(worker), timeout=180, what="worker ready (APIService Available)")
            yield Served(worker, port, pool.namespace)
        finally:
            await kube.delete(resources.APISERVICES, APISERVICE)


async def ready(worker: Worker) -> bool:
    """/readyz answers 200 (False while the server is not up yet)."""
    return await worker.probe("/readyz") == 200


async def lease_spec(kube: Client, namespace: str) -> dict[str, Any]:
    lease = await kube.get_or_none(resources.LEASES, LEASE, namespace)
    return dict((lease or {}).get("spec") or {})


async def holder(kube: Client, namespace: str) -> str:
    """The pod name of the lease holder ("" when nobody holds it); identities are `<pod>_<random>`."""
    identity = (await lease_spec(kube, namespace)).get("holderIdentity") or ""
    return str(identity).rpartition("_")[0]


def leader_gauge(metrics_text: str) -> float | None:
    for line in metrics_text.splitlines():
        if line.startswith(f'gpustack_leader_election_status{{name="{LEASE}"}}'):
            return float(line.rsplit(" ", 1)[1])
    return None


async def service_account_mount(
    kube: Client, ca: Path, directory: Path, account: str, namespace: str
) -> Path:
    """`directory` holding a TokenRequest token of ServiceAccount `namespace/account` and the cluster CA
    `ca`, as a Pod's service-account volume shows them."""
    answer = await kube.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
    )

    def write() -> None:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "token").write_text(answer["status"]["token"])
        (directory / "ca.crt").write_bytes(ca.read_bytes())

    await asyncio.to_thread(write)
    return directory


async def pod_environment(
    kube: Client, sandbox: Sandbox, directory: Path, account: str, namespace: str
) -> dict[str, str]:
    """What a Pod of ServiceAccount `namespace/account` has: the mounted token and CA (here in `directory`,
    named by GPUSTACK_SERVICE_ACCOUNT_DIR), KUBERNETES_SERVICE_HOST/PORT and its namespace."""
    await service_account_mount(kube, sandbox.certs.ca_crt, directory, account, namespace)
    server, api_port = kube.host.removeprefix("https://").rsplit(":", 1)
    return {
        "KUBERNETES_SERVICE_HOST": server,
        "KUBERNETES_SERVICE_PORT": api_port,
        "GPUSTACK_SERVICE_ACCOUNT_DIR": str(directory),
        "KUBERNETES_POD_NAMESPACE": namespace,
    }
