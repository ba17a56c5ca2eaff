"""Iluvatar CoreX GPUs through IXML, on recorded library answers: what a node with Iluvatar cards reports."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from gpustack_operator.device_manager.detector import iluvatar, ixml
from gpustack_operator.device_manager.detector.hardware import HardwareBackend, vendor_detectors
from gpustack_operator.device_manager.detector.native import IndexedDetector
from gpustack_operator.device_manager.detector.vendor import LibraryUnavailableError
from gpustack_operator.device_manager.grouping import group_cards
from tests.unit.device_manager.recorded import SysfsDevice, build_sysfs
from tests.unit.device_manager.recorded_ixml import (
    BI_V100_PCI,
    GPU_IS_LOST,
    HEALTH_ECC_ERROR,
    NOT_SUPPORTED,
    SIX_BI_V100,
    UNKNOWN,
    RecordedGpu,
    bi_v100,
    opener,
    record_ixml,
)


def backend(tmp_path: Path, handle: object, devices: list[SysfsDevice] = BI_V100_PCI) -> HardwareBackend:
    detectors = vendor_detectors()
    detectors["iluvatar"] = iluvatar.detector(opener(handle))
    return HardwareBackend(["iluvatar"], detectors=detectors, sysfs=build_sysfs(tmp_path / "sys", devices))


def detector(handle: object) -> IndexedDetector:
    return iluvatar.detector(opener(handle))


def test_six_bi_v100s_report_vram_cores_versions_and_ids(tmp_path: Path) -> None:
    cards = backend(tmp_path, record_ixml(SIX_BI_V100)).detect()
    first = cards[0]
    assert len(cards) == 6
    assert all(not c.detail_missing and c.healthy for c in cards)
    assert (first.product, first.memory_mib, first.cores, first.compute_capability) == (
        "Iluvatar BI-V100",
        32768,
        4096,
        "7.0",
    )
    assert (first.driver_version, first.runtime_version) == ("4.1.0", "10.2")
    assert first.uuid == "GPU-4b3d7c1e-0a2f-5e9b-8c6d-2f1a3b4c5d00"
    assert [(c.index, c.minor, c.pci_bus_id) for c in cards[:2]] == [
        (0, 0, "0000:1b:00.0"),
        (1, 1, "0000:3e:00.0"),
    ]
    assert (first.numa_affinity, first.pci_id) == ("0", "1e3e:0001"), "topology from the bus"


def test_the_group_is_not_sliceable(tmp_path: Path) -> None:
    (group,) = group_cards(backend(tmp_path, record_ixml(SIX_BI_V100)).detect())
    assert (group["id"], group["memory"], group.get("cores")) == ("bi-v100", 32768, 4096)
    assert not group.get("acceleratorsFeature"), "the manufacturer table gives Iluvatar no logical slices"


@pytest.mark.parametrize(
    ("gpu", "healthy"),
    [
        pytest.param(bi_v100(0, health=HEALTH_ECC_ERROR), False, id="an ECC fault bit"),
        pytest.param(bi_v100(0, health=0x40 | 0x2), False, id="PCIe and memory-controller faults"),
        pytest.param(bi_v100(0, errors={"ixmlDeviceGetHealth": NOT_SUPPORTED}), True, id="no health query"),
    ],
)
def test_health_follows_ixmls_fault_bits(gpu: RecordedGpu, healthy: bool) -> None:
    (card,) = detector(record_ixml([gpu])).cards([])
    assert card.healthy is healthy


def test_a_card_whose_health_query_fails_is_unhealthy_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    gpus = [*SIX_BI_V100[:2], bi_v100(2, errors={"ixmlDeviceGetHealth": GPU_IS_LOST}), *SIX_BI_V100[3:]]
    cards = backend(tmp_path, record_ixml(gpus)).detect()
    assert [c.index for c in cards if not c.healthy] == [2]
    assert cards[2].memory_mib == 32768, "the card is still described"
    assert "IXML cannot read the health of iluvatar card 2 (ixmlDeviceGetHealth returned 15)" in caplog.text


def test_a_node_without_libixml_reports_pci_facts_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("COREX_HOME", str(tmp_path / "corex"))
    paths = ("libixml-not-here.so", *ixml.library_paths()[1:])
    monkeypatch.setattr(ixml, "library_paths", lambda: paths)
    sysfs = build_sysfs(tmp_path / "sys", BI_V100_PCI)
    with caplog.at_level(logging.WARNING):
        cards = HardwareBackend(["iluvatar"], detectors=vendor_detectors(), sysfs=sysfs).detect()
    assert len(cards) == 6
    assert all(c.memory_mib == 0 and c.healthy for c in cards)
    reason = cards[0].detail_missing
    assert (
        f"Iluvatar IXML (libixml.so) cannot be loaded from libixml-not-here.so, {tmp_path}/corex/lib64"
        in reason
    )
    assert "iluvatar cards reported from PCI facts only" in caplog.text


def test_library_paths_follow_corex_home() -> None:
    assert ixml.library_paths("/opt/corex")[1:] == (
        "/opt/corex/lib64/libixml.so",
        "/opt/corex/lib/libixml.so",
    )


def test_a_driver_that_refuses_initialisation_is_a_missing_library() -> None:
    with pytest.raises(
        LibraryUnavailableError, match="IXML cannot be initialised: nvmlInitWithFlags returned 9"
    ):
        detector(record_ixml(SIX_BI_V100, init=9)).cards([])


def test_a_garbage_card_count_falls_back_to_pci_facts(tmp_path: Path) -> None:
    cards = backend(tmp_path, record_ixml(SIX_BI_V100, count=100_000)).detect()
    assert all(c.detail_missing and c.memory_mib == 0 for c in cards)
    assert "IXML counts 100000 cards, which cannot be right" in cards[0].detail_missing


def test_garbage_answers_are_cleaned_or_refused_never_a_crash(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    garbled = [
        bi_v100(0, name=b"\x1bIluvatar BI-V100\xfe"),
        bi_v100(1, memory_bytes=1 << 63),
        bi_v100(2, cores=0xFFFFFFFF),
        bi_v100(3, errors={"nvmlDeviceGetHandleByIndex_v2": UNKNOWN}),
        bi_v100(4, uuid=b""),
    ]
    cards = backend(tmp_path, record_ixml(garbled), BI_V100_PCI[:5]).detect()
    assert [(c.product, c.memory_mib, c.cores, c.healthy, bool(c.detail_missing)) for c in cards] == [
        ("Iluvatar BI-V100", 32768, 4096, True, False),
        ("Iluvatar BI-V100", 0, 4096, True, False),
        ("Iluvatar BI-V100", 32768, 0, True, False),
        ("Iluvatar BI-V100", 32768, 4096, True, False),
        ("PCI 1e3e:0001", 0, 0, False, True),
    ]
    assert cards[3].uuid == "pci-0000-af-00.0", "card 4 gives no UUID: named by its bus address"
    assert "answered VRAM MiB=8796093022208 for iluvatar card 1, which cannot be right" in caplog.text
    assert "answered cores=4294967295 for iluvatar card 2" in caplog.text
    assert "IXML cannot read iluvatar card 3: nvmlDeviceGetHandleByIndex_v2 returned 999" in caplog.text


def test_an_older_library_answers_memory_v1_and_lacks_health_and_cuda_calls() -> None:
    missing = ["nvmlDeviceGetMemoryInfo_v2", "ixmlDeviceGetHealth", "nvmlSystemGetCudaDriverVersion"]
    (card,) = detector(record_ixml(SIX_BI_V100[:1], missing=missing)).cards([])
    assert (card.memory_mib, card.healthy, card.runtime_version) == (32768, True, "")


def test_metrics_read_memory_use_gpu_busy_and_temperature() -> None:
    broken = bi_v100(1, errors={"ixmlDeviceGetHealth": GPU_IS_LOST})
    readings = detector(record_ixml([SIX_BI_V100[0], broken])).metrics()
    assert [
        (m.index, m.healthy, m.memory_total_mib, m.memory_used_mib, m.utilization_percent, m.temperature_c)
        for m in readings
    ] == [(0, True, 32768, 116, 63, 52), (1, False, 32768, 116, 63, 52)]
