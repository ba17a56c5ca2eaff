"""The allocator's view of the cluster: this node's pods, and the annotation write.

Allocate must be fast with a thousand pods on the node, so pods come from an informer (list-then-watch of
`spec.nodeName=<node>`); when the cache does not show the pod being admitted yet, the allocator asks for a
fresh list. The annotation patch carries the pod's UID, so a pod deleted and recreated under the same name
is never given another pod's allocation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpustack_operator.controllerkit.rbac import Rule
from gpustack_operator.device_manager.allocator import pods as p
from gpustack_operator.kube import resources
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.informer import Informer

RBAC: tuple[Rule, ...] = (
    Rule.of(resources.PODS, "list", "watch", "patch"),  # the node's Pods: informer, reads, allocations
)
"""The allocator's API verbs: the Pods of its node, in every namespace."""


def pod_informer(client: Client, node: str) -> Informer:
    return Informer(client, resources.PODS, field_selector=p.node_field_selector(node))


class KubePods:
    """PodSource over an informer of the node's pods, with the API server behind it."""

    def __init__(self, client: Client, informer: Informer, node: str) -> None:
        self.client = client
        self.informer = informer
        self.node = node

    def cached(self) -> list[dict[str, Any]]:
        return self.informer.store.list()

    async def fresh(self) -> list[dict[str, Any]]:
        return await self.client.list(resources.PODS, field_selector=p.node_field_selector(self.node))


class KubePodWriter:
    """PodWriter: a merge patch of one annotation, with the pod's UID as precondition."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def annotate(self, pod: Mapping[str, Any], key: str, value: str) -> None:
        meta = p.meta(pod)
        patch = {"metadata": {"uid": meta.get("uid"), "annotations": {key: value}}}
        await self.client.patch(resources.PODS, str(meta.get("name")), patch, namespace=meta.get("namespace"))
