"""The API permissions controllers need, declared next to them and summed up for the chart's ClusterRole.

Why this module exists: a controller whose ServiceAccount lacks a verb fails only in a real cluster, as a 403
retried forever; a chart that grants more than the code uses is a security smell nobody notices. So each
`ControllerSpec` lists the verbs it calls (`rbac=(Rule.of(CLUSTER_QUEUES, "get", "patch"), ...)`), its watches
add `list` and `watch` on their own, the manager adds what leader election and events need, and
`aggregate` merges them into one sorted, de-duplicated set that `policy_rules` renders as ClusterRole
`rules:` entries. The chart's RBAC can then be generated from, and checked against, the code.

A rule has a scope: cluster-wide (`namespace=None`, a ClusterRole), the namespace the process runs in
(`SYSTEM`, the chart's release namespace: a Role there) or one named namespace (a Role in, say,
kube-system). Secrets, Leases and ConfigMaps are read or written only where they live, so granting them
cluster-wide would hand the ServiceAccount every namespace's. What a built-in role already grants (the
`system:auth-delegator` ClusterRole, kube-system's `extension-apiserver-authentication-reader` Role) is
declared as a `BuiltInRole`: the code still says it needs it, and the chart binds the role instead of
copying its rules. Server-side apply of an object that may not exist yet is authorized as `create` as
well as `patch` (kube-apiserver checks both), so an apply declares both.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, get_args

from gpustack_operator.kube.resources import EVENTS, LEASES, Resource

__all__ = [
    "MANAGER_EVENTS",
    "MANAGER_LEASES",
    "SYSTEM",
    "BuiltInRole",
    "Rule",
    "Verb",
    "aggregate",
    "covered",
    "in_system",
    "policy_rules",
]

Verb = Literal["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]
_VERB_ORDER = {verb: n for n, verb in enumerate(get_args(Verb))}

SYSTEM = "@system"
"""`Rule.namespace` for the namespace the process runs in (the release namespace); never a real name."""


@dataclass(frozen=True)
class Rule:
    """Verbs on one resource (``plural`` or ``plural/subresource``) of one API group ("" is core), in
    every namespace and cluster-wide (``namespace=None``), in the process's own (`SYSTEM`) or in one."""

    group: str
    resource: str
    verbs: frozenset[Verb]
    namespace: str | None = None

    def __post_init__(self) -> None:
        if not self.verbs:
            raise ValueError(f"RBAC rule on {self.resource}: at least one verb is needed")
        unknown = sorted(set(self.verbs) - _VERB_ORDER.keys())
        if unknown:
            raise ValueError(f"RBAC rule on {self.resource}: unknown verbs {unknown}")

    @classmethod
    def of(
        cls, resource: Resource, *verbs: Verb, subresource: str | None = None, namespace: str | None = None
    ) -> Rule:
        """``Rule.of(WORKLOADS, "patch", subresource="status")`` grants patch on workloads/status;
        ``namespace=SYSTEM`` (or a name) only there, for a namespaced kind."""
        if namespace is not None and not resource.namespaced:
            raise ValueError(f"RBAC rule on {resource.plural}: a cluster-scoped kind has no namespace")
        name = f"{resource.plural}/{subresource}" if subresource else resource.plural
        return cls(resource.group, name, frozenset(verbs), namespace)

    def grants(self, verb: str, group: str, resource: str, namespace: str | None) -> bool:
        """True when this rule allows `verb` on `resource` of `group` in `namespace` (None: cluster-wide
        or a cluster-scoped object); SYSTEM must have been replaced by the real name (`in_system`)."""
        return (
            verb in self.verbs
            and (self.group, self.resource) == (group, resource)
            and (self.namespace is None or self.namespace == namespace)
        )

    @property
    def sorted_verbs(self) -> list[Verb]:
        """The verbs in kubectl's usual order (get, list, watch, create, update, patch, delete, ...)."""
        return sorted(self.verbs, key=_VERB_ORDER.__getitem__)


MANAGER_LEASES = Rule.of(LEASES, "get", "create", "patch", namespace=SYSTEM)
"""Leader election (kube.lease): read, take and renew the Lease, which lives in the process's namespace."""
MANAGER_EVENTS = Rule.of(EVENTS, "create", "patch")
"""The event recorder (kube.events): new Events and series updates."""


@dataclass(frozen=True)
class BuiltInRole:
    """A role Kubernetes ships that grants `rules`; the chart binds it rather than generating them."""

    kind: Literal["ClusterRole", "Role"]
    name: str
    rules: tuple[Rule, ...]
    namespace: str | None = None
    """Where a Role lives (a ClusterRole has none)."""


def aggregate(rules: Iterable[Rule]) -> tuple[Rule, ...]:
    """One rule per (scope, group, resource) with the union of verbs; cluster-wide rules first, then by
    namespace, group and resource."""
    merged: dict[tuple[str | None, str, str], set[Verb]] = {}
    for rule in rules:
        merged.setdefault((rule.namespace, rule.group, rule.resource), set()).update(rule.verbs)

    def order(item: tuple[tuple[str | None, str, str], set[Verb]]) -> tuple[bool, str, str, str]:
        (namespace, group, res), _ = item
        return (namespace is not None, namespace or "", group, res)

    return tuple(
        Rule(group, res, frozenset(verbs), namespace)
        for (namespace, group, res), verbs in sorted(merged.items(), key=order)
    )


def in_system(rules: Iterable[Rule], system_namespace: str) -> tuple[Rule, ...]:
    """The rules with `SYSTEM` replaced by the namespace the process runs in (to check real requests)."""
    return tuple(
        Rule(r.group, r.resource, r.verbs, system_namespace) if r.namespace == SYSTEM else r for r in rules
    )


def covered(rules: Iterable[Rule], verb: str, group: str, resource: str, namespace: str | None) -> bool:
    """True when some rule grants `verb` on `group`/`resource` in `namespace` (see `Rule.grants`)."""
    return any(rule.grants(verb, group, resource, namespace) for rule in rules)


def policy_rules(rules: Iterable[Rule]) -> list[dict[str, Any]]:
    """ClusterRole or Role ``rules:`` entries (aggregated first; the scope is the caller's to split by);
    resources of a group with equal verbs share one."""
    grouped: dict[tuple[str, tuple[Verb, ...]], list[str]] = {}
    for rule in aggregate(rules):
        grouped.setdefault((rule.group, tuple(rule.sorted_verbs)), []).append(rule.resource)
    return [
        {"apiGroups": [group], "resources": resources, "verbs": list(verbs)}
        for (group, verbs), resources in grouped.items()
    ]
