"""Which flavors and Devices a pool's queue selects, and which queues a changed flavor or ledger concerns."""

from __future__ import annotations

from typing import Any

import pytest

from gpustack_operator.api.json import JSONObj
from gpustack_operator.controllerkit.cache import Cache
from gpustack_operator.controllerkit.watches import reads
from gpustack_operator.controllers import indexers
from gpustack_operator.controllers.instance_type_queue import queue_labels
from gpustack_operator.controllers.pools import (
    devices_selector,
    pool_devices,
    pool_flavors,
    queues_of_devices,
    queues_of_flavor,
)
from gpustack_operator.kube.resources import CLUSTER_QUEUES, DEVICES, RESOURCE_FLAVORS
from tests.unit.controllerkit.fakes import FakeInformers

ACC, OS, ARCH = "feature.gpustack.ai/acceleratable", "kubernetes.io/os", "kubernetes.io/arch"
G, A, TYPE = "general.feature.gpustack.ai/", "acceleratable.feature.gpustack.ai/", "resource.gpustack.ai/type"


def queue(
    name: str, *, aware: bool = False, gpu: str = "", cpu: str = "generic", arch: str = "amd64"
) -> JSONObj:
    spec = {
        "acceleratable": bool(gpu),
        "acceleratorGroup": gpu,
        "generalGroup": cpu,
        "os": "linux",
        "arch": arch,
    }
    return {"metadata": {"name": name, "labels": queue_labels(spec, aware)}}


def flavor(name: str, cpu: str, gpu: str = "", arch: str = "amd64", **meta: Any) -> JSONObj:
    labels = {ACC: "true" if gpu else "false", OS: "linux", ARCH: arch, f"{G}{cpu}": "true", TYPE: "nodes"}
    if gpu:
        labels[f"{A}{gpu}"] = "true"
    return {"metadata": {"name": name, "labels": labels, **meta}}


def ledger(name: str, gpu: str, managed: str = "true") -> JSONObj:
    labels = {OS: "linux", ARCH: "amd64", f"{A}{gpu}": "true", "gpustack.ai/managed": managed}
    return {"metadata": {"name": name, "labels": labels}}


QUEUES = [
    queue("generic"),
    queue("aware-amd", aware=True, cpu="amd-25-1"),
    queue("t4", gpu="nvidia-tesla-t4"),
    queue("t4-aware-amd", aware=True, gpu="nvidia-tesla-t4", cpu="amd-25-1"),
    queue("generic-arm", arch="arm64"),
    {"metadata": {"name": "foreign", "labels": {ACC: "false", OS: "linux", ARCH: "amd64"}}},
]


def cache_with(*objects: tuple[Any, JSONObj]) -> Cache:
    informers, cache = FakeInformers(), Cache()
    for index in (
        indexers.CLUSTER_QUEUES_BY_POOL,
        indexers.RESOURCE_FLAVORS_BY_POOL,
        indexers.DEVICES_BY_POOL,
    ):
        watch = reads(index.resource)
        informer = informers.informer(index.resource)
        informer.add_indexer(index.name, index.fn)
        cache.register(watch, informer)
    for resource, obj in objects:
        informers.informer(resource).add(obj)
    return cache


@pytest.mark.parametrize(
    ("rf", "queues"),
    [
        pytest.param(
            flavor("cpu-amd", "amd-25-1"),
            ["aware-amd", "generic"],
            id="a CPU flavor: collapsed and aware pools",
        ),
        pytest.param(
            flavor("cpu-intel", "intel-6-1"), ["generic"], id="another CPU maker: only the collapsed pool"
        ),
        pytest.param(
            flavor("t4-amd", "amd-25-1", "nvidia-tesla-t4"),
            ["t4", "t4-aware-amd"],
            id="a card flavor never feeds a CPU pool that shares its CPU key",
        ),
        pytest.param(
            flavor("cpu-arm", "amd-25-1", arch="arm64"), ["generic-arm"], id="arm64 never pools with amd64"
        ),
        pytest.param(
            {"metadata": {"name": "admin", "labels": {ACC: "false", OS: "linux"}}}, [], id="not a node flavor"
        ),
    ],
)
def test_queues_of_flavor(rf: JSONObj, queues: list[str]) -> None:
    cache = cache_with(*((CLUSTER_QUEUES, q) for q in QUEUES))
    assert queues_of_flavor(cache)(rf) == queues


def test_pool_flavors_are_the_live_node_flavors_carrying_every_pool_label() -> None:
    gone = flavor("t4-gone", "amd-25-1", "nvidia-tesla-t4", deletionTimestamp="2025-01-01T00:00:00Z")
    flavors = [
        flavor("t4-amd", "amd-25-1", "nvidia-tesla-t4"),
        flavor("t4-intel", "intel-6-1", "nvidia-tesla-t4"),
        gone,
    ]
    cache = cache_with(*((RESOURCE_FLAVORS, f) for f in [*flavors, flavor("cpu-amd", "amd-25-1")]))
    names = {q["metadata"]["name"]: q for q in QUEUES}
    assert [f["metadata"]["name"] for f in pool_flavors(cache, names["t4"])] == ["t4-amd", "t4-intel"]
    assert [f["metadata"]["name"] for f in pool_flavors(cache, names["t4-aware-amd"])] == ["t4-amd"]
    assert pool_flavors(cache, {"metadata": {"labels": {OS: "linux"}}}) == []  # no discriminator: no pool


def test_a_pool_reads_the_ledgers_of_its_managed_nodes_only() -> None:
    cache = cache_with(
        (DEVICES, ledger("n1", "nvidia-tesla-t4")),
        (DEVICES, ledger("n2", "nvidia-tesla-t4", managed="false")),
        (DEVICES, ledger("n3", "nvidia-a10g")),
        *((CLUSTER_QUEUES, q) for q in QUEUES),
    )
    t4 = next(q for q in QUEUES if q["metadata"]["name"] == "t4")
    assert [d["metadata"]["name"] for d in pool_devices(cache, t4)] == ["n1"]
    assert pool_devices(cache, QUEUES[0]) == []  # a collapsed CPU pool has no ledger
    assert queues_of_devices(cache)(ledger("n1", "nvidia-tesla-t4")) == ["t4"]
    assert devices_selector({ACC: "false", OS: "linux"}) is None
