"""A pool queue's quota from its flavors (§7.9): credits or cpu, small nodes first, and reservations."""

from __future__ import annotations

from typing import Any

import pytest

from gpustack_operator.rules.capacity.quota import (
    flavor_count,
    flavor_resource,
    has_reservations,
    resource_groups,
    same_groups,
)

ACC = "feature.gpustack.ai/acceleratable"
G, A = "general.feature.gpustack.ai/", "acceleratable.feature.gpustack.ai/"


def cpu_flavor(count: int, nodes: int = 1, key: str = "amd-25-1") -> dict[str, Any]:
    labels = {
        ACC: "false",
        f"{G}{key}": "true",
        f"{G}{key}.count": str(count),
        f"{G}{key}.capacity": str(count * nodes),
    }
    return {"metadata": {"name": f"gpustack--{key}-linux-amd64-{count}c", "labels": labels}}


def gpu_flavor(count: int, nodes: int = 1, key: str = "nvidia-tesla-t4") -> dict[str, Any]:
    labels = {
        ACC: "true",
        f"{G}amd-25-1": "true",
        f"{A}{key}": "true",
        f"{A}{key}.count": str(count),
        f"{A}{key}.capacity": str(count * nodes),
    }
    return {"metadata": {"name": f"gpustack--amd-25-1--{key}-linux-amd64-{count}d", "labels": labels}}


def quotas(groups: list[Any]) -> list[tuple[str, str, str]]:
    return [
        (f["name"], r["name"], r["nominalQuota"])
        for g in groups
        for f in g["flavors"]
        for r in f["resources"]
    ]


@pytest.mark.parametrize(
    ("name", "count"),
    [
        pytest.param("gpustack--amd-25-1-linux-amd64-16c", 16, id="cpus"),
        pytest.param("gpustack--amd-25-1--nvidia-tesla-t4-linux-amd64-8d", 8, id="cards"),
        pytest.param("gpustack--generic-linux-amd64", 0, id="a pool name has none"),
        pytest.param("admin-flavor-x", 0, id="foreign"),
        pytest.param("gpustack--x-linux-amd64-c", 0, id="no digits"),
    ],
)
def test_flavor_count(name: str, count: int) -> None:
    assert flavor_count(name) == count


def test_a_cpu_pool_covers_cpu_smallest_nodes_first_with_nominal_equal_to_capacity() -> None:
    groups = resource_groups([cpu_flavor(16, nodes=2), cpu_flavor(8, nodes=3)])
    assert [g["coveredResources"] for g in groups] == [["cpu"]]
    assert quotas(groups) == [
        ("gpustack--amd-25-1-linux-amd64-8c", "cpu", "24"),
        ("gpustack--amd-25-1-linux-amd64-16c", "cpu", "32"),
    ]


def test_an_accelerated_pool_rations_its_makers_credits_a_card_being_1_600_000_and_not_cpu() -> None:
    groups = resource_groups([gpu_flavor(4, nodes=2), gpu_flavor(1)])
    assert [g["coveredResources"] for g in groups] == [["credits.gpustack.ai/nvidia", "cpu"]]
    one = "gpustack--amd-25-1--nvidia-tesla-t4-linux-amd64-1d"
    four = "gpustack--amd-25-1--nvidia-tesla-t4-linux-amd64-4d"
    assert quotas(groups) == [
        (one, "credits.gpustack.ai/nvidia", "1600k"),
        (one, "cpu", "1M"),  # Kueue v0.17 must see cpu covered; a million cores rations nothing
        (four, "credits.gpustack.ai/nvidia", "12800k"),
        (four, "cpu", "1M"),
    ]


def test_the_cpu_key_of_an_accelerated_flavor_does_not_make_it_count_cpus() -> None:
    assert flavor_resource(gpu_flavor(2)["metadata"]["labels"]) == "credits.gpustack.ai/nvidia"


def test_flavors_without_capacity_or_of_another_resource_are_left_out() -> None:
    broken = cpu_flavor(4)
    broken["metadata"]["labels"][f"{G}amd-25-1.capacity"] = "many"
    groups = resource_groups([cpu_flavor(8), broken, gpu_flavor(16), {"metadata": {}}])
    assert quotas(groups) == [("gpustack--amd-25-1-linux-amd64-8c", "cpu", "8")]
    assert resource_groups([broken]) == []


def test_one_group_holds_at_most_64_flavors() -> None:
    groups = resource_groups([cpu_flavor(n) for n in range(1, 70)])
    assert len(groups) == 1
    assert len(groups[0]["flavors"]) == 64
    assert groups[0]["flavors"][-1]["name"].endswith("-64c")


@pytest.mark.parametrize(
    ("current", "equal"),
    [
        pytest.param(
            [
                {
                    "coveredResources": ["x"],
                    "flavors": [{"name": "f", "resources": [{"name": "x", "nominalQuota": "6400000"}]}],
                }
            ],
            True,
            id="6400000 is 6400k",
        ),
        pytest.param(
            [
                {
                    "coveredResources": ["x"],
                    "flavors": [{"name": "f", "resources": [{"name": "x", "nominalQuota": 6400000}]}],
                }
            ],
            True,
            id="a bare number",
        ),
        pytest.param(
            [
                {
                    "coveredResources": ["x"],
                    "flavors": [{"name": "f", "resources": [{"name": "x", "nominalQuota": "6400001"}]}],
                }
            ],
            False,
            id="another amount",
        ),
        pytest.param(None, False, id="absent"),
    ],
)
def test_same_groups_compares_quantities_by_value(current: Any, equal: bool) -> None:
    desired = [
        {
            "coveredResources": ["x"],
            "flavors": [{"name": "f", "resources": [{"name": "x", "nominalQuota": "6400k"}]}],
        }
    ]
    assert same_groups(current, desired) is equal  # type: ignore[arg-type]


def test_absent_groups_are_the_same_as_none() -> None:
    assert same_groups(None, [])


@pytest.mark.parametrize(
    ("status", "reserved"),
    [
        pytest.param({}, False, id="no status yet"),
        pytest.param({"pendingWorkloads": 3}, False, id="pending workloads hold nothing"),
        pytest.param({"reservingWorkloads": 1}, True, id="a reserving workload"),
        pytest.param({"admittedWorkloads": 1}, True, id="an admitted workload"),
        pytest.param(
            {
                "flavorsReservation": [
                    {"name": "f", "resources": [{"name": "cpu", "total": "0", "borrowed": "0"}]}
                ]
            },
            False,
            id="zero reservations",
        ),
        pytest.param(
            {"flavorsReservation": [{"name": "f", "resources": [{"name": "cpu", "total": "500m"}]}]},
            True,
            id="quota still reserved while the counters read zero",
        ),
        pytest.param(
            {"flavorsReservation": [{"name": "f", "resources": [{"name": "cpu", "total": "?"}]}]},
            True,
            id="an unreadable amount counts as reserved",
        ),
    ],
)
def test_has_reservations(status: dict[str, Any], reserved: bool) -> None:
    assert has_reservations({"status": status}) is reserved
