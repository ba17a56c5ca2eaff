"""The shared Kueue indexes file each object under the right names, and half-written objects under none."""

from __future__ import annotations

from typing import Any

import pytest

from gpustack_operator.api.json import JSONObj
from gpustack_operator.controllers.indexers import (
    cluster_queue_flavors,
    local_queue_cluster_queue,
    workload_cluster_queue,
)
from gpustack_operator.kube.store import IndexFunc


def group(*flavors: Any) -> dict[str, Any]:
    return {
        "coveredResources": ["cpu"],
        "flavors": [{"name": f} if isinstance(f, str) else f for f in flavors],
    }


@pytest.mark.parametrize(
    ("fn", "obj", "values"),
    [
        pytest.param(
            local_queue_cluster_queue, {"spec": {"clusterQueue": "pool-a"}}, ["pool-a"], id="lq: its cq"
        ),
        pytest.param(local_queue_cluster_queue, {"spec": {}}, [], id="lq: no cq yet"),
        pytest.param(local_queue_cluster_queue, {"spec": None}, [], id="lq: spec null"),
        pytest.param(
            cluster_queue_flavors,
            {"spec": {"resourceGroups": [group("b", "a"), group("c", "a")]}},
            ["a", "b", "c"],
            id="cq: every flavor of every group, once, sorted",
        ),
        pytest.param(
            cluster_queue_flavors,
            {"spec": {"resourceGroups": [group({"resources": []}, ""), "junk"]}},
            [],
            id="cq: nameless flavors and junk groups file nothing",
        ),
        pytest.param(cluster_queue_flavors, {}, [], id="cq: no spec"),
        pytest.param(
            workload_cluster_queue,
            {"status": {"admission": {"clusterQueue": "pool-a", "podSetAssignments": []}}},
            ["pool-a"],
            id="workload: the cq it reserved quota in",
        ),
        pytest.param(workload_cluster_queue, {"status": {}}, [], id="workload: pending, no admission"),
    ],
)
def test_index_functions(fn: IndexFunc, obj: JSONObj, values: list[str]) -> None:
    assert fn(obj) == values
