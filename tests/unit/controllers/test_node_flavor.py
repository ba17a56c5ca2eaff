"""NodeFlavorReconciler under the real manager: the ResourceFlavors and InstanceTypes a user would see.

Nodes and settings are fed through scripted informers (chain_world); writes go to a recording client that
echoes them back, so each test watches the controller settle and then checks the cluster's objects and
that a settled controller writes nothing more.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pytest

from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import MANAGED_LABEL
from gpustack_operator.api.schema.instancetype import INSTANCE_TYPE
from gpustack_operator.controllerkit.manager import Manager
from gpustack_operator.controllers import node_flavor
from gpustack_operator.controllers.setup import setup_controllers
from gpustack_operator.kube.resources import INSTANCE_TYPES, NODES, RESOURCE_FLAVORS, Resource
from gpustack_operator.kube.store import object_key
from gpustack_operator.rules.naming.labels import (
    construct_acceleratable_node_labels,
    construct_node_capacity_labels,
)
from gpustack_operator.settings.environment import Environment
from tests.helpers import eventually, yield_to_loop
from tests.unit.controllerkit.fakes import FakeInformers, running
from tests.unit.rules.builders import cpu_labels, node, tesla_t4_group

from .chain_world import SYSTEM, World, world
from .writes import RecordingClient

G, A = "general.feature.gpustack.ai/", "acceleratable.feature.gpustack.ai/"
CPU_FLAVOR = "gpustack--amd-25-1-linux-amd64-8c"
GPU_FLAVOR = "gpustack--amd-25-1--nvidia-tesla-t4-linux-amd64-2d"
UNMANAGED: dict[str, str | None] = {MANAGED_LABEL: "false"}
NO_OS: dict[str, str | None] = {"kubernetes.io/os": None}


def a_node(
    name: str, *, cards: int = 0, cpus: int = 8, labels: dict[str, str | None] | None = None
) -> JSONObj:
    """A node as NFD leaves it (AMD 25/1, linux/amd64, worker and device-manager labels); `labels`
    overrides some (None removes one)."""
    base = cpu_labels("AMD", "25", "1")
    capacity = {"cpu": str(cpus)}
    groups = [tesla_t4_group(cards)] if cards else []
    merged: dict[str, Any] = {
        **base,
        **construct_node_capacity_labels(node(base, {}, capacity)),
        **construct_acceleratable_node_labels(groups),
    }
    merged.update(labels or {})
    built: JSONObj = dict(node({k: v for k, v in merged.items() if v is not None}, {}, capacity))
    built["metadata"].update(name=name, uid=f"uid-{name}")
    return built


def copy_of(informers: FakeInformers) -> FakeInformers:
    """Fresh informers holding what `informers` hold (as after a restart's first list)."""
    fresh = FakeInformers()
    for (resource, namespace, labels, fields), old in informers.by_key.items():
        new = fresh.informer(resource, namespace=namespace, label_selector=labels, field_selector=fields)
        for obj in old.store.list():
            new.store.put(object_key(obj), obj)
    return fresh


@contextlib.asynccontextmanager
async def flavors_of(
    *nodes: JSONObj, seed: Sequence[tuple[Resource, JSONObj]] = (), **settings: str
) -> AsyncIterator[World]:
    """The controller at rest over `seed` objects, then `nodes`, with settings (mixed_on_node="false")."""
    async with world(node_flavor.controller, **settings) as w:
        for resource, obj in seed:
            w.put(resource, obj)
        for n in nodes:
            w.put(NODES, n)
        await w.settle()
        yield w


def rf(w: World, name: str) -> JSONObj:
    """The ResourceFlavor as the cluster holds it ({} when there is none)."""
    return w.get(RESOURCE_FLAVORS, name) or {}


async def test_identical_nodes_share_one_flavor_whose_capacity_is_nodes_times_count() -> None:
    async with flavors_of(a_node("n1"), a_node("n2")) as w:
        rf = w.get(RESOURCE_FLAVORS, CPU_FLAVOR)
        assert rf is not None
        assert rf["metadata"]["labels"] == {
            f"{G}amd-25-1": "true",
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "feature.gpustack.ai/acceleratable": "false",
            f"{G}amd-25-1.count": "8",
            f"{G}amd-25-1.capacity": "16",
            "resource.gpustack.ai/type": "nodes",
        }
        assert rf["spec"] == {
            "nodeLabels": {
                MANAGED_LABEL: "true",
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                f"{G}amd-25-1": "true",
                f"{G}amd-25-1.count": "8",
            },
            "tolerations": [{"operator": "Exists"}],
        }
        assert rf["metadata"]["annotations"]["note.gpustack.ai/manufacturer"] == "amd"
        assert [(x.verb, x.kind, x.field_manager) for x in w.client.of("create", "ResourceFlavor")] == [
            ("create", "ResourceFlavor", "gpustack-node-flavor")
        ]


async def test_a_gpu_node_offers_a_cpu_flavor_and_a_device_flavor_pinned_to_its_card_model() -> None:
    async with flavors_of(a_node("gpu", cards=2)) as w:
        rf = w.get(RESOURCE_FLAVORS, GPU_FLAVOR)
        assert rf is not None
        labels = rf["metadata"]["labels"]
        assert labels[f"{A}nvidia-tesla-t4"] == labels[f"{G}amd-25-1"] == "true"
        assert labels["feature.gpustack.ai/acceleratable"] == "true"
        assert (labels[f"{A}nvidia-tesla-t4.count"], labels[f"{A}nvidia-tesla-t4.capacity"]) == ("2", "2")
        assert rf["spec"]["nodeLabels"][f"{A}nvidia-tesla-t4.count"] == "2"
        notes = rf["metadata"]["annotations"]
        assert notes["note.gpustack.ai/product"] == "Tesla-T4"
        assert notes["note.gpustack.ai/memory"] == "15Gi"
        assert w.get(RESOURCE_FLAVORS, CPU_FLAVOR) is not None


async def test_a_node_that_leaves_a_flavor_shrinks_it_and_the_last_one_deletes_it() -> None:
    async with flavors_of(a_node("n1"), a_node("n2")) as w:
        w.remove(NODES, "n2")
        await w.settle(lambda: rf(w, CPU_FLAVOR)["metadata"]["labels"][f"{G}amd-25-1.capacity"] == "8")
        (shrink,) = w.client.of("patch")
        assert shrink.body == {"metadata": {"labels": {f"{G}amd-25-1.capacity": "8"}}}

        w.put(NODES, a_node("n1", cpus=16))  # more CPUs: another flavor
        await w.settle(lambda: w.get(RESOURCE_FLAVORS, CPU_FLAVOR) is None)
        assert w.get(RESOURCE_FLAVORS, "gpustack--amd-25-1-linux-amd64-16c") is not None
        assert [x.key for x in w.client.of("delete")] == [CPU_FLAVOR]


@pytest.mark.parametrize(
    "leave",
    [
        pytest.param(lambda w: w.remove(NODES, "n1"), id="node deleted"),
        pytest.param(lambda w: w.put(NODES, a_node("n1", cards=2, labels=UNMANAGED)), id="node unmanaged"),
        pytest.param(lambda w: w.put(NODES, a_node("n1", cards=2, labels=NO_OS)), id="os label removed"),
    ],
)
async def test_a_flavor_no_managed_node_contributes_to_is_deleted(leave: Callable[[World], None]) -> None:
    async with flavors_of(a_node("n1", cards=2), derived_from_node="false") as w:
        leave(w)
        await w.settle(
            lambda: (
                w.get(RESOURCE_FLAVORS, CPU_FLAVOR) is None and w.get(RESOURCE_FLAVORS, GPU_FLAVOR) is None
            )
        )
        assert sorted(x.key for x in w.client.of("delete")) == [GPU_FLAVOR, CPU_FLAVOR]


async def test_heartbeats_and_a_restart_write_nothing() -> None:
    async with flavors_of(a_node("n1", cards=2)) as w:
        settled = len(w.client.writes)
        for beat_at in range(4):
            beat = a_node("n1", cards=2)
            beat["status"]["conditions"] = [
                {"type": "Ready", "status": "True", "lastHeartbeatTime": str(beat_at)}
            ]
            w.put(NODES, beat)
        await w.settle()
        assert len(w.client.writes) == settled

    informers = copy_of(w.informers)  # a new worker process lists what the cluster holds
    client = RecordingClient(informers)
    restarted = Manager(informers)
    environment = Environment(pod_namespace=SYSTEM)
    setup_controllers(restarted, client=client, environment=environment, factories=(node_flavor.controller,))
    async with running(restarted):
        await eventually(lambda: restarted.leading)
        await yield_to_loop(500)
    assert client.writes == []


@pytest.mark.parametrize(
    ("aware", "expected"),
    [
        pytest.param(
            "false",
            {
                "gpustack--generic-linux-amd64": ("generic", None, False, "CPU-only", ("1", "2Gi")),
                "gpustack--nvidia-tesla-t4-linux-amd64": (
                    "generic",
                    "nvidia-tesla-t4",
                    True,
                    "Tesla-T4",
                    ("4", "16Gi"),
                ),
            },
            id="CPU maker ignored: one generic CPU type, one type per card model",
        ),
        pytest.param(
            "true",
            {
                "gpustack--amd-25-1-linux-amd64": ("amd-25-1", None, False, None, ("1", "2Gi")),
                "gpustack--amd-25-1--nvidia-tesla-t4-linux-amd64": (
                    "amd-25-1",
                    "nvidia-tesla-t4",
                    True,
                    "Tesla-T4",
                    ("4", "16Gi"),
                ),
            },
            id="CPU maker aware: types split by CPU key",
        ),
    ],
)
async def test_derived_instance_types_are_created_with_the_pool_identity_and_default_unit(
    aware: str, expected: dict[str, tuple[str, str | None, bool, str | None, tuple[str, str]]]
) -> None:
    async with flavors_of(a_node("gpu", cards=2), aware_cpu_manufacturer=aware) as w:
        created = {x.key: x.body for x in w.client.of("create", "InstanceType")}
        assert sorted(created) == sorted(expected)
        for name, (general, accel, acceleratable, display, unit) in expected.items():
            body = created[name]
            assert body is not None
            assert INSTANCE_TYPE.validate(body) == []
            assert body["metadata"]["labels"] == {"schedule.gpustack.ai/derived-from-node": "true"}
            spec = body["spec"]
            assert (spec["generalGroup"], spec.get("acceleratorGroup"), spec["acceleratable"]) == (
                general,
                accel,
                acceleratable,
            )
            assert (spec["os"], spec["arch"], spec.get("displayName")) == ("linux", "amd64", display)
            assert (spec["unitResources"]["cpu"], spec["unitResources"]["ram"]) == unit
            assert spec["localStorage"] == "100Gi"


async def test_cpu_detail_rides_on_a_device_flavor_only_when_types_split_by_cpu_maker() -> None:
    detail = "note.gpustack.ai/cpuDetail"
    gpu = a_node("gpu", cards=2)
    gpu["metadata"]["annotations"] = {"feature.gpustack.ai/cpu-physical-cores": "8"}
    async with flavors_of(gpu, aware_cpu_manufacturer="true", derived_from_node="false") as w:
        assert detail in rf(w, GPU_FLAVOR)["metadata"]["annotations"]
        w.set(aware_cpu_manufacturer="false")
        await w.settle(lambda: detail not in rf(w, GPU_FLAVOR)["metadata"]["annotations"])
        assert w.client.of("patch")[-1].body == {"metadata": {"annotations": {detail: None}}}
        assert detail in rf(w, CPU_FLAVOR)["metadata"]["annotations"]


async def test_an_existing_instance_type_is_never_touched() -> None:
    admin_owned = {
        "metadata": {"name": "gpustack--generic-linux-amd64", "resourceVersion": "1"},
        "spec": {"displayName": "our CPUs", "unitResources": {"cpu": "1", "ram": "8Gi"}},
    }
    async with flavors_of(a_node("n1"), seed=[(INSTANCE_TYPES, admin_owned)]) as w:
        assert w.client.of("create", "InstanceType") == []
        assert (w.get(INSTANCE_TYPES, "gpustack--generic-linux-amd64") or {})["spec"] == admin_owned["spec"]


async def test_a_derived_instance_type_deleted_is_authored_again() -> None:
    name = "gpustack--generic-linux-amd64"
    async with flavors_of(a_node("n1")) as w:
        w.remove(INSTANCE_TYPES, name)
        await w.settle(lambda: w.get(INSTANCE_TYPES, name) is not None)
        assert [x.key for x in w.client.of("create", "InstanceType")] == [name, name]


async def test_no_instance_type_is_derived_when_the_setting_is_off() -> None:
    async with flavors_of(a_node("n1", cards=2), derived_from_node="false") as w:
        assert w.client.of("create", "InstanceType") == []
        assert w.get(RESOURCE_FLAVORS, GPU_FLAVOR) is not None


async def test_not_mixing_on_node_retires_a_gpu_nodes_cpu_flavor_and_pins_cpu_flavors_to_cpu_nodes() -> None:
    cpu_only = "gpustack--amd-25-1-linux-amd64-4c"
    async with flavors_of(a_node("gpu", cards=2), a_node("cpu", cpus=4)) as w:
        w.set(mixed_on_node="false")
        await w.settle(lambda: w.get(RESOURCE_FLAVORS, CPU_FLAVOR) is None)
        assert w.get(RESOURCE_FLAVORS, GPU_FLAVOR) is not None
        pinned = rf(w, cpu_only)["spec"]["nodeLabels"]
        assert pinned["feature.gpustack.ai/acceleratable"] == "false"


async def test_a_node_with_unusable_labels_is_skipped_and_named_in_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    odd = a_node("odd", labels={"kubernetes.io/os": "Linux_OS"})
    with caplog.at_level(logging.WARNING):
        async with flavors_of(odd, a_node("n1", labels={f"{G}amd-25-1.count": "many"}), a_node("n2")) as w:
            assert w.client.of("create", "ResourceFlavor")[0].key == CPU_FLAVOR
            assert rf(w, CPU_FLAVOR)["metadata"]["labels"][f"{G}amd-25-1.capacity"] == "8"
    assert [r.getMessage() for r in caplog.records if "odd" in r.getMessage()] == [
        "node=odd skipped for ResourceFlavors: flavor name "
        "'gpustack--amd-25-1-Linux_OS-amd64-8c' is not a DNS-1123 subdomain"
    ]


async def test_flavors_that_are_not_ours_or_already_going_are_left_alone() -> None:
    theirs = {"metadata": {"name": "pool-a100", "resourceVersion": "1"}, "spec": {}}
    going = {
        "metadata": {
            "name": "gpustack--amd-25-1-linux-amd64-64c",
            "resourceVersion": "1",
            "deletionTimestamp": "2025-01-01T00:00:00Z",
            "labels": {"resource.gpustack.ai/type": "nodes"},
        },
        "spec": {},
    }
    async with flavors_of(seed=[(RESOURCE_FLAVORS, theirs), (RESOURCE_FLAVORS, going)]) as w:
        assert w.client.writes == []
