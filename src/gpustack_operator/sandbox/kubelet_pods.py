"""How the kubelet stand-in reads the pods bound to its node: its own reading, not the device manager's.

A stand-in that shared the device manager's pod helpers could share their bugs, and the tests would not
see them; so the stand-in reads pod JSON here, as the kubelet reads its pods: a pod is admitted while it
is Pending and not being deleted; it holds its devices while it is active (not Succeeded or Failed);
containers are visited init containers first, in spec order; PodResources lists the app containers and
the restartable init containers (sidecars), not the regular init containers; pods are named by
namespace and name, since the PodResources API carries no UID.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Pod = Mapping[str, Any]
PodName = tuple[str, str]
"""(namespace, name)."""
TERMINAL = frozenset({"Succeeded", "Failed"})


def field_selector(node: str) -> str:
    """The pods bound to `node`, as the kubelet's own pod watch selects them."""
    return f"spec.nodeName={node}"


def meta(pod: Pod) -> Mapping[str, Any]:
    return pod.get("metadata") or {}


def uid(pod: Pod) -> str:
    return str(meta(pod).get("uid", ""))


def name(pod: Pod) -> PodName:
    return str(meta(pod).get("namespace", "")), str(meta(pod).get("name", ""))


def key(pod: Pod) -> str:
    """`namespace/name`, for logs and the HTTP records."""
    return "/".join(name(pod))


def annotations_of(pod: Pod) -> Mapping[str, str]:
    return meta(pod).get("annotations") or {}


def phase(pod: Pod) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def waiting(pod: Pod) -> bool:
    """Up for admission: Pending and not being deleted."""
    return phase(pod) == "Pending" and not meta(pod).get("deletionTimestamp")


def active(pod: Pod) -> bool:
    """Still holding its devices: not Succeeded or Failed."""
    return phase(pod) not in TERMINAL


def init_containers(pod: Pod) -> list[Mapping[str, Any]]:
    return list((pod.get("spec") or {}).get("initContainers") or [])


def app_containers(pod: Pod) -> list[Mapping[str, Any]]:
    return list((pod.get("spec") or {}).get("containers") or [])


def is_sidecar(container: Mapping[str, Any]) -> bool:
    """A restartable init container: it keeps running, and keeps its devices."""
    return container.get("restartPolicy") == "Always"


def listed_containers(pod: Pod) -> list[Mapping[str, Any]]:
    """The containers PodResources reports: restartable init containers, then app containers."""
    return [*(c for c in init_containers(pod) if is_sidecar(c)), *app_containers(pod)]
