"""The ResourceFlavors a node offers and the pool / InstanceType names built from them (§7.6, §7.9)."""

from __future__ import annotations

import json

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from gpustack_operator.api.types.devices import DevicesGroup
from gpustack_operator.rules.naming.flavors import NodeFlavor, extract_node_flavors, pool_name
from gpustack_operator.rules.naming.groups import construct_group_id
from gpustack_operator.rules.naming.labels import (
    construct_acceleratable_node_labels,
    construct_node_capacity_labels,
)
from gpustack_operator.rules.naming.nodes import Node
from tests.unit.rules.builders import (
    accelerators,
    cpu_labels,
    cpu_name,
    is_dns_subdomain,
    is_label_key,
    is_label_value,
    node,
    tesla_t4_group,
)

A = "acceleratable.feature.gpustack.ai/"
G = "general.feature.gpustack.ai/"
EPYC = "AMD EPYC 7763 64-Core Processor"
NO_ENV: dict[str, str] = {}


def labelled(
    labels: dict[str, str],
    annotations: dict[str, str] | None = None,
    capacity: dict[str, str] | None = None,
    groups: list[DevicesGroup] | None = None,
) -> Node:
    """A node as NFD leaves it: its own labels plus the worker's and the device manager's."""
    bare = node(labels, annotations or {}, capacity or {})
    merged = {
        **labels,
        **construct_node_capacity_labels(bare),
        **construct_acceleratable_node_labels(groups or []),
    }
    return node(merged, annotations or {}, capacity or {})


def epyc_t4_node() -> Node:
    return labelled(cpu_labels("AMD", "25", "1"), cpu_name(EPYC), {"cpu": "8"}, [tesla_t4_group(cards=2)])


def by_name(flavors: list[NodeFlavor]) -> dict[str, NodeFlavor]:
    return {flavor.name: flavor for flavor in flavors}


def test_cpu_only_node_offers_one_cpu_flavor() -> None:
    (flavor,) = extract_node_flavors(
        labelled(cpu_labels("AMD", "25", "1"), capacity={"cpu": "8"}), environ=NO_ENV
    )
    assert flavor.name == "gpustack--amd-25-1-linux-amd64-8c"
    assert dict(flavor.node_labels) == {
        "gpustack.ai/managed": "true",
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        f"{G}amd-25-1": "true",
        f"{G}amd-25-1.count": "8",
    }
    assert not flavor.acceleratable
    assert flavor.notes["manufacturer"] == "amd"


def test_accelerated_node_offers_a_cpu_and_a_device_flavor() -> None:
    flavors = by_name(extract_node_flavors(epyc_t4_node(), environ=NO_ENV))
    assert list(flavors) == [
        "gpustack--amd-epyc-7763-linux-amd64-8c",
        "gpustack--amd-epyc-7763--nvidia-tesla-t4-linux-amd64-2d",
    ]
    device = flavors["gpustack--amd-epyc-7763--nvidia-tesla-t4-linux-amd64-2d"]
    assert dict(device.node_labels) == {
        "gpustack.ai/managed": "true",
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        f"{G}amd-epyc-7763": "true",
        f"{A}nvidia-tesla-t4": "true",
        f"{A}nvidia-tesla-t4.count": "2",
    }
    notes = device.notes
    assert (notes["product"], notes["family"], notes["memory"], notes["cores"]) == (
        "Tesla-T4",
        "Turing",
        "15Gi",
        "0",
    )
    assert (notes["acceleratable"], notes["acceleratorGroup"], notes["generalGroup"]) == (
        "true",
        "nvidia-tesla-t4",
        "amd-epyc-7763",
    )
    assert notes["manufacturer"] == "nvidia"
    assert notes["sliceable"] == "false"
    cpu = flavors["gpustack--amd-epyc-7763-linux-amd64-8c"]
    assert (cpu.notes["product"], cpu.notes["generalGroup"]) == (EPYC, "amd-epyc-7763")


def test_node_without_cpu_capacity_or_devices_offers_nothing() -> None:
    assert extract_node_flavors(labelled(cpu_labels("AMD", "25", "1")), environ=NO_ENV) == []


def test_node_without_labels_or_os_offers_nothing() -> None:
    assert extract_node_flavors(node(), environ=NO_ENV) == []
    assert extract_node_flavors(node({f"{G}amd.count": "8"}, capacity={"cpu": "8"}), environ=NO_ENV) == []


@pytest.mark.parametrize(
    ("aware", "accelerated", "identity"),
    [
        pytest.param(False, False, ("gpustack--generic-linux-amd64", "generic", ""), id="unaware-cpu"),
        pytest.param(
            False,
            True,
            ("gpustack--nvidia-tesla-t4-linux-amd64", "generic", "nvidia-tesla-t4"),
            id="unaware-accelerated",
        ),
        pytest.param(
            True, False, ("gpustack--amd-epyc-7763-linux-amd64", "amd-epyc-7763", ""), id="aware-cpu"
        ),
        pytest.param(
            True,
            True,
            ("gpustack--amd-epyc-7763--nvidia-tesla-t4-linux-amd64", "amd-epyc-7763", "nvidia-tesla-t4"),
            id="aware-accelerated",
        ),
    ],
)
def test_derived_instance_type_identity(
    aware: bool, accelerated: bool, identity: tuple[str, str, str]
) -> None:
    cpu, device = extract_node_flavors(epyc_t4_node(), environ=NO_ENV)
    assert (device if accelerated else cpu).derived_instance_type_identity(aware) == identity


@pytest.mark.parametrize(
    ("aware", "general", "accel", "name"),
    [
        pytest.param(
            False, "amd-epyc-7763", "nvidia-tesla-t4", "gpustack--nvidia-tesla-t4", id="unaware-accelerated"
        ),
        pytest.param(
            True, "amd-epyc-7763", "nvidia-tesla-t4", "gpustack--amd-epyc-7763--nvidia-tesla-t4", id="aware"
        ),
        pytest.param(False, "amd-epyc-7763", "", "gpustack--generic", id="unaware-cpu-collapses"),
        pytest.param(True, "amd-epyc-7763", "", "gpustack--amd-epyc-7763", id="aware-cpu"),
    ],
)
def test_pool_name_is_the_instance_type_flavor_name(aware: bool, general: str, accel: str, name: str) -> None:
    assert pool_name(aware, general, accel) == name


def test_resource_flavor_labels_and_notes() -> None:
    cpu, device = extract_node_flavors(epyc_t4_node(), environ=NO_ENV)
    assert device.resource_flavor_labels(nodes=3) == {
        f"{A}nvidia-tesla-t4": "true",
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "feature.gpustack.ai/acceleratable": "true",
        f"{A}nvidia-tesla-t4.count": "2",
        f"{A}nvidia-tesla-t4.capacity": "6",
        f"{G}amd-epyc-7763": "true",
        "resource.gpustack.ai/type": "nodes",
    }
    assert cpu.resource_flavor_labels(nodes=2)[f"{G}amd-epyc-7763.capacity"] == "16"
    assert cpu.resource_flavor_labels(nodes=2)["feature.gpustack.ai/acceleratable"] == "false"
    assert device.note_annotations()["note.gpustack.ai/acceleratorGroup"] == "nvidia-tesla-t4"


def test_cpu_detail_note_is_json_of_the_reported_cpu() -> None:
    annotations = {
        **cpu_name(EPYC),
        "feature.gpustack.ai/cpu-physical-cores": "64",
        "feature.gpustack.ai/cpu-cache-l3": "33554432",
        "feature.gpustack.ai/cpu-hz": "@cpu.model.hz",
    }
    (cpu,) = extract_node_flavors(
        labelled(cpu_labels("AMD", "25", "1"), annotations, {"cpu": "8"}), environ=NO_ENV
    )
    assert json.loads(cpu.notes["cpuDetail"]) == {
        "manufacturer": "amd",
        "product": EPYC,
        "physicalCores": "64",
        "cache": {"l3": "33554432"},
    }


def test_sliceable_when_the_node_advertises_sliced_units() -> None:
    bare = epyc_t4_node()
    sliced = node(
        bare["metadata"]["labels"],
        bare["metadata"]["annotations"],
        {"cpu": "8", "nvidia.com/gpu.sliced.units": "3200000"},
    )
    _, device = extract_node_flavors(sliced, environ=NO_ENV)
    assert device.notes["sliceable"] == "true"


def test_not_mixed_on_node_keeps_cpu_flavors_to_cpu_only_nodes() -> None:
    assert [f.name for f in extract_node_flavors(epyc_t4_node(), mixed_on_node=False, environ=NO_ENV)] == [
        "gpustack--amd-epyc-7763--nvidia-tesla-t4-linux-amd64-2d"
    ]
    cpu_only = labelled(cpu_labels("AMD", "25", "1"), capacity={"cpu": "8"})
    (flavor,) = extract_node_flavors(cpu_only, mixed_on_node=False, environ=NO_ENV)
    assert flavor.node_labels["feature.gpustack.ai/acceleratable"] == "false"


def test_underscore_in_a_group_id_stays_in_labels_but_not_in_object_names() -> None:
    group: DevicesGroup = {
        "id": "k100_ai",
        "manufacturer": "hygon",
        "name": "K100_AI",
        "memory": 65520,
        "accelerators": accelerators(1),
    }
    _, device = extract_node_flavors(
        labelled(cpu_labels("Hygon", "24", "4"), {}, {"cpu": "8"}, [group]), environ={}
    )
    assert device.accel_key == "hygon-k100_ai"
    assert device.name == "gpustack--hygon-24-4--hygon-k100-ai-linux-amd64-1d"
    assert f"{A}hygon-k100_ai" in device.node_labels


@given(
    st.text(),
    st.sampled_from(["AMD", "Intel", "", "Hygon"]),
    st.text(min_size=1),
    st.sampled_from(["nvidia", "hygon", "ascend"]),
    st.integers(min_value=1, max_value=16),
    st.integers(min_value=1, max_value=512),
)
def test_every_name_and_label_a_node_yields_is_valid(
    cpu: str, vendor: str, product: str, manufacturer: str, cards: int, cpus: int
) -> None:
    group: DevicesGroup = {
        "id": construct_group_id(manufacturer, product, 40960, {}),
        "manufacturer": manufacturer,
        "name": product,
        "memory": 40960,
        "accelerators": accelerators(cards),
    }
    assume(group["id"])
    flavors = extract_node_flavors(
        labelled(cpu_labels(vendor, "25", "1"), cpu_name(cpu), {"cpu": str(cpus)}, [group]), environ={}
    )
    assert len(flavors) == 2
    for flavor in flavors:
        assert is_dns_subdomain(flavor.name), flavor.name
        for aware in (False, True):
            assert is_dns_subdomain(flavor.derived_instance_type_identity(aware)[0])
        for key, value in flavor.resource_flavor_labels(nodes=1000).items() | flavor.node_labels.items():
            assert is_label_key(key), key
            assert is_label_value(value), value
