"""The kubelet's answer to PodResources List as plain Python, both ways.

The device manager asks which pods the kubelet holds as active and which device IDs it committed to each
of their containers (app containers, then restartable init containers; `ContainerDevices` per resource);
`pod_resources` builds such an answer for tests that play the kubelet. (The sandbox's kubelet stand-in
builds its own, so it cannot share a misreading with the device manager.) Pods are named by namespace and
name: the API carries no UID.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpustack_operator.device_manager.podresources.api import pb

PodName = tuple[str, str]
"""(namespace, name)."""
ContainerDevices = Mapping[str, Mapping[str, tuple[str, ...]]]
"""container name -> resource name -> device IDs the kubelet committed to it."""


def pod_name(pod: Mapping[str, Any]) -> PodName:
    meta = pod.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


@dataclass(frozen=True)
class KubeletPods:
    """The kubelet's active pods (admitted, or being admitted right now) and their committed devices."""

    pods: Mapping[PodName, ContainerDevices] = field(default_factory=dict)

    def lists(self, pod: Mapping[str, Any]) -> bool:
        return pod_name(pod) in self.pods

    def devices(self, pod: Mapping[str, Any], container: str) -> Mapping[str, tuple[str, ...]]:
        return (self.pods.get(pod_name(pod)) or {}).get(container) or {}


def from_list(response: Any) -> KubeletPods:
    """KubeletPods from a `ListPodResourcesResponse`."""
    pods: dict[PodName, ContainerDevices] = {}
    for entry in response.pod_resources:
        pods[(entry.namespace, entry.name)] = {
            c.name: {d.resource_name: tuple(d.device_ids) for d in c.devices} for c in entry.containers
        }
    return KubeletPods(pods)


def pod_resources(pod: PodName, containers: ContainerDevices) -> Any:
    """A `PodResources` message: containers in the given order, each resource's IDs."""
    namespace, name = pod
    return pb.PodResources(
        name=name,
        namespace=namespace,
        containers=[
            pb.ContainerResources(
                name=container,
                devices=[
                    pb.ContainerDevices(resource_name=resource, device_ids=list(device_ids))
                    for resource, device_ids in by_resource.items()
                ],
            )
            for container, by_resource in containers.items()
        ],
    )
