"""The chart installed on the sandbox with the real helm, and the worker run as the chart's Pod runs it.

kwok stands in for the chart's Pods (nothing runs in them), so the worker runs here, as a Pod would run it:
no kubeconfig, the in-cluster configuration (KUBERNETES_SERVICE_HOST/PORT, a token and the cluster CA in a
directory, read by kube.incluster over kube.http1), the token one of the chart's ServiceAccount gets from
a TokenRequest, the serving certificate from the chart's Secret, and the chart's arguments. Its RBAC is the
chart's generated RBAC and nothing else. The chart's worker Service is `ExternalName: localhost` (its
`worker.service.externalName` value) on the port the worker listens on, so kube-apiserver reaches it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

from gpustack_operator.install.chart import CHART_DIR
from gpustack_operator.install.subcharts import vendor_all
from gpustack_operator.kube import resources
from gpustack_operator.kube.client import Client
from gpustack_operator.sandbox import build
from gpustack_operator.sandbox.cluster import Sandbox
from gpustack_operator.sandbox.process import free_port
from tests.helpers import eventually
from tests.integration.worker_support import APISERVICE, Served, pod_environment, ready, worker_pool

RELEASE = "gpustack-operator"
NAMESPACE = "gpustack-chart"
WORKER = f"{RELEASE}-worker"
"""The worker's ServiceAccount, Service, ClusterRole and serving Secret (the chart's names)."""
SANDBOX_VALUES = (
    "kueue.enabled=false",  # the sandbox runs Kueue and NFD itself
    "node-feature-discovery.enabled=false",
    "worker.service.externalName=localhost",
)


_HOMES = ("CACHE", "CONFIG", "DATA")
"""helm's own state goes under the sandbox, never into ~."""


async def helm(sandbox: Sandbox, *args: str | Path) -> str:
    """Run the sandbox's helm against it; its output, or AssertionError with it."""
    proc = await asyncio.create_subprocess_exec(
        str(build.binary_path("helm")),
        *map(str, args),
        f"--kubeconfig={sandbox.kubeconfig}",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, **{f"HELM_{k}_HOME": str(sandbox.run_dir / f"helm-{k}") for k in _HOMES}},
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 300)
    text = out.decode(errors="replace")
    assert proc.returncode == 0, f"helm {' '.join(map(str, args))} failed:\n{text}"
    return text


def value_args(*values: str) -> list[str]:
    return [arg for value in values for arg in ("--set", value)]


async def install(sandbox: Sandbox, port: int) -> str:
    await asyncio.to_thread(vendor_all)
    return await helm(
        sandbox,
        "install",
        RELEASE,
        CHART_DIR,
        "--namespace",
        NAMESPACE,
        "--create-namespace",
        *value_args(*SANDBOX_VALUES, f"worker.service.port={port}"),
    )


async def _serving_certs(kube: Client, directory: Path) -> Path:
    """The chart's serving Secret as the files its volume mount shows."""
    secret = await kube.get(resources.SECRETS, f"{WORKER}-cert", NAMESPACE)

    def write() -> None:
        directory.mkdir(parents=True, exist_ok=True)
        for key, value in secret["data"].items():
            (directory / key).write_bytes(base64.b64decode(value))

    await asyncio.to_thread(write)
    return directory


@contextlib.asynccontextmanager
async def installed_worker(sandbox: Sandbox, kube: Client, log_dir: Path, name: str) -> AsyncIterator[Served]:
    """The chart installed (left to the caller to uninstall) and one worker running as its Pod would,
    ready (its APIService Available). At the end the worker is stopped and its namespace removed."""
    port = free_port()
    await install(sandbox, port)
    env = await pod_environment(kube, sandbox, log_dir / "serviceaccount", WORKER, NAMESPACE)
    env["KUBERNETES_SERVICE_NAME"] = WORKER
    certs = await _serving_certs(kube, log_dir / "certs")
    async with worker_pool(sandbox, kube, log_dir, NAMESPACE) as pool:
        worker = await pool.start(
            name,
            f"--secure-port={port}",
            f"--cert-dir={certs}",
            f"--owner-cluster-role={WORKER}",
            f"--kueue-config-map={NAMESPACE}/kueue-manager-config",
            "--kueue-config-map=kueue-system/kueue-manager-config",
            env=env,
            in_cluster=True,
        )
        try:
            await eventually(lambda: ready(worker), timeout=180, what="in-cluster worker ready")
            yield Served(worker, port, NAMESPACE)
        finally:
            await kube.delete(resources.APISERVICES, APISERVICE)
