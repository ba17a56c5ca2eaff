"""One real control plane per test session (etcd, kube-apiserver, KCM, scheduler, Kueue, kwok, nfd-master).

The binaries come from `make control-plane`; a test run without them fails with that instruction rather
than skipping, because CI must exercise the real parts.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from gpustack_operator.kube import errors, resources
from gpustack_operator.kube.client import Client, connect
from gpustack_operator.sandbox.cluster import Sandbox
from tests.helpers import eventually
from tests.integration.worker_support import Kubectl


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integration" in str(item.path):
            item.add_marker(pytest.mark.integration)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def sandbox(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Sandbox]:
    run_dir: Path = tmp_path_factory.mktemp("sandbox")
    async with Sandbox(run_dir, progress=lambda line: print(line, flush=True)) as box:
        yield box


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def kube(sandbox: Sandbox) -> AsyncIterator[Client]:
    client = await connect(sandbox.kubeconfig)
    try:
        yield client
    finally:
        await client.close()


@pytest_asyncio.fixture(loop_scope="session")
async def namespace(kube: Client) -> AsyncIterator[str]:
    """A fresh namespace per test, deleted afterwards."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    await kube.create(resources.NAMESPACES, {"metadata": {"name": name}})
    try:
        yield name
    finally:
        await kube.delete(resources.NAMESPACES, name)


@pytest_asyncio.fixture(loop_scope="session")
async def kueue_namespace(kube: Client, namespace: str) -> str:
    """A fresh namespace that Kueue's pod webhook already knows.

    Kueue's webhook reads the Pod's Namespace from its informer cache, so a Pod created right after its
    namespace can be refused with "namespace not found" — on a real cluster too. Wait until a dry-run
    queued Pod is accepted.
    """
    probe = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "probe-",
            "namespace": namespace,
            "labels": {"kueue.x-k8s.io/queue-name": "probe"},
        },
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }

    async def accepted() -> bool:
        try:
            await kube.create(resources.PODS, probe, dry_run=True)
        except errors.KubeError:
            return False
        return True

    await eventually(accepted, timeout=30, what=f"Kueue's webhook knows namespace {namespace}")
    return namespace


@pytest.fixture(scope="session")
def kubectl(sandbox: Sandbox) -> Kubectl:
    """The sandbox's kubectl, built at the cluster's version."""
    return Kubectl(sandbox)
