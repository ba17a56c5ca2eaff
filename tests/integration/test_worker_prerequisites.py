"""A worker pointed at a cluster without NFD or Kueue says what is missing and waits, then goes on.

The cluster is a second, bare control plane (etcd and kube-apiserver only, `Sandbox(api_only=True)`): no
CRD but ours, as on a cluster where the admin has not installed the prerequisites yet. The worker must not
crash-loop saying only that a step failed: /readyz names each missing piece, a Warning Event says what to
install, and once the CRDs appear it carries on through Prepare to ready without a restart.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
import yaml

from gpustack_operator.kube import definitions, resources
from gpustack_operator.kube.client import Client, connect
from gpustack_operator.sandbox import build, kueue
from gpustack_operator.sandbox.cluster import NFD_CRDS, Sandbox
from tests.helpers import eventually
from tests.integration.worker_support import ready, worker_pool


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def bare(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Sandbox]:
    async with Sandbox(tmp_path_factory.mktemp("bare"), api_only=True, progress=print) as box:
        yield box


@pytest_asyncio.fixture(loop_scope="session")
async def bare_kube(bare: Sandbox) -> AsyncIterator[Client]:
    client = await connect(bare.kubeconfig)
    try:
        yield client
    finally:
        await client.close()


async def test_missing_nfd_and_kueue_are_said_then_the_worker_goes_on_once_installed(
    bare: Sandbox, bare_kube: Client, tmp_path: Path
) -> None:
    async with worker_pool(bare, bare_kube, tmp_path) as pool:
        # the chart creates the release namespace; the worker's Events about its Pod go there
        await bare_kube.create(resources.NAMESPACES, {"metadata": {"name": pool.namespace}})
        worker = await pool.start("bare-0")

        async def refused() -> str | None:
            status, body = await worker.get(worker.health_port, "/readyz")
            return body if status == 500 and "Kueue is not installed" in body else None

        body = await eventually(refused, timeout=60, what="/readyz naming what is missing")
        assert "[-]prerequisites failed: Node Feature Discovery is not installed" in body, body

        async def warned() -> list[str] | None:
            events = await bare_kube.list(resources.EVENTS, pool.namespace)
            notes = [e.get("note", "") for e in events if e.get("reason") == "PrerequisiteMissing"]
            return notes if len(notes) == 2 else None

        notes = await eventually(warned, timeout=30, what="a Warning Event per missing prerequisite")
        assert any("install it (the chart's kueue.enabled=true" in note for note in notes), notes
        assert worker.proc.returncode is None, "the worker exited instead of waiting"

        nfd = build.module_source("sigs.k8s.io/node-feature-discovery", build.NFD_VERSION)
        kueue_mod = build.module_source("sigs.k8s.io/kueue", build.KUEUE_VERSION)
        crds = [d for d in yaml.safe_load_all((nfd / NFD_CRDS).read_text()) if d]
        crds += kueue.crds(kueue_mod, webhook_port=9443)
        await definitions.apply_and_wait(bare_kube, crds, timeout=60)

        await eventually(
            lambda: ready(worker), timeout=120, what="the worker ready once NFD and Kueue are there"
        )
        assert "Prerequisites found: Node Feature Discovery and Kueue are installed" in worker.tail(400)
        assert await bare_kube.get_or_none(resources.ADMISSION_CHECKS, "gpustack-node-devices") is not None
