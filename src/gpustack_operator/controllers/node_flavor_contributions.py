"""Which ResourceFlavors a Node contributes to, as the flavor controller, its index and its watch see it.

Why this module exists: the naming rules (rules.naming.flavors) trust their input, but node labels are
written by admins, NFD and the device manager, and a label value Kubernetes accepts on a Node (`Linux`,
`x86_64`) can still yield a ResourceFlavor name or label it refuses. Such a node must be skipped with a
log line naming it, not create a flavor that fails with 422 on every retry; and a rule that raises on a
half-written node must not take the index or the watch down. Only nodes marked `gpustack.ai/managed=true`
contribute. The index files each node under every flavor name it could offer (mixed on node, the
superset); the reconciler then asks again with the live `instance-type-mixed-on-node` setting.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final, cast

from gpustack_operator.api.keys import MANAGED_LABEL
from gpustack_operator.api.names import is_dns_subdomain, label_problem
from gpustack_operator.rules.naming.flavors import NodeFlavor, extract_node_flavors
from gpustack_operator.rules.naming.labels import TRUE
from gpustack_operator.rules.naming.nodes import Node, node_labels

__all__ = [
    "contribution_changed",
    "flavor_problem",
    "node_flavor_index",
    "node_flavor_names",
    "node_flavors",
]

log = logging.getLogger(__name__)

MAX_NODE_LABELS: Final = 8
"""Kueue caps a ResourceFlavor's spec.nodeLabels at 8 entries."""

_reported: dict[str, str] = {}
"""node name -> the last problem logged for it, so a malformed node is logged once per new problem."""


def flavor_problem(flavor: NodeFlavor) -> str | None:
    """Why kube-apiserver or Kueue would refuse this flavor's ResourceFlavor, or None when it is fine."""
    if not is_dns_subdomain(flavor.name):
        return f"flavor name {flavor.name!r} is not a DNS-1123 subdomain"
    if len(flavor.node_labels) > MAX_NODE_LABELS:
        return f"flavor {flavor.name} would pin {len(flavor.node_labels)} node labels (Kueue allows 8)"
    problem = label_problem(flavor.resource_flavor_labels(1)) or label_problem(flavor.node_labels)
    return f"flavor {flavor.name}: {problem}" if problem else None


def _report(name: str, problem: str | None) -> None:
    if problem is None:
        _reported.pop(name, None)
    elif _reported.get(name) != problem:
        _reported[name] = problem
        log.warning("node=%s skipped for ResourceFlavors: %s", name, problem)


def _offered(node: Mapping[str, Any], mixed_on_node: bool) -> tuple[list[NodeFlavor], str | None]:
    """The node's well-formed flavors and the first problem found (never raises)."""
    typed = cast(Node, node)
    try:
        if node_labels(typed).get(MANAGED_LABEL) != TRUE:
            return [], None
        flavors = extract_node_flavors(typed, mixed_on_node)
    except Exception as err:  # a rule tripping over a half-written node must not stop the others
        return [], f"{type(err).__name__}: {err}"
    checked = [(flavor, flavor_problem(flavor)) for flavor in flavors]
    problems = [problem for _, problem in checked if problem]
    return [flavor for flavor, problem in checked if not problem], problems[0] if problems else None


def node_flavors(node: Mapping[str, Any], mixed_on_node: bool = True) -> list[NodeFlavor]:
    """The flavors a managed node offers: none for an unmanaged node, only the well-formed ones."""
    return _offered(node, mixed_on_node)[0]


def node_flavor_names(node: Mapping[str, Any]) -> list[str]:
    """The names of the flavors a managed node offers when mixing is allowed (the superset)."""
    return [flavor.name for flavor in node_flavors(node)]


def node_flavor_index(node: Mapping[str, Any]) -> list[str]:
    """Index function `nodes.schedule.gpustack.ai/flavor`: `node_flavor_names`, logging a malformed node.

    The store files each new version of a node once, so this is where a malformed node is reported.
    """
    flavors, problem = _offered(node, mixed_on_node=True)
    _report(str((node.get("metadata") or {}).get("name", "?")), problem)
    return [flavor.name for flavor in flavors]


def contribution_changed(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> bool:
    """Predicate: a node event matters when it adds, removes or reshapes a flavor the node offers.

    Status heartbeats and unrelated labels leave the flavors equal and are dropped; a change of the CPU
    name annotation or of sliced capacity changes a flavor's notes and passes.
    """
    if old is None or new is None:
        return True
    return node_flavors(old) != node_flavors(new)
