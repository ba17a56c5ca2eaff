"""`kubectl get instancetypeflavors`: the pools Kueue's node flavors make, per contract §3.2."""

from __future__ import annotations

from typing import Any

import pytest

from gpustack_operator.apiserver.registry.instancetypeflavors import flavor_list

V1 = "worker.gpustack.ai/v1"


def flavor(name: str, deleting: bool = False, **notes: str) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "annotations": {f"note.gpustack.ai/{k}": v for k, v in notes.items()},
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta}


H100 = {
    "acceleratable": "true",
    "acceleratorGroup": "nvidia-h100",
    "manufacturer": "nvidia",
    "product": "h100",
    "memory": "80Gi",
    "cores": "132",
    "sliceable": "true",
    "generalGroup": "amd-epyc",
}
A10 = {
    "acceleratable": "true",
    "acceleratorGroup": "nvidia-a10",
    "manufacturer": "nvidia",
    "product": "a10",
    "memory": "24Gi",
    "generalGroup": "intel-xeon",
}
A10_BIG = dict(A10, acceleratorGroup="nvidia-a10-48g", memory="48Gi")
CPU = {"acceleratable": "false", "generalGroup": "amd-epyc", "manufacturer": "amd", "product": "epyc"}
CPU_INTEL = {
    "acceleratable": "false",
    "generalGroup": "intel-xeon",
    "manufacturer": "intel",
    "product": "xeon",
}
FLAVORS = [
    flavor("rf-h100-amd64", **H100),
    flavor("rf-h100-arm64", **H100),  # one pool on two architectures
    flavor("rf-a10-48", **A10_BIG),
    flavor("rf-a10", **A10),
    flavor("rf-cpu-amd", **CPU),
    flavor("rf-cpu-intel", **CPU_INTEL),
    flavor("rf-gone", deleting=True, **dict(A10, acceleratorGroup="nvidia-gone")),
    flavor("rf-no-notes"),
]


def names(aware: bool) -> list[str]:
    return [i["metadata"]["name"] for i in flavor_list(FLAVORS, aware=aware, api_version=V1)]


def test_unaware_pools_collapse_cpus_to_generic_and_sort_by_maker_product_memory() -> None:
    assert names(aware=False) == [
        "gpustack--generic",
        "gpustack--nvidia-a10",
        "gpustack--nvidia-a10-48g",
        "gpustack--nvidia-h100",
    ]


def test_aware_pools_carry_the_cpu_key() -> None:
    assert names(aware=True) == [
        "gpustack--amd-epyc",
        "gpustack--intel-xeon",
        "gpustack--intel-xeon--nvidia-a10",
        "gpustack--intel-xeon--nvidia-a10-48g",
        "gpustack--amd-epyc--nvidia-h100",
    ]


@pytest.mark.parametrize(("aware", "general"), [(False, None), (True, "amd-epyc")])
def test_accelerated_spec(aware: bool, general: str | None) -> None:
    items = {i["metadata"]["name"]: i for i in flavor_list(FLAVORS, aware=aware, api_version=V1)}
    h100 = next(i for n, i in items.items() if n.endswith("nvidia-h100"))
    assert h100["apiVersion"] == V1
    assert h100["kind"] == "InstanceTypeFlavor"
    assert h100["spec"].get("generalGroup") == general
    assert h100["spec"]["acceleratable"] is True
    assert h100["spec"]["sliceable"] is True
    assert (h100["spec"]["memory"], h100["spec"]["cores"]) == ("80Gi", "132")


def test_unaware_cpu_pool_is_generic() -> None:
    cpu = flavor_list(FLAVORS, aware=False, api_version=V1)[0]
    assert cpu["spec"] == {"generalGroup": "generic", "acceleratable": False, "manufacturer": "generic"}
