"""A Pod's service account against the real kube-apiserver: what `connect()` does without a kubeconfig.

The test plays the kubelet: it asks the API server for a ServiceAccount token (TokenRequest), mounts it
with the cluster CA in a directory and points KUBERNETES_SERVICE_* at the sandbox. The client then runs on
kube.incluster and kube.http1 (no kubernetes-asyncio, no aiohttp): the server must see the service
account, RBAC must apply to it, and an informer must list and watch through the same connections.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from gpustack_operator.kube import errors, resources
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.incluster import InClusterConfig, InClusterTransport
from gpustack_operator.kube.informer import Informer
from gpustack_operator.runtime import Supervisor
from gpustack_operator.sandbox.cluster import Sandbox
from tests.helpers import eventually
from tests.integration.worker_support import service_account_mount

SA = "in-cluster-probe"


@pytest_asyncio.fixture(loop_scope="session")
async def pod_client(sandbox: Sandbox, kube: Client, namespace: str, tmp_path: Path) -> AsyncIterator[Client]:
    """A client as a Pod of ServiceAccount `in-cluster-probe` (allowed ConfigMaps in `namespace`) has it."""
    await kube.create(resources.SERVICEACCOUNTS, {"metadata": {"name": SA}}, namespace)
    role = {
        "metadata": {"name": SA},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}],
    }
    await kube.request("POST", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles", body=role)
    binding = {
        "metadata": {"name": SA},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": SA},
        "subjects": [{"kind": "ServiceAccount", "name": SA, "namespace": namespace}],
    }
    await kube.create(resources.ROLEBINDINGS, binding, namespace)
    directory = await service_account_mount(
        kube, sandbox.certs.ca_crt, tmp_path / "serviceaccount", SA, namespace
    )
    server, port = kube.host.removeprefix("https://").rsplit(":", 1)
    env = {"KUBERNETES_SERVICE_HOST": server, "KUBERNETES_SERVICE_PORT": port}
    client = Client(InClusterTransport(InClusterConfig.from_environ(env, directory)))
    try:
        yield client
    finally:
        await client.close()


async def test_the_server_sees_the_service_account_and_applies_its_rbac(
    pod_client: Client, namespace: str
) -> None:
    review = await pod_client.request(
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
    )
    assert review["status"]["userInfo"]["username"] == f"system:serviceaccount:{namespace}:{SA}"
    created = await pod_client.create(
        resources.CONFIGMAPS, {"metadata": {"name": "c"}, "data": {"k": "v"}}, namespace
    )
    assert created["data"] == {"k": "v"}
    with pytest.raises(errors.Forbidden):
        await pod_client.list(resources.SECRETS, namespace)


async def test_an_informer_lists_and_watches_through_the_pod_transport(
    pod_client: Client, kube: Client, namespace: str
) -> None:
    for i in range(3):
        await kube.create(resources.CONFIGMAPS, {"metadata": {"name": f"before-{i}"}}, namespace)
    informer = Informer(pod_client, resources.CONFIGMAPS, namespace=namespace)
    async with Supervisor("in-cluster") as supervisor:
        supervisor.spawn("informer", informer.run)
        await asyncio.wait_for(informer.wait_synced(), 30)
        await kube.create(resources.CONFIGMAPS, {"metadata": {"name": "after"}}, namespace)
        await kube.delete(resources.CONFIGMAPS, "before-0", namespace)

        async def seen() -> set[str] | None:
            names = {obj["metadata"]["name"] for obj in informer.store.list()}
            return names if "after" in names and "before-0" not in names else None

        names = await eventually(seen, timeout=30, what="the watch delivered a create and a delete")
    assert {"before-1", "before-2", "after"} <= names
