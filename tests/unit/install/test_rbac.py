"""The chart's generated RBAC: current, least privilege, and nothing granted that no code declares."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from gpustack_operator.controllerkit.rbac import SYSTEM, Rule, covered
from gpustack_operator.install.chart import CHART_DIR
from gpustack_operator.install.rbac import (
    HEADER,
    ServiceAccountRBAC,
    device_manager_rbac,
    rbac_files,
    worker_rbac,
)

ACCOUNTS = [
    pytest.param("files/rbac/worker.yaml", worker_rbac, id="worker"),
    pytest.param("files/rbac/device-manager.yaml", device_manager_rbac, id="device manager"),
]
FORBIDDEN_VERBS = {"*", "escalate", "bind", "impersonate"}
NEVER_CLUSTER_WIDE = {
    ("", "secrets"),
    ("coordination.k8s.io", "leases"),
    ("", "pods/status"),
    ("", "configmaps"),
}
KNOWN_CLUSTER_WIDE = {
    ("", "secrets", verb) for verb in ("get", "list", "watch", "create", "update", "delete")
}
"""controllers.instance checks that the Secrets an Instance names exist in its namespace before it starts the
Pod (`waiting for Secret "x"`); that read is cluster-wide until the check goes another way. The Instance
companions InstanceImagePullSecret and InstanceSSHPublicKey are views over Secrets in the users' namespaces
(apiserver.registry.companions): the worker writes them after a SubjectAccessReview of the user, and only
Secrets labelled as a companion's are ever served or changed, but the grant itself is cluster-wide."""


def _committed(path: str) -> dict[str, Any]:
    text = (CHART_DIR / path).read_text(encoding="utf-8")
    assert text.startswith(HEADER)
    doc = yaml.safe_load(text)
    assert isinstance(doc, dict)
    return doc


def _scope(key: str) -> str | None:
    """The Rule.namespace a rules key stands for (kueueSystemRules -> kueue-system)."""
    if key == "clusterRules":
        return None
    if key == "namespaceRules":
        return SYSTEM
    return "".join(f"-{c.lower()}" if c.isupper() else c for c in key.removesuffix("Rules"))


def _grants(doc: dict[str, Any]) -> Iterator[tuple[str | None, str, str, str]]:
    """(scope, group, resource, verb) of every grant in a rules file."""
    for key, entries in doc.items():
        if not key.endswith("Rules"):
            continue
        for entry in entries:
            for group in entry["apiGroups"]:
                for resource in entry["resources"]:
                    for verb in entry["verbs"]:
                        yield _scope(key), group, resource, verb


def test_the_committed_files_are_as_generated() -> None:
    for path, text in rbac_files().items():
        current = (CHART_DIR / path).read_text(encoding="utf-8")
        assert current == text, f"{path} is stale: run `python scripts/gen_chart.py`"


@pytest.mark.parametrize(("path", "declared"), ACCOUNTS)
def test_no_grant_is_a_wildcard_or_a_privilege_escalation(path: str, declared: Any) -> None:
    grants = list(_grants(_committed(path)))
    assert grants, f"{path} grants nothing"
    bad = [g for g in grants if g[3] in FORBIDDEN_VERBS or "*" in g[1:3]]
    assert bad == []


@pytest.mark.parametrize(("path", "declared"), ACCOUNTS)
def test_secrets_leases_pod_status_and_configmaps_are_never_cluster_wide(path: str, declared: Any) -> None:
    wide = {
        (group, resource, verb)
        for scope, group, resource, verb in _grants(_committed(path))
        if scope is None and (group, resource) in NEVER_CLUSTER_WIDE
    }
    assert wide <= KNOWN_CLUSTER_WIDE


@pytest.mark.parametrize(("path", "declared"), ACCOUNTS)
def test_every_grant_comes_from_a_declaration_and_every_declaration_is_granted(
    path: str, declared: Any
) -> None:
    rbac: ServiceAccountRBAC = declared()
    doc = _committed(path)
    undeclared = [
        g
        for g in _grants(doc)
        if not any(covered(rules, g[3], g[1], g[2], g[0]) for rules in rbac.parts.values())
    ]
    assert undeclared == [], "the chart grants verbs no code declares"
    granted = [Rule(g[1], g[2], frozenset({g[3]}), g[0]) for g in _grants(doc)]  # type: ignore[arg-type]
    missing = [
        (rule.namespace, rule.group, rule.resource, verb)
        for rule in rbac.rules
        for verb in rule.verbs
        if not covered(granted, verb, rule.group, rule.resource, rule.namespace)
    ]
    assert missing == [], "the code declares verbs the chart does not grant"


def test_the_roles_kubernetes_ships_are_bound_not_copied() -> None:
    doc = _committed("files/rbac/worker.yaml")
    assert doc["builtInRoles"] == [
        {"kind": "ClusterRole", "name": "system:auth-delegator"},
        {"kind": "Role", "name": "extension-apiserver-authentication-reader", "namespace": "kube-system"},
    ]
    resources = {(group, resource) for _, group, resource, _ in _grants(doc)}
    assert ("authentication.k8s.io", "tokenreviews") not in resources
    assert ("authorization.k8s.io", "subjectaccessreviews") not in resources
    assert "kube-system" not in {scope for scope, *_ in _grants(doc)}


def test_kueues_configmap_is_read_only_in_kueues_namespace_and_ours() -> None:
    grants = set(_grants(_committed("files/rbac/worker.yaml")))
    configmaps = {
        (scope, verb) for scope, group, resource, verb in grants if (group, resource) == ("", "configmaps")
    }
    assert configmaps == {("kueue-system", "get"), (SYSTEM, "get")}
