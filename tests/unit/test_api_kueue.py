"""The Kueue TypedDicts name the v1beta2 fields of the guide's examples, and none of v1beta1's renamed ones.

No ``from __future__ import annotations`` here: on Python 3.11 it hides NotRequired from a TypedDict.
"""

import typing
from typing import Any, NotRequired, Required

import pytest

from gpustack_operator.api.types.kueue import AdmissionCheck, ClusterQueue, LocalQueue, ResourceFlavor
from gpustack_operator.api.types.kueue_workload import Workload


def _inner(hint: Any) -> Any:
    """The TypedDict behind ``NotRequired[list[X]]`` and the like, or None for scalars and plain dicts."""
    while typing.get_origin(hint) in (NotRequired, Required, list):
        hint = typing.get_args(hint)[0]
    return hint if typing.is_typeddict(hint) else None


def problems(shape: Any, obj: Any, path: str = "") -> list[str]:
    """Keys of ``obj`` the TypedDict does not declare, and required keys it lacks, recursively."""
    hints = typing.get_type_hints(shape, include_extras=True)
    found = [f"{path}{k}: not in {shape.__name__}" for k in obj if k not in hints]
    found += [f"{path}{k}: required, missing" for k in shape.__required_keys__ if k not in obj]
    for key, value in obj.items():
        inner = _inner(hints.get(key))
        for item in value if isinstance(value, list) else [value]:
            if inner is not None and isinstance(item, dict):
                found += problems(inner, item, f"{path}{key}.")
    return found


FLAVOR = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "ResourceFlavor",
    "metadata": {"name": "pool-a100"},
    "spec": {
        "nodeLabels": {"example.com/pool": "a100"},
        "tolerations": [
            {"key": "example.com/pool", "operator": "Equal", "value": "a100", "effect": "NoSchedule"}
        ],
    },
}
CLUSTER_QUEUE = {
    "metadata": {"name": "pool-a100"},
    "spec": {
        "namespaceSelector": {},
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "nvidia.com/gpu"],
                "flavors": [
                    {
                        "name": "pool-a100",
                        "resources": [
                            {"name": "cpu", "nominalQuota": "512"},
                            {"name": "nvidia.com/gpu", "nominalQuota": "64"},
                        ],
                    }
                ],
            }
        ],
        "preemption": {"withinClusterQueue": "Never"},
        "admissionChecksStrategy": {"admissionChecks": [{"name": "pool-gate"}]},
        "stopPolicy": "None",
    },
    "status": {
        "conditions": [
            {
                "type": "Active",
                "status": "True",
                "reason": "Ready",
                "message": "Can admit new workloads",
                "lastTransitionTime": "2025-01-01T00:00:00Z",
                "observedGeneration": 1,
            }
        ],
        "flavorsReservation": [
            {"name": "pool-a100", "resources": [{"name": "cpu", "total": "1", "borrowed": "0"}]}
        ],
        "pendingWorkloads": 0,
        "admittedWorkloads": 1,
    },
}
LOCAL_QUEUE = {
    "metadata": {"name": "pool-a100", "namespace": "team-x"},
    "spec": {"clusterQueue": "pool-a100"},
}
CHECK = {"metadata": {"name": "pool-gate"}, "spec": {"controllerName": "example.com/pool-gate"}}
WORKLOAD = {
    "metadata": {"name": "pod-x-1a2b3", "namespace": "team-x"},
    "spec": {"queueName": "pool-a100", "podSets": [{"name": "main", "count": 1, "template": {"spec": {}}}]},
    "status": {
        "admission": {
            "clusterQueue": "pool-a100",
            "podSetAssignments": [
                {"name": "main", "flavors": {"cpu": "pool-a100"}, "resourceUsage": {"cpu": "1"}}
            ],
        },
        "admissionChecks": [
            {
                "name": "pool-gate",
                "state": "Pending",
                "message": "",
                "lastTransitionTime": "2025-01-01T00:00:00Z",
                "podSetUpdates": [{"name": "main", "nodeSelector": {"kubernetes.io/hostname": "n1"}}],
            }
        ],
    },
}


@pytest.mark.parametrize(
    ("shape", "obj"),
    [
        pytest.param(ResourceFlavor, FLAVOR, id="ResourceFlavor"),
        pytest.param(ClusterQueue, CLUSTER_QUEUE, id="ClusterQueue"),
        pytest.param(LocalQueue, LOCAL_QUEUE, id="LocalQueue"),
        pytest.param(AdmissionCheck, CHECK, id="AdmissionCheck"),
        pytest.param(Workload, WORKLOAD, id="Workload"),
    ],
)
def test_the_guides_v1beta2_examples_fit_the_shapes(shape: Any, obj: dict[str, Any]) -> None:
    assert problems(shape, obj) == []


@pytest.mark.parametrize(
    ("shape", "obj", "problem"),
    [
        pytest.param(
            ClusterQueue, {"spec": {"cohort": "c"}}, "spec.cohort: not in ClusterQueueSpec", id="cq cohort"
        ),
        pytest.param(
            ClusterQueue,
            {"spec": {"admissionChecks": ["a"]}},
            "spec.admissionChecks: not in ClusterQueueSpec",
            id="cq admissionChecks (v1beta2 has only admissionChecksStrategy)",
        ),
        pytest.param(
            AdmissionCheck,
            {"spec": {"controllerName": "x", "retryDelayMinutes": 15}},
            "spec.retryDelayMinutes: not in AdmissionCheckSpec",
            id="check retryDelayMinutes",
        ),
        pytest.param(
            LocalQueue,
            {"spec": {}, "status": {"flavorUsage": []}},
            "status.flavorUsage: not in LocalQueueStatus",
            id="lq flavorUsage (v1beta2 spells it flavorsUsage)",
        ),
    ],
)
def test_v1beta1_names_are_not_part_of_the_shapes(shape: Any, obj: dict[str, Any], problem: str) -> None:
    assert problem in problems(shape, obj)
