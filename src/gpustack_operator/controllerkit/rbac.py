"""The API permissions controllers need, declared next to them and summed up for the chart's ClusterRole.

Why this module exists: a controller whose ServiceAccount lacks a verb fails only in a real cluster, as a 403
retried forever; a chart that grants more than the code uses is a security smell nobody notices. So each
`ControllerSpec` lists the verbs it calls (`rbac=(Rule.of(CLUSTER_QUEUES, "get", "patch"), ...)`), its watches
add `list` and `watch` on their own, the manager adds what leader election and events need, and
`aggregate` merges them into one sorted, de-duplicated set that `policy_rules` renders as ClusterRole
`rules:` entries. The chart's RBAC can then be generated from, and checked against, the code.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, get_args

from gpustack_operator.kube.resources import EVENTS, LEASES, Resource

__all__ = ["MANAGER_EVENTS", "MANAGER_LEASES", "Rule", "Verb", "aggregate", "policy_rules"]

Verb = Literal["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]
_VERB_ORDER = {verb: n for n, verb in enumerate(get_args(Verb))}


@dataclass(frozen=True)
class Rule:
    """Verbs on one resource (``plural`` or ``plural/subresource``) of one API group ("" is core)."""

    group: str
    resource: str
    verbs: frozenset[Verb]

    def __post_init__(self) -> None:
        if not self.verbs:
            raise ValueError(f"RBAC rule on {self.resource}: at least one verb is needed")
        unknown = sorted(set(self.verbs) - _VERB_ORDER.keys())
        if unknown:
            raise ValueError(f"RBAC rule on {self.resource}: unknown verbs {unknown}")

    @classmethod
    def of(cls, resource: Resource, *verbs: Verb, subresource: str | None = None) -> Rule:
        """``Rule.of(WORKLOADS, "patch", subresource="status")`` grants patch on workloads/status."""
        name = f"{resource.plural}/{subresource}" if subresource else resource.plural
        return cls(resource.group, name, frozenset(verbs))

    @property
    def sorted_verbs(self) -> list[Verb]:
        """The verbs in kubectl's usual order (get, list, watch, create, update, patch, delete, ...)."""
        return sorted(self.verbs, key=_VERB_ORDER.__getitem__)


MANAGER_LEASES = Rule.of(LEASES, "get", "create", "patch")
"""Leader election (kube.lease): read, take and renew the Lease."""
MANAGER_EVENTS = Rule.of(EVENTS, "create", "patch")
"""The event recorder (kube.events): new Events and series updates."""


def aggregate(rules: Iterable[Rule]) -> tuple[Rule, ...]:
    """One rule per (group, resource) with the union of verbs, sorted by group then resource."""
    merged: dict[tuple[str, str], set[Verb]] = {}
    for rule in rules:
        merged.setdefault((rule.group, rule.resource), set()).update(rule.verbs)
    return tuple(Rule(group, res, frozenset(verbs)) for (group, res), verbs in sorted(merged.items()))


def policy_rules(rules: Iterable[Rule]) -> list[dict[str, Any]]:
    """ClusterRole ``rules:`` entries (aggregated first); resources of a group with equal verbs share one."""
    grouped: dict[tuple[str, tuple[Verb, ...]], list[str]] = {}
    for rule in aggregate(rules):
        grouped.setdefault((rule.group, tuple(rule.sorted_verbs)), []).append(rule.resource)
    return [
        {"apiGroups": [group], "resources": resources, "verbs": list(verbs)}
        for (group, verbs), resources in grouped.items()
    ]
