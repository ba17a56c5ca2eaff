"""The simulated backend gives the sandbox's fake nodes stable cards and lets tests break them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpustack_operator.device_manager.model import DetectionError
from gpustack_operator.device_manager.simulated import Faults, SimulatedBackend, simulated_uuid
from gpustack_operator.rules.naming.manufacturers import manufacturers

SANDBOX_INVENTORY = Path(__file__).parents[3] / "src/gpustack_operator/sandbox/inventory.yaml"


def inventory(tmp_path: Path, gpus: list[dict[str, object]]) -> Path:
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump({"nodes": [{"name": "gpu-0", "cpu": {"cores": 8}, "gpus": gpus}]}))
    return path


def test_sandbox_inventory_node_has_its_cards_with_stable_distinct_uuids() -> None:
    cards = SimulatedBackend(SANDBOX_INVENTORY, "h100-0").detect()
    again = SimulatedBackend(SANDBOX_INVENTORY, "h100-0").detect()
    other = SimulatedBackend(SANDBOX_INVENTORY, "h100-1").detect()
    assert len(cards) == 8
    assert [c.uuid for c in cards] == [c.uuid for c in again]
    assert not {c.uuid for c in cards} & {c.uuid for c in other}
    assert cards[3].uuid == simulated_uuid("h100-0", "nvidia", 3)
    assert cards[3].uuid.startswith("GPU-")
    assert {(c.product, c.memory_mib) for c in cards} == {("NVIDIA H100 80GB HBM3", 81559)}


def test_indexes_count_per_manufacturer_and_optional_facts_are_read(tmp_path: Path) -> None:
    path = inventory(
        tmp_path,
        [
            {"manufacturer": "nvidia", "product": "NVIDIA A10", "count": 2, "memoryMiB": 23028},
            {"manufacturer": "ascend", "product": "Ascend910B2", "count": 1, "memoryMiB": 65536},
            {
                "manufacturer": "nvidia",
                "product": "NVIDIA L40S",
                "count": 1,
                "memoryMiB": 49140,
                "runtimeVersion": "12.4",
                "computeCapability": "8.9",
                "cores": 18176,
            },
        ],
    )
    cards = SimulatedBackend(path, "gpu-0").detect()
    assert [(c.manufacturer, c.index) for c in cards] == [
        ("nvidia", 0),
        ("nvidia", 1),
        ("ascend", 0),
        ("nvidia", 2),
    ]
    assert (cards[3].runtime_version, cards[3].compute_capability, cards[3].cores) == ("12.4", "8.9", 18176)
    assert len({c.pci_bus_id for c in cards}) == 4


def test_a_node_without_gpus_has_no_cards_and_an_unknown_node_is_an_error() -> None:
    assert SimulatedBackend(SANDBOX_INVENTORY, "cpu-0").detect() == []
    with pytest.raises(DetectionError, match="not in inventory"):
        SimulatedBackend(SANDBOX_INVENTORY, "no-such-node").detect()


def test_faults_through_the_api_turn_a_card_unhealthy_or_remove_it() -> None:
    backend = SimulatedBackend(SANDBOX_INVENTORY, "a10-0")
    first, second, *_ = backend.detect()
    backend.mark_unhealthy(first.uuid)
    backend.remove(second.uuid)
    cards = backend.detect()
    assert [(c.uuid, c.healthy) for c in cards[:1]] == [(first.uuid, False)]
    assert second.uuid not in {c.uuid for c in cards}
    assert len(cards) == 3
    backend.clear_faults()
    assert all(c.healthy for c in backend.detect())


def test_faults_file_is_reread_on_every_detection(tmp_path: Path) -> None:
    faults = tmp_path / "faults.yaml"
    backend = SimulatedBackend(SANDBOX_INVENTORY, "a10-0", faults)
    uuids = [c.uuid for c in backend.detect()]
    faults.write_text(yaml.safe_dump({"unhealthy": [uuids[2]], "missing": [uuids[0]]}))
    assert [(c.uuid, c.healthy) for c in backend.detect()] == [
        (uuids[1], True),
        (uuids[2], False),
        (uuids[3], True),
    ]
    faults.unlink()
    assert len(backend.detect()) == 4


def test_saved_faults_are_what_a_running_backend_reads_and_leave_no_temp_file(tmp_path: Path) -> None:
    faults = tmp_path / "node" / "faults.yaml"
    backend = SimulatedBackend(SANDBOX_INVENTORY, "a10-0", faults)
    uuids = [c.uuid for c in backend.detect()]
    Faults(unhealthy={uuids[1]}, missing={uuids[3]}).save(faults)
    assert [(c.uuid, c.healthy) for c in backend.detect()] == [
        (uuids[0], True),
        (uuids[1], False),
        (uuids[2], True),
    ]
    Faults().save(faults)
    assert [c.healthy for c in backend.detect()] == [True] * 4
    assert [p.name for p in faults.parent.iterdir()] == ["faults.yaml"]


def test_malformed_inventory_is_a_detection_error(tmp_path: Path) -> None:
    path = inventory(tmp_path, [{"manufacturer": "nvidia", "product": "X"}])
    with pytest.raises(DetectionError, match="bad gpus entry"):
        SimulatedBackend(path, "gpu-0").detect()


def test_metrics_show_idle_cards_with_their_health() -> None:
    backend = SimulatedBackend(SANDBOX_INVENTORY, "a10-0")
    backend.mark_unhealthy(backend.detect()[0].uuid)
    readings = backend.metrics()
    assert [(r.healthy, r.memory_total_mib, r.utilization_percent) for r in readings[:2]] == [
        (False, 23028, 0),
        (True, 23028, 0),
    ]


def test_every_vendor_of_the_all_vendors_inventory_has_the_same_facts_its_library_reports() -> None:
    path = Path(__file__).parents[3] / "src/gpustack_operator/sandbox/inventories/all-vendors.yaml"
    doc = yaml.safe_load(path.read_text())
    seen = {}
    for node in doc["nodes"]:
        for card in SimulatedBackend(path, node["name"]).detect():
            seen[card.manufacturer] = card
            assert card.memory_mib > 0, card
            assert card.cores > 0, card
            assert card.driver_version, card
            assert card.runtime_version, card
            assert card.healthy, card
            assert not card.detail_missing, card
    assert sorted(seen) == sorted(manufacturers())
    assert (seen["ascend"].product, seen["ascend"].family, seen["ascend"].pci_class) == (
        "Ascend910B2",
        "910B",
        "120000",
    )


def test_the_inventory_can_flag_cards_unhealthy_and_sets_their_pci_class(tmp_path: Path) -> None:
    path = inventory(
        tmp_path,
        [{"manufacturer": "metax", "product": "MXC500", "count": 3, "memoryMiB": 65536, "pciClass": "0380",
          "unhealthy": [1]}],
    )  # fmt: skip
    cards = SimulatedBackend(path, "gpu-0").detect()
    assert [(c.index, c.healthy, c.pci_class) for c in cards] == [
        (0, True, "038000"),
        (1, False, "038000"),
        (2, True, "038000"),
    ]
