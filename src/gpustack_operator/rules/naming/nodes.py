"""The read-only view of a Node that the naming rules need.

Callers hand in plain Kubernetes JSON; these TypedDicts name the few fields the rules read, and the
accessors turn a missing map into an empty one, so no rule has to guard against absent metadata.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, TypedDict

from gpustack_operator.api.keys import UNRESOLVED_MARK
from gpustack_operator.api.types.common import ObjectMeta

_EMPTY: Final[Mapping[str, str]] = {}


class NodeStatus(TypedDict, total=False):
    """status of a Node: only what the rules read."""

    capacity: dict[str, str]


class Node(TypedDict, total=False):
    """A Node as Kubernetes JSON."""

    metadata: ObjectMeta
    status: NodeStatus


def node_labels(node: Node) -> Mapping[str, str]:
    """The node's labels ({} when absent)."""
    return node.get("metadata", {}).get("labels") or _EMPTY


def node_annotations(node: Node) -> Mapping[str, str]:
    """The node's annotations ({} when absent)."""
    return node.get("metadata", {}).get("annotations") or _EMPTY


def node_capacity(node: Node) -> Mapping[str, str]:
    """The node's status.capacity ({} when absent)."""
    return node.get("status", {}).get("capacity") or _EMPTY


def resolved(value: str | None) -> str:
    """An NFD-reported value, or "" when absent, empty or an unresolved `@cpu.model.*` template."""
    return "" if not value or value.startswith(UNRESOLVED_MARK) else value
