"""Demand parsing of the per-card check: what one Pod and each podSet of a Workload ask of cards."""

from __future__ import annotations

from typing import Any

import pytest

from gpustack_operator.rules.admission.demand import PodSetDemand, pod_needs, workload_demand
from gpustack_operator.rules.cards import Mode, Need

G = "nvidia.com/gpu"
D = 1_600_000
EX, SH = Need(Mode.EXCLUSIVE, D), Need(Mode.SHARED, 160_000)


def template(*limits: dict[str, str], init: tuple[dict[str, str], ...] = (), requests: bool = False) -> Any:
    where = "requests" if requests else "limits"
    spec: dict[str, Any] = {
        "containers": [{"name": f"c{n}", "resources": {where: r}} for n, r in enumerate(limits)]
    }
    if init:
        spec["initContainers"] = [{"name": f"i{n}", "resources": {"limits": r}} for n, r in enumerate(init)]
    return {"spec": spec}


def sliced(units: int) -> Need:
    return Need(Mode.SLICED, units)


@pytest.mark.parametrize(
    ("tmpl", "needs"),
    [
        (template({G: "5"}), (EX,) * 5),
        (template({G: "2"}, {G: "1"}), (EX,) * 3),
        (template({G: "2"}, requests=True), (EX,) * 2),
        (template({f"{G}.shared": "2"}), (SH,) * 2),
        (template({f"{G}.sliced": "2", f"{G}.sliced.units": "800k"}), (sliced(800_000),) * 2),
        # units per card is the largest any container names; the card count is the sum
        (
            template(
                {f"{G}.sliced": "1", f"{G}.sliced.units": "200k"},
                {f"{G}.sliced": "1", f"{G}.sliced.units": "400k"},
            ),
            (sliced(400_000),) * 2,
        ),
        (template({f"{G}.sliced.units": "3125"}), (sliced(3125),)),  # units without a count: one card
        (template({G: "1"}, init=({G: "3"},)), (EX,) * 3),  # an init container may need more
        (template({"cpu": "4", "amd.com/gpu": "2"}), ()),  # another manufacturer's cards
        (template({G: "bogus"}), ()),
        ({}, ()),
    ],
)
def test_pod_needs(tmpl: Any, needs: tuple[Need, ...]) -> None:
    assert pod_needs(tmpl, G) == needs


def workload(*pod_sets: tuple[str, int, Any, dict[str, str], int | None]) -> Any:
    assignments = []
    for name, _, _, flavors, admitted in pod_sets:
        assignments.append(
            {"name": name, "flavors": flavors} | ({"count": admitted} if admitted is not None else {})
        )
    return {
        "spec": {"podSets": [{"name": n, "count": c, "template": t} for n, c, t, _, _ in pod_sets]},
        "status": {"admission": {"clusterQueue": "q", "podSetAssignments": assignments}},
    }


CREDITS = {"credits.gpustack.ai/nvidia": "h100-8d", "cpu": "h100-8d"}


@pytest.mark.parametrize(
    ("wl", "demand"),
    [
        (
            workload(("main", 1, template({G: "5"}), CREDITS, None)),
            [PodSetDemand("main", 1, "h100-8d", "nvidia", (EX,) * 5)],
        ),
        # Kueue's admitted count (partial admission) wins over the podSet's
        (
            workload(("w", 4, template({G: "1"}), CREDITS, 2)),
            [PodSetDemand("w", 2, "h100-8d", "nvidia", (EX,))],
        ),
        (
            workload(
                ("a", 1, template({G: "2"}), CREDITS, None),
                ("b", 3, template({"cpu": "1"}), {"cpu": "c"}, None),
            ),
            [PodSetDemand("a", 1, "h100-8d", "nvidia", (EX,) * 2)],
        ),
        (workload(("main", 1, template({"cpu": "1"}), CREDITS, None)), []),  # a flavor but no card
        (
            {"spec": {"podSets": [{"name": "main", "count": 1, "template": template({G: "1"})}]}},
            [],
        ),  # no admission
    ],
)
def test_workload_demand(wl: Any, demand: list[PodSetDemand]) -> None:
    assert workload_demand(wl) == demand
