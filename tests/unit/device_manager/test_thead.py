"""T-Head PPUs through HGML, on recorded library answers: what a node with T-Head cards reports."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from gpustack_operator.device_manager.detector import hgml, thead
from gpustack_operator.device_manager.detector.hardware import HardwareBackend, vendor_detectors
from gpustack_operator.device_manager.detector.native import IndexedDetector
from gpustack_operator.device_manager.detector.vendor import LibraryUnavailableError
from gpustack_operator.device_manager.grouping import group_cards
from tests.unit.device_manager.recorded import SysfsDevice, build_sysfs
from tests.unit.device_manager.recorded_hgml import (
    DRIVER_NOT_LOADED,
    EIGHT_PPUS,
    GPU_IS_LOST,
    NOT_SUPPORTED,
    PPU_PCI,
    UNKNOWN,
    RecordedPpu,
    opener,
    ppu,
    record_hgml,
)


def backend(tmp_path: Path, handle: object, devices: list[SysfsDevice] = PPU_PCI) -> HardwareBackend:
    detectors = vendor_detectors()
    detectors["thead"] = thead.detector(opener(handle))
    return HardwareBackend(["thead"], detectors=detectors, sysfs=build_sysfs(tmp_path / "sys", devices))


def detector(handle: object) -> IndexedDetector:
    return thead.detector(opener(handle))


def test_eight_ppus_report_vram_cores_versions_and_ids(tmp_path: Path) -> None:
    cards = backend(tmp_path, record_hgml(EIGHT_PPUS)).detect()
    first = cards[0]
    assert len(cards) == 8
    assert all(not c.detail_missing and c.healthy for c in cards)
    assert (first.product, first.memory_mib, first.cores, first.compute_capability) == (
        "T-Head PPU",
        98304,
        128,
        "8.0",
    )
    assert (first.driver_version, first.runtime_version) == ("1.5.2", "12.3"), "HGGC 12030 reads 12.3"
    assert first.uuid == "GPU-6d2e9f41-7a3b-4c5d-9e8f-0a1b2c3d4e00"
    assert [(c.index, c.minor, c.pci_bus_id) for c in cards[:2]] == [
        (0, -1, "0000:0e:00.0"),
        (1, -1, "0000:2a:00.0"),
    ], "HGML's minor number is not taken for a device-node number"
    assert (first.numa_affinity, first.pci_id) == ("0", "1ded:8000"), "topology from the bus"


def test_the_group_is_not_sliceable_and_names_cards_by_index(tmp_path: Path) -> None:
    (group,) = group_cards(backend(tmp_path, record_hgml(EIGHT_PPUS)).detect())
    assert (group["id"], group["memory"], group.get("cores")) == ("t-head-ppu", 98304, 128)
    assert not group.get("acceleratorsFeature"), "the manufacturer table gives T-Head no logical slices"


@pytest.mark.parametrize(
    ("card", "healthy"),
    [
        pytest.param(ppu(0, dram_uncorrected=1), False, id="volatile uncorrected DRAM errors"),
        pytest.param(
            ppu(0, total_uncorrected=3, errors={"hgmlDeviceGetMemoryErrorCounter": NOT_SUPPORTED}),
            False,
            id="no DRAM counter: the volatile uncorrected total",
        ),
        pytest.param(ppu(0, total_uncorrected=3), True, id="the DRAM counter wins over the total"),
        pytest.param(
            ppu(
                0,
                errors={
                    "hgmlDeviceGetMemoryErrorCounter": NOT_SUPPORTED,
                    "hgmlDeviceGetTotalEccErrors": NOT_SUPPORTED,
                },
            ),
            True,
            id="no ECC counters at all",
        ),
    ],
)
def test_health_follows_uncorrected_device_memory_errors(card: RecordedPpu, healthy: bool) -> None:
    (found,) = detector(record_hgml([card])).cards([])
    assert found.healthy is healthy


def test_a_library_without_the_ecc_calls_leaves_cards_healthy() -> None:
    missing = ["hgmlDeviceGetMemoryErrorCounter", "hgmlDeviceGetTotalEccErrors"]
    (card,) = detector(record_hgml(EIGHT_PPUS[:1], missing=missing)).cards([])
    assert card.healthy


def test_a_card_whose_health_query_fails_is_unhealthy_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ppus = [*EIGHT_PPUS[:6], ppu(6, errors={"hgmlDeviceGetMemoryErrorCounter": GPU_IS_LOST}), EIGHT_PPUS[7]]
    cards = backend(tmp_path, record_hgml(ppus)).detect()
    assert [c.index for c in cards if not c.healthy] == [6]
    assert cards[6].memory_mib == 98304, "the card is still described"
    assert (
        "HGML cannot read the health of thead card 6 (hgmlDeviceGetMemoryErrorCounter returned 15)"
        in caplog.text
    )


def test_a_node_without_libhgml_reports_pci_facts_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("PPU_HOME", str(tmp_path / "PPU_SDK"))
    paths = ("libhgml-not-here.so", *hgml.library_paths()[1:])
    monkeypatch.setattr(hgml, "library_paths", lambda: paths)
    sysfs = build_sysfs(tmp_path / "sys", PPU_PCI)
    with caplog.at_level(logging.WARNING):
        cards = HardwareBackend(["thead"], detectors=vendor_detectors(), sysfs=sysfs).detect()
    assert len(cards) == 8
    assert all(c.memory_mib == 0 and c.healthy and not c.sliceable for c in cards)
    tried = f"libhgml-not-here.so, {tmp_path}/PPU_SDK/lib/libhgml.so"
    assert f"T-Head HGML (libhgml.so) cannot be loaded from {tried}" in cards[0].detail_missing
    assert "thead cards reported from PCI facts only" in caplog.text


def test_library_paths_follow_ppu_home() -> None:
    assert hgml.library_paths({}) == ("libhgml.so", "/usr/local/PPU_SDK/lib/libhgml.so")
    assert hgml.library_paths({"PPU_HOME": "/opt/ppu"})[1] == "/opt/ppu/lib/libhgml.so"


def test_a_node_whose_driver_is_not_loaded_reports_pci_facts(tmp_path: Path) -> None:
    cards = backend(tmp_path, record_hgml(EIGHT_PPUS, init=DRIVER_NOT_LOADED)).detect()
    assert all(c.detail_missing and c.memory_mib == 0 for c in cards)
    assert "HGML cannot be initialised: hgmlInitWithFlags returned 9" in cards[0].detail_missing
    with pytest.raises(LibraryUnavailableError, match="hgmlInitWithFlags returned 9"):
        detector(record_hgml(EIGHT_PPUS, init=DRIVER_NOT_LOADED)).cards([])


def test_a_garbage_card_count_falls_back_to_pci_facts(tmp_path: Path) -> None:
    cards = backend(tmp_path, record_hgml(EIGHT_PPUS, count=0xFFFFFFFF)).detect()
    assert all(c.detail_missing and c.memory_mib == 0 for c in cards)
    assert "HGML counts 4294967295 cards, which cannot be right" in cards[0].detail_missing


def test_garbage_answers_are_cleaned_or_refused_never_a_crash(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    garbled = [
        ppu(0, name=b"\x07T-Head PPU\xff\x00trailing"),
        ppu(1, memory_bytes=1 << 63),
        ppu(2, cores=0xFFFFFFFF),
        ppu(3, errors={"hgmlDeviceGetHandleByIndex_v2": UNKNOWN}),
        ppu(4, uuid=b""),
    ]
    cards = backend(tmp_path, record_hgml(garbled), PPU_PCI[:5]).detect()
    assert [(c.product, c.memory_mib, c.cores, c.healthy, bool(c.detail_missing)) for c in cards] == [
        ("T-Head PPU", 98304, 128, True, False),
        ("T-Head PPU", 0, 128, True, False),
        ("T-Head PPU", 98304, 0, True, False),
        ("T-Head PPU", 98304, 128, True, False),
        ("PCI 1ded:8000", 0, 0, False, True),
    ]
    assert cards[3].uuid == "pci-0000-8d-00.0", "card 4 gives no UUID: named by its bus address"
    assert cards[4].pci_bus_id == "0000:6c:00.0", "card 3 cannot be identified: the bus reports it"
    assert "answered VRAM MiB=8796093022208 for thead card 1, which cannot be right" in caplog.text
    assert "answered cores=4294967295 for thead card 2" in caplog.text
    assert "HGML cannot read thead card 3: hgmlDeviceGetHandleByIndex_v2 returned 999" in caplog.text


def test_an_older_library_answers_memory_v1_and_lacks_the_hggc_calls() -> None:
    missing = [
        "hgmlDeviceGetMemoryInfo_v2",
        "hgmlSystemGetHggcDriverVersion",
        "hgmlDeviceGetHggcComputeCapability",
    ]
    (card,) = detector(record_hgml(EIGHT_PPUS[:1], missing=missing)).cards([])
    assert (card.memory_mib, card.runtime_version, card.compute_capability) == (98304, "", "")


def test_metrics_read_memory_use_busy_share_and_temperature() -> None:
    broken = ppu(1, errors={"hgmlDeviceGetMemoryErrorCounter": GPU_IS_LOST})
    readings = detector(record_hgml([EIGHT_PPUS[0], broken])).metrics()
    assert [
        (m.index, m.healthy, m.memory_total_mib, m.memory_used_mib, m.utilization_percent, m.temperature_c)
        for m in readings
    ] == [(0, True, 98304, 640, 47, 44), (1, False, 98304, 640, 47, 44)]


def test_a_library_that_can_read_no_card_sends_the_node_to_pci_facts(tmp_path: Path) -> None:
    broken = [ppu(i, errors={"hgmlDeviceGetPciInfo_v3": UNKNOWN}) for i in range(8)]
    cards = backend(tmp_path, record_hgml(broken)).detect()
    assert len(cards) == 8, "every card on the bus is still reported"
    assert all(c.detail_missing and c.healthy for c in cards)
    assert "HGML lists 8 cards but cannot read any" in cards[0].detail_missing
