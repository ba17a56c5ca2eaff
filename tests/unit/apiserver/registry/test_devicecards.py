"""`kubectl get devices <node> --subresource=cards`: one row per card, with the Pods that hold it.

The pods are written as the device plugin writes their annotation (the ledger's tests' builder), and the
ledger is rebuilt from them by the device manager's own code, so the view is checked against the ledger a
node really has: every card held in some mode names its holders, and a free card names none.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from aiohttp import web

from gpustack_operator.apiserver.catalog import CATALOG
from gpustack_operator.apiserver.discovery import resource_list
from gpustack_operator.apiserver.openapi import group_version_document
from gpustack_operator.apiserver.registry.devicecards import COLUMNS, KIND, cards_object, node_cards
from gpustack_operator.apiserver.registry.devices import SERVED, proxy
from gpustack_operator.apiserver.registry.generic.crdproxy import CRDProxy
from gpustack_operator.apiserver.table import table
from gpustack_operator.conversion.apiversion import WORKER
from gpustack_operator.device_manager.ledger import rebuild
from gpustack_operator.kube.resources import DEVICES
from tests.unit.device_manager.test_ledger import EXCLUSIVE, GROUP, SHARED, SLICED, SPEC, pod

WIDE = [c.name for c in COLUMNS]


def devices(pods: list[dict[str, Any]], *, unhealthy: int | None = None) -> dict[str, Any]:
    """The node's Devices as the device manager leaves it: SPEC and the ledger rebuilt from `pods`."""
    spec = copy.deepcopy(SPEC)
    if unhealthy is not None:
        spec["groups"][0]["accelerators"][unhealthy]["status"]["unhealthy"] = True
    meta = {"name": "h100-0", "uid": "u-1", "resourceVersion": "42"}
    return {"metadata": meta, "spec": spec, "status": rebuild(spec, pods).status}


def rows(obj: dict[str, Any], pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each printed row as {column: cell}."""
    doc = table(COLUMNS, cards_object(obj, node_cards(obj, pods))["cards"], include_object="None")
    assert [c["name"] for c in doc["columnDefinitions"]] == WIDE
    return [dict(zip(WIDE, row["cells"], strict=True)) for row in doc["rows"]]


def test_each_card_shows_its_product_vram_mode_units_health_and_holders() -> None:
    pods = [
        pod("first", {"main": [(SHARED, "GPU-0", 160_000)]}, created="2026-01-01T00:00:00Z"),
        pod("second", {"main": [(SHARED, "GPU-0", 160_000)]}, created="2026-01-01T00:00:05Z"),
    ]
    assert rows(devices(pods), pods) == [
        {
            "Index": 0,
            "UUID": "GPU-0",
            "Product": "NVIDIA H100 80GB HBM3",
            "VRAM": "81559Mi",
            "Mode": "shared",
            "Remaining": 1_280_000,
            "Health": "Healthy",
            "Holders": "ns/first,ns/second",
            "Manufacturer": "nvidia",
            "Group": GROUP,
            "Oversold": "false",
        },
        {
            "Index": 1,
            "UUID": "GPU-1",
            "Product": "NVIDIA H100 80GB HBM3",
            "VRAM": "81559Mi",
            "Mode": "<none>",
            "Remaining": 1_600_000,
            "Health": "Healthy",
            "Holders": "<none>",
            "Manufacturer": "nvidia",
            "Group": GROUP,
            "Oversold": "false",
        },
    ]
    assert {c.name for c in COLUMNS if c.priority} == {"Manufacturer", "Group", "Oversold"}, "-o wide only"


@pytest.mark.parametrize(
    ("pods", "held"),
    [
        pytest.param(
            [pod("whole", {"main": [(EXCLUSIVE, "GPU-1", 1_600_000)]})], {1: "ns/whole"}, id="exclusive"
        ),
        pytest.param(
            [pod("two", {"a": [(SLICED, "GPU-0", 400_000)], "b": [(SLICED, "GPU-0", 400_000)]})],
            {0: "ns/two"},
            id="two-containers-of-one-pod-name-it-once",
        ),
        pytest.param(
            [pod("done", {"main": [(EXCLUSIVE, "GPU-0", 1_600_000)]}, phase="Succeeded")],
            {},
            id="an-ended-pod-holds-nothing-as-in-the-ledger",
        ),
        pytest.param(
            [pod("going", {"main": [(EXCLUSIVE, "GPU-0", 1_600_000)]}, deleting=True)],
            {0: "ns/going"},
            id="a-terminating-pod-still-holds-as-in-the-ledger",
        ),
        pytest.param([pod("junk", raw="{not json")], {}, id="an-unreadable-annotation-holds-nothing"),
    ],
)
def test_the_holders_are_exactly_the_pods_the_ledger_counts(
    pods: list[dict[str, Any]], held: dict[int, str]
) -> None:
    shown = rows(devices(pods), pods)
    assert {r["Index"]: r["Holders"] for r in shown if r["Holders"] != "<none>"} == held
    assert {r["Index"] for r in shown if r["Mode"] != "<none>"} == set(held), "held in the ledger <=> named"


def test_a_card_recorded_under_a_group_since_renamed_keeps_its_holder() -> None:
    pods = [pod("p", {"main": [(EXCLUSIVE, "GPU-0", 1_600_000)]})]
    obj = devices(pods)
    obj["spec"]["groups"][0]["id"] = obj["status"]["groups"][0]["id"] = "h100-renamed"
    assert rows(obj, pods)[0]["Holders"] == "ns/p"


def test_unhealthy_and_oversold_cards_say_so() -> None:
    pods = [
        pod("a", {"main": [(SLICED, "GPU-0", 1_200_000)]}),
        pod("b", {"main": [(SLICED, "GPU-0", 1_200_000)]}),
    ]
    shown = rows(devices(pods, unhealthy=1), pods)
    assert [(r["Remaining"], r["Oversold"], r["Health"]) for r in shown] == [
        (-800_000, "true", "Healthy"),
        (1_600_000, "false", "Unhealthy"),
    ]


def test_a_mode_this_version_does_not_know_is_shown_as_its_number() -> None:
    obj = devices([])
    obj["status"]["groups"][0]["accelerators"][0]["mode"] = 9
    assert rows(obj, [])[0]["Mode"] == "9"


def test_a_node_without_a_ledger_yet_has_no_rows() -> None:
    obj = devices([])
    del obj["status"]
    assert rows(obj, []) == []


def test_plain_json_is_a_device_cards_object_of_the_same_cards() -> None:
    pods = [pod("whole", {"main": [(EXCLUSIVE, "GPU-1", 1_600_000)]})]
    doc = cards_object(devices(pods), node_cards(devices(pods), pods))
    assert (doc["apiVersion"], doc["kind"], doc["metadata"]) == (
        "worker.gpustack.ai/v1",
        KIND,
        {"name": "h100-0", "uid": "u-1", "resourceVersion": "42"},
    )
    card = doc["cards"][1]
    assert (card["mode"], card["free"], card["remaining"], card["holders"]) == (
        "exclusive",
        False,
        0,
        ["ns/whole"],
    )
    assert doc["cards"][0]["free"] is True


def test_cards_is_discovered_described_and_routed_as_a_get_only_subresource() -> None:
    found = {r["name"]: r for r in resource_list(SERVED.api_version, CATALOG.served)["resources"]}
    assert found["devices/cards"]["verbs"] == ["get"]
    paths = group_version_document(SERVED.api_version, CATALOG.served, CATALOG.schemas)["paths"]
    assert list(paths["/apis/worker.gpustack.ai/v1/devices/{name}/cards"]) == ["get", "parameters"]
    routes = {r.canonical for r in _router().resources()}
    assert "/apis/worker.gpustack.ai/v1/devices/{name}/cards" in routes


def _router() -> Any:
    app = web.Application()
    proxy(object()).add_routes(app.router)  # type: ignore[arg-type]
    return app.router


def test_a_handler_for_a_subresource_discovery_does_not_list_is_refused() -> None:
    with pytest.raises(ValueError, match="not all readers"):
        CRDProxy(object(), SERVED, DEVICES, WORKER, (), readers={"logs": _router})  # type: ignore[arg-type]
