"""What an admin's kubectl does with `instancetypes` when the v1 API comes and goes (issue 21).

kubectl v1.37 caches discovery on disk for six hours (`~/.kube/cache/discovery/<host_port>/`) and resolves
a resource name from that cache whenever the name is found there. `instancetypes` is found either way: in
the v1alpha1 CRD, always served, and in the worker's v1 once its APIService is registered and Available.
So a kubectl that last asked while the APIService was absent, or pointed at a stopped worker (kube-apiserver
then leaves v1 out of discovery), goes on showing the CRD: the columns with AGE, items in v1alpha1. Asking
for a name the cache does not know (`instancetypes.v1.worker.gpustack.ai`) or running `kubectl
api-resources` makes kubectl discover again and rewrite the cache; naming a version the cache does know
(`instancetypes.v1alpha1.worker.gpustack.ai`) reaches it but refreshes nothing. These tests pin the facts
the README tells admins, and show the suite's own kubectl (a new cache for every run, see
worker_support.Kubectl) is immune to them.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

from gpustack_operator.kube import resources
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import INSTANCE_TYPES
from gpustack_operator.sandbox.cluster import Sandbox
from tests.helpers import eventually
from tests.integration.worker_support import APISERVICE, Kubectl, cpu_type, serving_worker


@pytest_asyncio.fixture(loop_scope="session")
async def crd_only_type(kube: Client) -> AsyncIterator[str]:
    """A CPU-only InstanceType created through the CRD while no v1 APIService is registered."""
    await kube.delete(resources.APISERVICES, APISERVICE)
    name = f"disc-{uuid.uuid4().hex[:6]}"
    await kube.create(INSTANCE_TYPES, cpu_type(name, INSTANCE_TYPES.api_version))
    try:
        yield name
    finally:
        await kube.delete(INSTANCE_TYPES, name)


async def served_version(kubectl: Kubectl, *args: str) -> str:
    doc: dict[str, Any] = json.loads(await kubectl.ok("get", *args, "-o", "json"))
    return str(doc["apiVersion"])


async def test_a_cache_primed_without_the_v1_apiservice_shows_the_crd_until_kubectl_discovers_again(
    sandbox: Sandbox, kube: Client, crd_only_type: str, tmp_path: Path
) -> None:
    fresh = Kubectl(sandbox)

    async def v1_gone() -> bool:
        groups = json.loads(await fresh.ok("get", "--raw", "/apis"))["groups"]
        group = next(g for g in groups if g["name"] == "worker.gpustack.ai")
        return [v["version"] for v in group["versions"]] == ["v1alpha1"]

    await eventually(v1_gone, timeout=30, what="discovery without worker.gpustack.ai/v1")
    admin = Kubectl(sandbox, cache_dir=tmp_path / "kube-cache")  # one cache across runs, as a user's
    assert await served_version(admin, "instancetypes", crd_only_type) == "worker.gpustack.ai/v1alpha1"

    async with serving_worker(sandbox, kube, tmp_path, "disc-0"):
        # What the suite's tests saw in issue 21, on demand: the v1 API is up, the cached kubectl says CRD.
        assert await served_version(admin, "instancetypes", crd_only_type) == "worker.gpustack.ai/v1alpha1"
        header = (await admin.ok("get", "instancetypes", crd_only_type)).splitlines()[0].split()
        assert header[-1] == "AGE", header
        # A kubectl with a cache of its own (every run of the suite's Kubectl) sees v1 and its Table.
        assert await served_version(fresh, "instancetypes", crd_only_type) == "worker.gpustack.ai/v1"
        header = (await fresh.ok("get", "instancetypes", crd_only_type)).splitlines()[0].split()
        assert "AGE" not in header, header
        # A name the cache lacks (v1 of the group) makes kubectl discover again and rewrite the cache.
        qualified = "instancetypes.v1.worker.gpustack.ai"
        assert await served_version(admin, qualified, crd_only_type) == "worker.gpustack.ai/v1"
        assert await served_version(admin, "instancetypes", crd_only_type) == "worker.gpustack.ai/v1"


async def test_after_the_apiservice_is_removed_a_cached_v1_answers_not_found_until_api_resources(
    sandbox: Sandbox, kube: Client, crd_only_type: str, tmp_path: Path
) -> None:
    admin = Kubectl(sandbox, cache_dir=tmp_path / "kube-cache")
    async with serving_worker(sandbox, kube, tmp_path, "disc-1"):
        assert await served_version(admin, "instancetypes", crd_only_type) == "worker.gpustack.ai/v1"
    # serving_worker removed the APIService (as uninstalling does); the cache still says v1.
    for args in (("instancetypes",), ("instype", crd_only_type)):
        rc, _, err = await admin.run("get", *args)
        assert rc != 0
        assert "Error from server (NotFound)" in err, err
        assert "the server could not find the requested resource" in err, err
    # The CRD's version by its full name works (it is in the cache) but refreshes nothing.
    qualified = "instancetypes.v1alpha1.worker.gpustack.ai"
    assert await served_version(admin, qualified, crd_only_type) == "worker.gpustack.ai/v1alpha1"
    assert (await admin.run("get", "instancetypes", crd_only_type))[0] != 0
    # `kubectl api-resources` discovers again and rewrites the cache.
    await admin.ok("api-resources", "--api-group=worker.gpustack.ai")
    assert await served_version(admin, "instancetypes", crd_only_type) == "worker.gpustack.ai/v1alpha1"
