"""`gpustack-operator worker` prepares the cluster, leads, serves probes and metrics, and stops on SIGTERM.

The worker runs as a real subprocess against the sandbox. The sandbox installed our CRDs already (its
device managers need them), so the test edits them first: finding them restored and Established proves
the worker applied them. The settings Secret is pre-seeded with a value an admin
edited: the worker must add the missing keys (taking first-install values from GPUSTACK_* variables) and
keep the edited one.
"""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from gpustack_operator.api.crds import custom_resource_definitions
from gpustack_operator.kube import resources
from gpustack_operator.kube.client import Client
from gpustack_operator.sandbox.cluster import Sandbox
from gpustack_operator.settings import secret
from gpustack_operator.settings.catalog import SETTINGS
from tests.helpers import eventually
from tests.integration.worker_support import Workers, holder, leader_gauge, ready, worker_pool

CRD_NAMES = [crd["metadata"]["name"] for crd in custom_resource_definitions()]


@pytest_asyncio.fixture(loop_scope="session")
async def pool(sandbox: Sandbox, kube: Client, tmp_path: Path) -> AsyncIterator[Workers]:
    async with worker_pool(sandbox, kube, tmp_path) as workers:
        yield workers


async def strip_short_names(kube: Client) -> None:
    """Edit our CRDs (the sandbox installed them) so that only a fresh apply can restore them."""
    for name in CRD_NAMES:
        await kube.json_patch(resources.CRDS, name, [{"op": "remove", "path": "/spec/names/shortNames"}])


async def short_names(kube: Client) -> dict[str, list[str]]:
    return {
        name: (await kube.get(resources.CRDS, name))["spec"]["names"].get("shortNames", [])
        for name in CRD_NAMES
    }


async def established(kube: Client) -> bool:
    for name in CRD_NAMES:
        crd = await kube.get_or_none(resources.CRDS, name)
        conditions = ((crd or {}).get("status") or {}).get("conditions") or []
        if not any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
            return False
    return True


async def test_worker_installs_crds_backfills_settings_leads_serves_and_stops_cleanly(
    kube: Client, pool: Workers
) -> None:
    await strip_short_names(kube)
    ns = pool.namespace
    await kube.create(resources.NAMESPACES, {"metadata": {"name": ns}})
    edited = {"image-pull-policy": secret.encode("Always")}
    await kube.create(
        resources.SECRETS, {"metadata": {"name": secret.SECRET_NAME, "namespace": ns}, "data": edited}
    )

    worker = await pool.start(
        "worker-0",
        env={
            "GPUSTACK_IMAGE_PULL_POLICY": "Never",
            "GPUSTACK_CONTAINER_REGISTRY": "registry.example.com:5000",
        },
    )
    await eventually(lambda: ready(worker), timeout=120, what="worker ready (Prepare done, caches synced)")
    assert await established(kube), "ready before the CRDs were Established"
    want = {
        crd["metadata"]["name"]: crd["spec"]["names"]["shortNames"] for crd in custom_resource_definitions()
    }
    assert await short_names(kube) == want, "the worker did not apply our CRDs"

    stored = await kube.get(resources.SECRETS, secret.SECRET_NAME, ns)
    values = secret.decode_values(stored)
    assert set(values) == set(SETTINGS), "every setting is backfilled"
    assert values["image-pull-policy"] == "Always", "an admin's value was overwritten"
    assert values["container-registry"] == "registry.example.com:5000", "first-install value from GPUSTACK_*"
    assert values["instance-type-mixed-on-node"] == "true", "built-in default"
    assert stored["metadata"]["labels"] == {secret.TYPE_LABEL: secret.TYPE_VALUE}
    notes = stored["metadata"]["annotations"]
    assert all(secret.uid_annotation(name) in notes for name in SETTINGS)

    async def leads() -> bool:
        return await holder(kube, ns) == worker.name

    await eventually(leads, timeout=60, what="the worker holds the lease")
    assert await worker.probe("/healthz") == 200
    assert leader_gauge(await worker.metrics()) == 1.0

    worker.signal(signal.SIGTERM)
    assert await worker.wait() == 0, "SIGTERM must stop the worker with exit code 0"
    assert await holder(kube, ns) == "", "the lease was not released on shutdown"


async def test_a_second_start_changes_nothing_that_is_already_there(kube: Client, pool: Workers) -> None:
    first = await pool.start("worker-0")
    await eventually(lambda: ready(first), timeout=120, what="first worker ready")
    first.signal(signal.SIGTERM)
    assert await first.wait() == 0
    before = await kube.get(resources.SECRETS, secret.SECRET_NAME, pool.namespace)

    second = await pool.start("worker-1", env={"GPUSTACK_IMAGE_PULL_POLICY": "Never"})
    await eventually(lambda: ready(second), timeout=120, what="second worker ready")
    after = await kube.get(resources.SECRETS, secret.SECRET_NAME, pool.namespace)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"], "Secret rewritten"
    assert secret.decode_values(after)["image-pull-policy"] == "IfNotPresent"
