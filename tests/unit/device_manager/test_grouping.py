"""Cards become Devices groups with the contract's IDs, slicing features and node labels."""

from __future__ import annotations

import dataclasses

import pytest

from gpustack_operator.device_manager.grouping import group_cards
from gpustack_operator.device_manager.model import Card
from gpustack_operator.nodefeature.labels import construct_acceleratable_node_labels

H100 = Card(
    "nvidia",
    "NVIDIA H100 80GB HBM3",
    81559,
    "GPU-a",
    0,
    minor=0,
    driver_version="550.54.15",
    runtime_version="12.4",
    compute_capability="9.0",
    family="Hopper",
    cores=16896,
)


def cards(template: Card, count: int, **changes: object) -> list[Card]:
    return [
        dataclasses.replace(template, uuid=f"{template.uuid}{i}", index=i, minor=i, **changes)
        for i in range(count)
    ]


def test_eight_h100s_form_one_sliceable_group_with_every_card() -> None:
    (group,) = group_cards(cards(H100, 8))
    assert (group["id"], group["manufacturer"], group["name"], group["memory"]) == (
        "h100-80gb-hbm3",
        "nvidia",
        "NVIDIA H100 80GB HBM3",
        81559,
    )
    assert (group["driverVersion"], group["runtimeVersion"], group["family"], group["cores"]) == (
        "550.54.15",
        "12.4",
        "Hopper",
        16896,
    )
    assert group["acceleratorsFeature"] == {
        "logicalSliced": {"maxSize": 128, "coresPercentageOvercommit": True}
    }
    assert [a["index"] for a in group["accelerators"]] == list(range(8))


def test_node_labels_of_the_groups_match_the_contract() -> None:
    labels = construct_acceleratable_node_labels(group_cards(cards(H100, 8)))
    prefix = "acceleratable.feature.gpustack.ai/"
    assert labels["feature.gpustack.ai/acceleratable"] == "true"
    assert labels[prefix + "nvidia"] == "true"
    assert labels[prefix + "nvidia.runtime-version"] == "12.4"
    assert labels[prefix + "nvidia-h100-80gb-hbm3.count"] == "8"
    assert labels[prefix + "nvidia-h100-80gb-hbm3.memory"] == "80Gi"
    assert labels[prefix + "nvidia-h100-80gb-hbm3.comcap"] == "9.0"


def test_accelerator_entries_carry_topology_minor_and_health() -> None:
    card = dataclasses.replace(
        H100,
        pci_bus_id="0000:18:00.0",
        pci_root="0000:17",
        pci_class="030200",
        numa_affinity="0",
        cpu_affinity="0-47",
        minor=4,
        healthy=False,
    )
    (group,) = group_cards([card])
    assert group["accelerators"] == [
        {
            "id": "GPU-a",
            "index": 0,
            "physicalIndexes": [4],
            "topology": {
                "pciBusId": "0000:18:00.0",
                "pciRootId": "0000:17",
                "pciClass": "030200",
                "numaAffinity": "0",
                "cpuAffinity": "0-47",
            },
            "status": {"unhealthy": True},
        }
    ]


def test_unknown_minor_falls_back_to_the_index_and_unknown_facts_are_left_out() -> None:
    card = Card("ascend", "PCI 19e5:d802", 0, "pci-0000-c1-00.0", 2, sliceable=False)
    (group,) = group_cards([card])
    assert group["accelerators"][0]["physicalIndexes"] == [2]
    assert set(group) == {"id", "manufacturer", "name", "memory", "accelerators"}


@pytest.mark.parametrize(
    ("manufacturer", "feature"),
    [
        ("nvidia", {"logicalSliced": {"maxSize": 128, "coresPercentageOvercommit": True}}),
        ("ascend", {"logicalSliced": {"maxSize": 63, "coresPercentageOvercommit": True}}),
        ("cambricon", {"logicalSliced": {"maxSize": 16, "coresPercentageOvercommit": False}}),
        ("hygon", {"logicalSliced": {"maxSize": 4, "coresPercentageOvercommit": True}}),
        ("mthreads", {"logicalSliced": {"maxSize": 16, "coresPercentageOvercommit": False}}),
        ("metax", {"logicalSliced": {"maxSize": 16, "coresPercentageOvercommit": False}}),
        ("amd", None),
        ("iluvatar", None),
        ("thead", None),
    ],
)
def test_slicing_feature_per_vendor(manufacturer: str, feature: object) -> None:
    (group,) = group_cards([dataclasses.replace(H100, manufacturer=manufacturer)])
    assert group.get("acceleratorsFeature") == feature


def test_one_mig_enabled_card_makes_its_group_unsliceable() -> None:
    mixed = cards(H100, 3)
    mixed[1] = dataclasses.replace(mixed[1], sliceable=False)
    (group,) = group_cards(mixed)
    assert "acceleratorsFeature" not in group


def test_same_name_different_vram_takes_memory_suffixed_ids_instead_of_colliding() -> None:
    small = dataclasses.replace(H100, product="NVIDIA A100", memory_mib=40960, uuid="GPU-s")
    large = dataclasses.replace(H100, product="NVIDIA A100", memory_mib=81920, uuid="GPU-l", index=1)
    other = dataclasses.replace(H100, uuid="GPU-h", index=2)
    assert [g["id"] for g in group_cards([large, small, other])] == ["a100-40g", "a100-80g", "h100-80gb-hbm3"]


def test_groups_are_sorted_so_the_same_cards_always_give_the_same_spec() -> None:
    a10 = Card("nvidia", "NVIDIA A10", 23028, "GPU-b", 1)
    ascend = Card("ascend", "Ascend910B2", 65536, "npu-0", 0)
    forward = group_cards([H100, a10, ascend])
    assert forward == group_cards([ascend, a10, H100])
    assert [(g["manufacturer"], g["id"]) for g in forward] == [
        ("ascend", "910b2"),
        ("nvidia", "a10"),
        ("nvidia", "h100-80gb-hbm3"),
    ]


def test_group_id_with_memory_setting_is_honoured() -> None:
    (group,) = group_cards([H100], environ={"GPUSTACK_DEVICES_GROUP_ID_WITH_MEMORY": "true"})
    assert group["id"] == "h100-80gb-hbm3-80g"
