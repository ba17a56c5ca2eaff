"""The Service that makes an Instance's ports reachable from outside the cluster (contract §2.6 status.ports).

Why this module exists: an Instance's user connects from their own machine (SSH into the sidecar, a
notebook on a port of main), and a Pod IP is not reachable from there. As the original operator does, the
reconciler gives every Instance Pod that exposes a port a ``NodePort`` Service of the same name: one
Service port per container port (main's ``spec.ports``, then the SSH sidecar's ``ssh`` port 22), each
targeting that container port, selecting the Pod by the Instance-UID label. The Service is controlled by
the Pod (not the Instance), so it goes with the Pod: a stopped Instance holds no node port, and a
restarted one gets a fresh Service for its new Pod. The node ports kube-apiserver allocates come back in
the Instance's ``status.ports[].nodePort`` (rules.instance.status).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from gpustack_operator.api.json import JSONObj, as_list, as_mapping, as_str, controlled_by
from gpustack_operator.api.keys import INSTANCE_UID_LABEL, RESOURCE_TYPE_INSTANCES, RESOURCE_TYPE_LABEL

__all__ = ["SERVICE_TYPE", "render_service", "serves_pod", "service_ports"]

SERVICE_TYPE: Final = "NodePort"


def service_ports(pod: Mapping[str, Any]) -> list[JSONObj]:
    """One Service port per container port of ``pod``, in container order."""
    ports: list[JSONObj] = []
    for container in map(as_mapping, as_list(as_mapping(pod.get("spec")).get("containers"))):
        for entry in map(as_mapping, as_list(container.get("ports"))):
            number = entry.get("containerPort")
            if not isinstance(number, int) or isinstance(number, bool):
                continue
            port: JSONObj = {
                "name": as_str(entry.get("name")),
                "protocol": as_str(entry.get("protocol")) or "TCP",
                "port": number,
                "targetPort": number,
            }
            ports.append({key: value for key, value in port.items() if value != ""})
    return ports


def render_service(pod: Mapping[str, Any]) -> JSONObj | None:
    """The NodePort Service for an Instance's ``pod`` (as created: it needs the Pod's UID), or None when
    the Pod exposes no port."""
    meta = as_mapping(pod.get("metadata"))
    ports = service_ports(pod)
    if not ports:
        return None
    labels = as_mapping(meta.get("labels"))
    uid = as_str(labels.get(INSTANCE_UID_LABEL))
    owner = {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": as_str(meta.get("name")),
        "uid": as_str(meta.get("uid")),
        "controller": True,
    }
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": as_str(meta.get("name")),
            "namespace": as_str(meta.get("namespace")),
            "labels": {RESOURCE_TYPE_LABEL: RESOURCE_TYPE_INSTANCES, INSTANCE_UID_LABEL: uid},
            "ownerReferences": [owner],
        },
        "spec": {"type": SERVICE_TYPE, "selector": {INSTANCE_UID_LABEL: uid}, "ports": ports},
    }


def serves_pod(service: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """The Service was made for this very Pod (its controlling owner is the Pod's UID), not a predecessor."""
    return controlled_by(service, pod)
