"""Reading pods as the allocator needs them: phase, age, containers in kubelet order, limits, env.

Pods arrive as plain JSON from the API server or the informer cache. Identification, the cross-mode view
and the response builders all ask the same small questions of them ("is it pending?", "how many of this
resource does this container's limit ask for?"); the answers live here so they are spelled once.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from gpustack_operator.api.quantity import InvalidQuantityError, Quantity
from gpustack_operator.rules.cards import holds_cards


def node_field_selector(node: str) -> str:
    """The field selector of the pods bound to `node` (the informer, fresh lists and the ledger's list)."""
    return f"spec.nodeName={node}"


def meta(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return pod.get("metadata") or {}


def pod_key(pod: Mapping[str, Any]) -> str:
    """`namespace/name`, for logs and maps."""
    m = meta(pod)
    return f"{m.get('namespace', '')}/{m.get('name', '')}"


def pod_uid(pod: Mapping[str, Any]) -> str:
    return str(meta(pod).get("uid", ""))


def phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def is_pending(pod: Mapping[str, Any]) -> bool:
    """Waiting for admission: phase Pending and not being deleted."""
    return phase(pod) == "Pending" and not meta(pod).get("deletionTimestamp")


def is_active(pod: Mapping[str, Any]) -> bool:
    """Still holding its devices: not Succeeded or Failed (a terminating pod still holds them)."""
    return holds_cards(phase(pod))


def age_key(pod: Mapping[str, Any]) -> tuple[str, str]:
    """Sort key, oldest first: RFC 3339 creation timestamps sort as text; ties by namespace/name."""
    return str(meta(pod).get("creationTimestamp", "")), pod_key(pod)


def arrival_key(pod: Mapping[str, Any]) -> tuple[str, int, str]:
    """The order a kubelet admits pending pods in: oldest first, and within one creation second (the
    timestamp's resolution) in the order the API server wrote them, which is the order every watcher sees.

    Only for pods waiting for admission, whose resourceVersion is still their creation or binding write.
    """
    try:
        version = int(str(meta(pod).get("resourceVersion", "")))
    except ValueError:
        version = 0
    return str(meta(pod).get("creationTimestamp", "")), version, pod_key(pod)


def containers(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Init containers, then containers: the order in which the kubelet allocates."""
    spec = pod.get("spec") or {}
    return [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]


def container(pod: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    for entry in containers(pod):
        if entry.get("name") == name:
            return entry
    raise KeyError(f"pod {pod_key(pod)} has no container {name!r}")


def limit(entry: Mapping[str, Any], resource: str) -> Quantity | None:
    """The container's limit for `resource` (extended resources are asked for in limits)."""
    text = ((entry.get("resources") or {}).get("limits") or {}).get(resource)
    return None if text is None else _quantity(str(text))


@functools.lru_cache(maxsize=4096)
def _quantity(text: str) -> Quantity | None:
    """Parsed once per distinct text: a node's pods repeat a handful of limits thousands of times."""
    try:
        return Quantity.parse(text)
    except InvalidQuantityError:
        return None


def env_names(entry: Mapping[str, Any]) -> set[str]:
    """Names of the env variables the container sets itself."""
    return {str(var.get("name")) for var in entry.get("env") or []}
