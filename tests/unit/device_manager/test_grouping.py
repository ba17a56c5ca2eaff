"""Cards become Devices groups with the contract's IDs, slicing features and node labels."""

from __future__ import annotations

import dataclasses
import logging

import pytest

from gpustack_operator.api.types.devices import DevicesGroup
from gpustack_operator.device_manager.detector.pci import PciDevice, pci_card, with_topology
from gpustack_operator.device_manager.grouping import group_cards, group_id
from gpustack_operator.device_manager.model import Card
from gpustack_operator.rules.naming.labels import construct_acceleratable_node_labels
from tests.unit.rules.builders import is_label_key

WITH_MEMORY = {"GPUSTACK_DEVICES_GROUP_ID_WITH_MEMORY": "true"}

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


def ids(group: DevicesGroup) -> list[str]:
    return [a["id"] for a in group.get("accelerators", [])]


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
        ("hygon", {"logicalSliced": {"maxSize": 4, "coresPercentageOvercommit": False}}),
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


def test_same_name_different_vram_is_one_group_sized_by_the_smaller_card_and_warned_of(
    caplog: pytest.LogCaptureFixture,
) -> None:
    small = dataclasses.replace(H100, product="NVIDIA A100-SXM4", memory_mib=40960, uuid="GPU-s", index=1)
    large = dataclasses.replace(H100, product="NVIDIA A100-SXM4", memory_mib=81920, uuid="GPU-l", index=0)
    with caplog.at_level(logging.WARNING, logger="gpustack_operator.device_manager.grouping"):
        a100, h100 = group_cards([large, small, H100])
    assert (a100["id"], a100["memory"], [a["id"] for a in a100["accelerators"]]) == (
        "a100-sxm4",
        40960,
        ["GPU-l", "GPU-s"],
    )
    assert h100["id"] == "h100-80gb-hbm3"
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "nvidia-a100-sxm4" in warning
    assert "set GPUSTACK_DEVICES_GROUP_ID_WITH_MEMORY=true to split them" in warning


def test_with_the_memory_suffix_same_name_different_vram_are_two_groups() -> None:
    small = dataclasses.replace(H100, product="NVIDIA A100-SXM4", memory_mib=40960, uuid="GPU-s")
    large = dataclasses.replace(H100, product="NVIDIA A100-SXM4", memory_mib=81920, uuid="GPU-l", index=1)
    groups = group_cards([large, small, H100], environ=WITH_MEMORY)
    assert [g["id"] for g in groups] == ["a100-sxm4-40g", "a100-sxm4-80g", "h100-80gb-hbm3-80g"]


def test_an_a100_keeps_its_id_when_another_a100_size_joins_or_leaves_the_node() -> None:
    large = dataclasses.replace(H100, product="NVIDIA A100-PCIE", memory_mib=81920, uuid="GPU-l")
    small = dataclasses.replace(H100, product="NVIDIA A100-PCIE", memory_mib=40960, uuid="GPU-s", index=1)
    for environ, expected in (({}, "a100-pcie"), (WITH_MEMORY, "a100-pcie-80g")):
        alone = group_cards([large], environ)
        together = group_cards([large, small], environ)
        assert [g["id"] for g in alone] == [expected]
        assert [g["id"] for g in together if "GPU-l" in ids(g)] == [expected]


def test_two_spellings_of_one_product_merge_without_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    spelt = dataclasses.replace(H100, product="NVIDIA A100", memory_mib=81920, uuid="GPU-a")
    bare = dataclasses.replace(H100, product="A100", memory_mib=81920, uuid="GPU-b", index=1)
    with caplog.at_level(logging.WARNING, logger="gpustack_operator.device_manager.grouping"):
        (group,) = group_cards([spelt, bare], environ=WITH_MEMORY)
    assert (group["id"], ids(group)) == ("a100-80g", ["GPU-a", "GPU-b"])
    assert group["name"] == "A100", "the name is chosen by a fixed order, not by which card came first"
    assert caplog.records == []


def test_a_collision_is_warned_of_once_per_process_not_every_detection(
    caplog: pytest.LogCaptureFixture,
) -> None:
    big = dataclasses.replace(H100, product="NVIDIA Once-Only", memory_mib=40960, uuid="GPU-1")
    odd = dataclasses.replace(big, cores=1, uuid="GPU-2", index=1)
    with caplog.at_level(logging.WARNING, logger="gpustack_operator.device_manager.grouping"):
        for _ in range(3):
            group_cards([big, odd], environ=WITH_MEMORY)
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "no setting splits them" in warning, "same VRAM: the memory suffix would not help"


@pytest.mark.parametrize(
    ("product", "pci_id", "environ", "expected"),
    [
        pytest.param("NVIDIA", "10de:2330", {}, "pci-10de2330", id="vendor-word-only-named-by-pci-ids"),
        pytest.param("", "10de:2330", {}, "pci-10de2330", id="empty-name-named-by-pci-ids"),
        pytest.param("NVIDIA", "10de:2330", WITH_MEMORY, "pci-10de2330-80g", id="with-memory"),
        pytest.param("NVIDIA", "", {}, "unnamed", id="no-pci-ids-either"),
        pytest.param("NVIDIA ®", "", WITH_MEMORY, "unnamed-80g", id="nothing-at-all-with-memory"),
    ],
)
def test_a_product_name_that_normalises_to_nothing_gets_a_valid_stable_id(
    product: str, pci_id: str, environ: dict[str, str], expected: str
) -> None:
    card = dataclasses.replace(H100, product=product, pci_id=pci_id)
    (group,) = group_cards([card], environ)
    assert group["id"] == expected
    for key in construct_acceleratable_node_labels([group]):
        assert is_label_key(key), key


def test_a_nameless_card_is_called_what_a_bus_only_detection_calls_it() -> None:
    device = PciDevice(address="0000:3b:00.0", vendor="10de", device="2330", pci_class="030200")
    from_bus = pci_card("nvidia", device, 0, "NVML not installed")
    from_library = with_topology(dataclasses.replace(H100, product="NVIDIA"), device)
    assert group_id(from_library) == group_id(from_bus) == "pci-10de2330"


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
    (group,) = group_cards([H100], environ=WITH_MEMORY)
    assert group["id"] == "h100-80gb-hbm3-80g"


def test_a_card_the_library_lost_stays_in_its_group_without_shrinking_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen = cards(dataclasses.replace(H100, product="NVIDIA A100-SXM4-80GB", memory_mib=81920), 3)
    device = PciDevice("0000:c1:00.0", "10de", "20b2", "030200", model="GA100 [A100 SXM4 80GB]")
    lost = pci_card("nvidia", device, 3, "the nvidia library does not see this card", healthy=False)
    with caplog.at_level(logging.WARNING, logger="gpustack_operator.device_manager.grouping"):
        (group,) = group_cards([*seen, lost])
    assert (group["id"], group["memory"], group["name"]) == ("a100-sxm4-80gb", 81920, "NVIDIA A100-SXM4-80GB")
    assert [a["status"]["unhealthy"] for a in group["accelerators"]] == [False, False, False, True]
    assert "acceleratorsFeature" in group, "one lost card does not take slicing from its healthy siblings"
    assert caplog.records == []
