"""kube-controller-manager runs: namespaces finish deleting and owner references cascade."""

from __future__ import annotations

import uuid

from gpustack_operator.kube import resources
from gpustack_operator.kube.client import Client
from tests.helpers import eventually


async def test_deleting_a_namespace_with_content_completes(kube: Client) -> None:
    name = f"doomed-{uuid.uuid4().hex[:6]}"
    await kube.create(resources.NAMESPACES, {"metadata": {"name": name}})
    await kube.create(
        resources.CONFIGMAPS, {"metadata": {"name": "data", "namespace": name}, "data": {"k": "v"}}
    )
    await kube.delete(resources.NAMESPACES, name)

    async def gone() -> bool:
        return await kube.get_or_none(resources.NAMESPACES, name) is None

    await eventually(gone, timeout=90, what=f"namespace {name} deleted")


async def test_garbage_collector_deletes_dependents(kube: Client, namespace: str) -> None:
    owner = await kube.create(resources.CONFIGMAPS, {"metadata": {"name": "owner", "namespace": namespace}})
    await kube.create(
        resources.CONFIGMAPS,
        {
            "metadata": {
                "name": "dependent",
                "namespace": namespace,
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "name": "owner",
                        "uid": owner["metadata"]["uid"],
                    }
                ],
            }
        },
    )
    await kube.delete(resources.CONFIGMAPS, "owner", namespace)

    async def dependent_gone() -> bool:
        return await kube.get_or_none(resources.CONFIGMAPS, "dependent", namespace) is None

    await eventually(dependent_gone, timeout=60, what="dependent ConfigMap garbage-collected")
