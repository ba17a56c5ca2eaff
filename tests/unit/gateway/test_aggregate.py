"""aggregated=true: InstanceTypes of many clusters folded by hardware, capacity summed, requests whole."""

from __future__ import annotations

import typing
from typing import Any

import pytest

from gpustack_operator.api.types.instancetype import InstanceTypeResource, InstanceTypeStatus
from gpustack_operator.gateway.aggregate import RESOURCE_FIELDS, STATUS_RULES, VIEWS, aggregate


def view(once: str, remaining: str, capacity: str) -> dict[str, str]:
    return {"onceMaxRequest": once, "remaining": remaining, "capacity": capacity}


def gpu_type(
    name: str,
    *,
    accel: tuple[str, str, str],
    cpu: tuple[str, str, str],
    phase: str = "Active",
    inactive: bool = False,
    display: str = "",
    product: str = "H100",
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "acceleratable": True,
        "manufacturer": "nvidia",
        "product": product,
        "os": "linux",
        "arch": "amd64",
        "unitResources": {"cpu": "8", "ram": "64Gi"},
        "localStorage": "100Gi",
    }
    if inactive:
        spec["inactive"] = True
    if display:
        spec["displayName"] = display
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "InstanceType",
        "metadata": {"name": name},
        "spec": spec,
        "status": {
            "phase": phase,
            "phaseMessage": f"{name} is {phase}",
            "accelerator": view(*accel),
            "acceleratorShared": view("1", "2", "20"),
            "acceleratorSliced": view("1", "3", "300"),
            "cpu": view(*cpu),
            "entrance": f"entrance-of-{name}",
            "detail": {"product": product, "memory": f"mem-of-{name}"},
        },
    }


def test_same_hardware_is_one_group_remaining_summed_request_whole_from_the_winner() -> None:
    a = gpu_type("h100", accel=("8", "8", "16"), cpu=("32", "40", "200"), display="A's name")
    b = gpu_type("h100", accel=("4", "6", "8"), cpu=("96", "100", "200"), display="B's name")
    (folded,) = aggregate([("a", a), ("b", b)])
    status = folded["status"]
    # remaining and capacity summed per view over the active members
    assert status["accelerator"] == view("8", "14", "24")
    assert status["cpu"]["remaining"] == "140"
    assert status["cpu"]["capacity"] == "400"
    # the largest one-shot request comes whole from the member winning the accelerator (a), so its cpu
    # request is a's 32 and not b's 96: no pool offers 8 cards with 96 CPUs
    assert status["cpu"]["onceMaxRequest"] == "32"
    assert status["winner"] == {"cluster": "a", "name": "h100"}
    assert status["detail"] == a["status"]["detail"]
    assert status["entrance"] == "entrance-of-h100"
    assert [t["onceMaxRequest"] for t in status["tiers"]] == ["8", "4"]
    assert status["tiers"][1]["members"] == [{"cluster": "b", "name": "h100"}]
    assert [(m["cluster"], m["name"], m["phase"]) for m in status["members"]] == [
        ("a", "h100", "Active"),
        ("b", "h100", "Active"),
    ]
    assert status["members"][1]["cpu"] == b["status"]["cpu"]


def test_inactive_members_are_listed_but_add_nothing() -> None:
    a = gpu_type("h100", accel=("2", "2", "2"), cpu=("8", "8", "8"))
    b = gpu_type("h100", accel=("8", "8", "8"), cpu=("64", "64", "64"), inactive=True)
    c = gpu_type("h100", accel=("8", "8", "8"), cpu=("64", "64", "64"), phase="Draining")
    (folded,) = aggregate([("a", a), ("b", b), ("c", c)])
    status = folded["status"]
    assert status["accelerator"] == view("2", "2", "2")
    assert status["phase"] == "Active"
    assert status["phaseMessage"] == "1 of 3 members active"
    assert [m["active"] for m in status["members"]] == [True, False, False]
    assert "inactive" not in folded["spec"]


def test_different_hardware_stays_apart() -> None:
    a = gpu_type("h100", accel=("8", "8", "8"), cpu=("8", "8", "8"))
    b = gpu_type("a100", accel=("8", "8", "8"), cpu=("8", "8", "8"), product="A100")
    assert [f["metadata"]["name"] for f in aggregate([("a", a), ("b", b)])] == ["a100", "h100"]


def test_cpu_types_are_won_on_cpu() -> None:
    def cpu_type(once: str) -> dict[str, Any]:
        return {
            "metadata": {"name": "cpu"},
            "spec": {"acceleratable": False, "os": "linux"},
            "status": {"phase": "Active", "cpu": view(once, "10", "10")},
        }

    (folded,) = aggregate([("a", cpu_type("4")), ("b", cpu_type("16"))])
    assert folded["status"]["winner"]["cluster"] == "b"
    assert folded["status"]["cpu"] == view("16", "20", "20")


@pytest.mark.parametrize("field", sorted(typing.get_type_hints(InstanceTypeStatus)))
def test_every_status_field_of_the_instancetype_is_mirrored_in_the_aggregate(field: str) -> None:
    """Adding a status field to InstanceType without a rule here fails this test (contract §9's
    TestAggregatedInstanceTypeMirrorsEveryStatusView)."""
    assert field in STATUS_RULES, f"InstanceType status field {field!r} has no rule in gateway.aggregate"
    member = gpu_type("h100", accel=("8", "8", "8"), cpu=("8", "8", "8"))
    (folded,) = aggregate([("a", member)])
    assert field in folded["status"], f"{field!r} is not mirrored in the AggregatedInstanceType"
    if STATUS_RULES[field] == "view":
        assert field in VIEWS
        assert set(folded["status"][field]) == set(typing.get_type_hints(InstanceTypeResource))


def test_every_view_field_has_a_rule_and_the_rules_name_no_stale_field() -> None:
    assert set(RESOURCE_FIELDS) == set(typing.get_type_hints(InstanceTypeResource))
    assert set(STATUS_RULES) == set(typing.get_type_hints(InstanceTypeStatus))
    views = {
        f
        for f, t in typing.get_type_hints(InstanceTypeStatus).items()
        if InstanceTypeResource in typing.get_args(t) or t is InstanceTypeResource
    }
    assert set(VIEWS) == views
