"""RBAC declared next to each controller adds up to exactly what the worker's ClusterRole must grant."""

from __future__ import annotations

import pytest

from gpustack_operator.controllerkit.manager import Manager
from gpustack_operator.controllerkit.rbac import MANAGER_EVENTS, MANAGER_LEASES, Rule, aggregate, policy_rules
from gpustack_operator.controllerkit.spec import ControllerSpec
from gpustack_operator.controllerkit.watches import for_, mapped, owns, reads
from gpustack_operator.kube.resources import (
    ADMISSION_CHECKS,
    CLUSTER_QUEUES,
    INSTANCE_TYPES,
    LOCAL_QUEUES,
    NAMESPACES,
    NODES,
    RESOURCE_FLAVORS,
)

from .fakes import FakeElector, FakeInformers, FakeRecorder, ScriptedReconciler

KUEUE = "kueue.x-k8s.io"


def rule(group: str, resource: str, *verbs: str) -> Rule:
    return Rule(group, resource, frozenset(verbs))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("rules", "merged"),
    [
        pytest.param([], (), id="nothing declared"),
        pytest.param(
            [Rule.of(CLUSTER_QUEUES, "get"), Rule.of(CLUSTER_QUEUES, "patch", "get")],
            (rule(KUEUE, "clusterqueues", "get", "patch"),),
            id="verbs on one resource are merged",
        ),
        pytest.param(
            [Rule.of(ADMISSION_CHECKS, "patch", subresource="status"), Rule.of(ADMISSION_CHECKS, "get")],
            (rule(KUEUE, "admissionchecks", "get"), rule(KUEUE, "admissionchecks/status", "patch")),
            id="a subresource is its own resource",
        ),
        pytest.param(
            [Rule.of(LOCAL_QUEUES, "create"), Rule.of(NODES, "get"), Rule.of(INSTANCE_TYPES, "patch")],
            (
                rule("", "nodes", "get"),
                rule(KUEUE, "localqueues", "create"),
                rule("worker.gpustack.ai", "instancetypes", "patch"),
            ),
            id="sorted by group, then resource",
        ),
    ],
)
def test_aggregate(rules: list[Rule], merged: tuple[Rule, ...]) -> None:
    assert aggregate(rules) == merged


def test_policy_rules_group_resources_with_equal_verbs_in_the_order_kubectl_shows() -> None:
    rules = [
        Rule.of(RESOURCE_FLAVORS, "watch", "list", "get", "patch"),
        Rule.of(CLUSTER_QUEUES, "get", "list", "watch", "patch"),
        Rule.of(CLUSTER_QUEUES, "patch", subresource="status"),
        Rule.of(NODES, "list", "watch"),
    ]
    assert policy_rules(rules) == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]},
        {
            "apiGroups": [KUEUE],
            "resources": ["clusterqueues", "resourceflavors"],
            "verbs": ["get", "list", "watch", "patch"],
        },
        {"apiGroups": [KUEUE], "resources": ["clusterqueues/status"], "verbs": ["patch"]},
    ]


@pytest.mark.parametrize(
    ("verbs", "match"),
    [
        pytest.param((), "at least one verb", id="no verbs"),
        pytest.param(("get", "escalate"), r"unknown verbs \['escalate'\]", id="a verb outside the list"),
    ],
)
def test_a_malformed_rule_is_refused(verbs: tuple[str, ...], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        rule(KUEUE, "clusterqueues", *verbs)


def test_a_controllers_rules_add_list_and_watch_for_every_kind_it_watches() -> None:
    spec = ControllerSpec(
        "clusterqueue",
        ScriptedReconciler(),
        for_(INSTANCE_TYPES),
        watches=(owns(CLUSTER_QUEUES, INSTANCE_TYPES), mapped(NODES, lambda n: []), reads(NAMESPACES)),
        rbac=(Rule.of(CLUSTER_QUEUES, "create", "patch", "delete"),),
    )
    assert spec.rules == (
        rule("", "namespaces", "list", "watch"),
        rule("", "nodes", "list", "watch"),
        rule(KUEUE, "clusterqueues", "list", "watch", "create", "patch", "delete"),
        rule("worker.gpustack.ai", "instancetypes", "list", "watch"),
    )


@pytest.mark.parametrize(
    ("elector", "recorder", "own"),
    [
        pytest.param(True, True, [MANAGER_EVENTS, MANAGER_LEASES], id="leader election and events"),
        pytest.param(False, True, [MANAGER_EVENTS], id="no leader election: no Lease verbs"),
        pytest.param(False, False, [], id="bare manager: the controllers' rules only"),
    ],
)
def test_the_manager_sums_up_every_registered_controller_and_its_own_parts(
    elector: bool, recorder: bool, own: list[Rule]
) -> None:
    manager = Manager(
        FakeInformers(),
        elector=FakeElector() if elector else None,  # type: ignore[arg-type]
        recorder=FakeRecorder() if recorder else None,  # type: ignore[arg-type]
    )
    flavors = ControllerSpec(
        "resourceflavor",
        ScriptedReconciler(),
        for_(RESOURCE_FLAVORS),
        rbac=(Rule.of(RESOURCE_FLAVORS, "get", "create", "patch", "delete"),),
    )
    queues = ControllerSpec(
        "localqueue",
        ScriptedReconciler(),
        for_(LOCAL_QUEUES),
        watches=(reads(RESOURCE_FLAVORS),),
        rbac=(Rule.of(LOCAL_QUEUES, "create", "patch"),),
    )
    manager.add(flavors)
    manager.add(queues)
    assert manager.rbac() == aggregate(
        [
            *own,
            rule(KUEUE, "resourceflavors", "list", "watch", "get", "create", "patch", "delete"),
            rule(KUEUE, "localqueues", "list", "watch", "create", "patch"),
        ]
    )
