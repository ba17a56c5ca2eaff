"""InstanceType queue rules and status (pure): labels, creation spec, Inactive↔StopPolicy, phase (§2.3)."""

from __future__ import annotations

from typing import Any

import pytest

from gpustack_operator.controllers.instance_type_queue import (
    InactiveAction,
    InvalidInstanceTypeError,
    inactive_action,
    label_patch,
    new_cluster_queue,
    queue_labels,
)
from gpustack_operator.controllers.instance_type_status import (
    desired_status,
    phase_of,
    status_patch,
    terminating_status,
)
from gpustack_operator.rules.cards import CardState

ACC, OS, ARCH = "feature.gpustack.ai/acceleratable", "kubernetes.io/os", "kubernetes.io/arch"
G, A, TYPE = "general.feature.gpustack.ai/", "acceleratable.feature.gpustack.ai/", "resource.gpustack.ai/type"
T4 = {
    "acceleratable": True,
    "acceleratorGroup": "nvidia-tesla-t4",
    "generalGroup": "amd-25-1",
    "os": "linux",
    "arch": "amd64",
}


@pytest.mark.parametrize(
    ("aware", "labels"),
    [
        pytest.param(
            False, {ACC: "true", OS: "linux", ARCH: "amd64", f"{A}nvidia-tesla-t4": "true"}, id="unaware"
        ),
        pytest.param(
            True,
            {ACC: "true", OS: "linux", ARCH: "amd64", f"{A}nvidia-tesla-t4": "true", f"{G}amd-25-1": "true"},
            id="aware of the CPU maker",
        ),
    ],
)
def test_queue_labels_are_the_pool_schedule_labels_plus_ownership(
    aware: bool, labels: dict[str, str]
) -> None:
    assert queue_labels(T4, aware) == {**labels, TYPE: "instancetypes"}


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        pytest.param(None, "spec", id="no spec"),
        pytest.param({**T4, "os": ""}, "spec.os", id="no os"),
        pytest.param({**T4, "arch": 64}, "spec.arch", id="arch not a string"),
        pytest.param(
            {**T4, "acceleratorGroup": ""}, "spec.acceleratorGroup", id="accelerated without a group"
        ),
        pytest.param({**T4, "acceleratable": "yes"}, "spec.acceleratable", id="acceleratable not a boolean"),
    ],
)
def test_a_spec_that_names_no_pool_is_refused(spec: Any, field: str) -> None:
    with pytest.raises(InvalidInstanceTypeError, match=field):
        queue_labels(spec, False)


def test_a_new_queue_is_isolated_open_to_all_namespaces_and_running() -> None:
    cq = new_cluster_queue("pool", {ACC: "false"})
    assert cq["metadata"] == {"name": "pool", "labels": {ACC: "false"}}
    assert cq["spec"] == {
        "namespaceSelector": {},
        "stopPolicy": "None",
        "flavorFungibility": {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "MayStopSearch"},
        "preemption": {
            "reclaimWithinCohort": "Never",
            "borrowWithinCohort": {"policy": "Never"},
            "withinClusterQueue": "LowerPriority",
        },
    }
    assert "cohortName" not in cq["spec"]
    assert "resourceGroups" not in cq["spec"]


def test_label_patch_sets_what_differs_prunes_stale_feature_keys_and_keeps_foreign_labels() -> None:
    current = {
        ACC: "true",
        f"{A}nvidia-a10g": "true",
        f"{G}amd-25-1": "true",
        "team": "ml",
        TYPE: "instancetypes",
    }
    desired = {ACC: "true", f"{A}nvidia-tesla-t4": "true", TYPE: "instancetypes"}
    assert label_patch(current, desired) == {
        "metadata": {"labels": {f"{A}nvidia-tesla-t4": "true", f"{A}nvidia-a10g": None, f"{G}amd-25-1": None}}
    }
    assert label_patch({**desired, "team": "ml"}, desired) is None


@pytest.mark.parametrize(
    ("policy", "inactive", "action"),
    [
        pytest.param("None", False, None, id="running and active: stable"),
        pytest.param("None", True, InactiveAction.HOLD, id="admin sets Inactive: Hold"),
        pytest.param("Hold", True, None, id="held and inactive: stable"),
        pytest.param("Hold", False, InactiveAction.RESUME, id="admin clears Inactive: None"),
        pytest.param("HoldAndDrain", True, None, id="drained and inactive: stable, never downgraded to Hold"),
        pytest.param(
            "HoldAndDrain", False, InactiveAction.MARK_INACTIVE, id="drained by the pool: marked Inactive"
        ),
        pytest.param("Paused", False, InactiveAction.MARK_INACTIVE, id="any other stop: marked Inactive"),
    ],
)
def test_inactive_and_stop_policy_truth_table(
    policy: str, inactive: bool, action: InactiveAction | None
) -> None:
    assert inactive_action(policy, inactive) is action


def cq(policy: str | None = None, active: str | None = None, **status: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"spec": {} if policy is None else {"stopPolicy": policy}, "status": dict(status)}
    if active is not None:
        obj["status"]["conditions"] = [{"type": "Active", "status": active, "reason": "R", "message": "why"}]
    return obj


@pytest.mark.parametrize(
    ("queue", "phase"),
    [
        pytest.param(
            cq("HoldAndDrain", "False", admittedWorkloads=1),
            ("Draining", "cluster queue is draining admitted workloads"),
            id="draining",
        ),
        pytest.param(
            cq("HoldAndDrain", "False"), ("Inactive", "cluster queue is held and drained"), id="drained"
        ),
        pytest.param(cq("Hold", "True"), ("Inactive", "cluster queue is held"), id="held"),
        pytest.param(cq(None, "True"), ("Active", ""), id="active"),
        pytest.param(cq("None", "False"), ("Inactive", "why"), id="inactive: Kueue's reason"),
        pytest.param(cq("None", "Unknown"), ("Activating", "why"), id="unknown"),
        pytest.param(
            cq("None"), ("Activating", "waiting for Kueue to report on the cluster queue"), id="not yet"
        ),
    ],
)
def test_phase_follows_the_stop_policy_then_the_active_condition(
    queue: dict[str, Any], phase: tuple[str, str]
) -> None:
    assert phase_of(queue) == phase


def it(name: str = "t4", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {**T4, **spec}}


def test_an_accelerated_status_has_the_three_views_and_the_entrance() -> None:
    status = desired_status(it(), cq("None", "True"), [[CardState(1_600_000, 0, True)]], overcommit=True)
    assert status == {
        "phase": "Active",
        "entrance": "gpustack-fnv64-" + status["entrance"][-16:],
        "accelerator": {"capacity": "1", "remaining": "1", "onceMaxRequest": "1"},
        "acceleratorShared": {"capacity": "10", "remaining": "10", "onceMaxRequest": "10"},
        "acceleratorSliced": {"capacity": "100", "remaining": "100", "onceMaxRequest": "100"},
    }


def test_a_draining_pool_shows_zero_capacity_in_every_view() -> None:
    status = desired_status(it(), cq("HoldAndDrain"), [[CardState(1_600_000, 0, True)]], overcommit=True)
    zero = {"capacity": "0", "remaining": "0", "onceMaxRequest": "0"}
    assert (status["accelerator"], status["acceleratorShared"], status["acceleratorSliced"]) == (
        zero,
        zero,
        zero,
    )
    cpu = desired_status(it(acceleratable=False), cq("HoldAndDrain"), [], overcommit=True)
    assert cpu["cpu"] == zero
    assert "accelerator" not in cpu


def test_status_patch_touches_only_owned_keys_and_nothing_when_equal() -> None:
    desired = terminating_status("t4")
    current = {"phase": "Active", "accelerator": {"capacity": "1"}, "detail": {"product": "T4"}}
    patch = status_patch(current, desired)
    assert patch == {
        "status": {
            "phase": "Inactive",
            "phaseMessage": "instance type is terminating",
            "accelerator": None,
            "entrance": desired["entrance"],
        }
    }
    assert status_patch({**desired, "detail": {"product": "T4"}}, desired) is None
