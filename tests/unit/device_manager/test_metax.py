"""MetaX GPUs through MXSML, on recorded library answers: what a node with MetaX cards reports."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from gpustack_operator.device_manager.detector import metax, mxsml
from gpustack_operator.device_manager.detector.hardware import HardwareBackend, vendor_detectors
from gpustack_operator.device_manager.detector.native import IndexedDetector
from gpustack_operator.device_manager.detector.vendor import LibraryUnavailableError
from gpustack_operator.device_manager.grouping import group_cards
from tests.unit.device_manager.recorded import SysfsDevice, build_sysfs
from tests.unit.device_manager.recorded_mxsml import (
    C500_PCI,
    EIGHT_C500,
    FAILURE,
    NOT_SUPPORT,
    RecordedGpu,
    c500,
    opener,
    record_mxsml,
)


def sysfs_with_drm(root: Path, devices: list[SysfsDevice]) -> Path:
    """The bus, each card with its DRM nodes (`card<i+1>`: card0 is the BMC's display)."""
    build_sysfs(root, devices)
    for i, device in enumerate(devices):
        (root / "bus/pci/devices" / device.address / "drm" / f"card{i + 1}").mkdir(parents=True)
        (root / "bus/pci/devices" / device.address / "drm" / f"renderD{129 + i}").mkdir()
    return root


def backend(tmp_path: Path, handle: object, devices: list[SysfsDevice] = C500_PCI) -> HardwareBackend:
    sysfs = sysfs_with_drm(tmp_path / "sys", devices)
    detectors = vendor_detectors()
    detectors["metax"] = metax.detector(opener(handle), sysfs)
    return HardwareBackend(["metax"], detectors=detectors, sysfs=sysfs)


def detector(handle: object, tmp_path: Path) -> IndexedDetector:
    return metax.detector(opener(handle), tmp_path)


def test_eight_c500s_report_vram_versions_ids_and_drm_minors(tmp_path: Path) -> None:
    cards = backend(tmp_path, record_mxsml(EIGHT_C500)).detect()
    first = cards[0]
    assert len(cards) == 8
    assert all(not c.detail_missing and c.healthy and c.sliceable for c in cards)
    assert (first.product, first.memory_mib, first.cores) == ("MXC500", 65536, 0)
    assert (first.driver_version, first.runtime_version) == ("2.14.6", "2.32")
    assert first.uuid == "GPU-6b1e0c3a-52d4-4f7e-9a1c-004e7d2b3f61"
    assert [(c.index, c.minor, c.pci_bus_id) for c in cards[:2]] == [
        (0, 1, "0000:0f:00.0"),
        (1, 2, "0000:34:00.0"),
    ]
    assert (first.numa_affinity, first.pci_id) == ("0", "9999:4081"), "topology from the bus"


def test_the_group_is_sliceable_with_16_partitioned_slices(tmp_path: Path) -> None:
    (group,) = group_cards(backend(tmp_path, record_mxsml(EIGHT_C500)).detect())
    assert (group["id"], group["memory"]) == ("mxc500", 65536)
    assert group["accelerators"][0]["physicalIndexes"] == [1], "the DRM minor the allocator mounts"
    assert group.get("acceleratorsFeature") == {
        "logicalSliced": {"maxSize": 16, "coresPercentageOvercommit": False}
    }


@pytest.mark.parametrize(
    ("gpu", "healthy"),
    [
        pytest.param(c500(0, dram_ue=1), False, id="uncorrectable VRAM ECC errors"),
        pytest.param(c500(0, errors={"mxSmlGetTotalEccErrors": NOT_SUPPORT}), True, id="ECC not offered"),
    ],
)
def test_health_follows_uncorrectable_ecc(gpu: RecordedGpu, healthy: bool, tmp_path: Path) -> None:
    (card,) = detector(record_mxsml([gpu]), tmp_path).cards([])
    assert card.healthy is healthy


def test_a_card_whose_health_query_fails_is_unhealthy_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    gpus = [*EIGHT_C500[:3], c500(3, errors={"mxSmlGetTotalEccErrors": FAILURE}), *EIGHT_C500[4:]]
    cards = backend(tmp_path, record_mxsml(gpus)).detect()
    assert [c.index for c in cards if not c.healthy] == [3]
    assert cards[3].memory_mib == 65536, "the card is still described"
    assert "MXSML cannot read the health of metax card 3 (mxSmlGetTotalEccErrors returned 1)" in caplog.text
    (group,) = group_cards(cards)
    assert [a["status"]["unhealthy"] for a in group["accelerators"]].count(True) == 1


def test_a_node_without_libmxsml_reports_pci_facts_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(mxsml, "LIBRARY_PATHS", ("libmxsml-not-here.so", str(tmp_path / "libmxsml.so")))
    sysfs = build_sysfs(tmp_path / "sys", C500_PCI)
    with caplog.at_level(logging.WARNING):
        cards = HardwareBackend(["metax"], detectors=vendor_detectors(), sysfs=sysfs).detect()
    assert len(cards) == 8
    assert all(c.memory_mib == 0 and c.healthy and not c.sliceable for c in cards)
    assert "MetaX MXSML (libmxsml.so) cannot be loaded from libmxsml-not-here.so" in cards[0].detail_missing
    assert "metax cards reported from PCI facts only" in caplog.text


def test_a_driver_that_refuses_initialisation_is_a_missing_library(tmp_path: Path) -> None:
    with pytest.raises(LibraryUnavailableError, match="MXSML cannot be initialised: mxSmlInit returned 1"):
        detector(record_mxsml(EIGHT_C500, init=FAILURE), tmp_path).cards([])


def test_a_garbage_card_count_falls_back_to_pci_facts(tmp_path: Path) -> None:
    cards = backend(tmp_path, record_mxsml(EIGHT_C500, count=0xFFFFFFFF)).detect()
    assert len(cards) == 8
    assert all(c.detail_missing and c.memory_mib == 0 for c in cards)
    assert "MXSML counts 4294967295 cards, which cannot be right" in cards[0].detail_missing


def test_garbage_answers_are_cleaned_or_refused_never_a_crash(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    garbled = [
        c500(0, name=b"\xffMXC500\x07"),
        c500(1, vram_kib=1 << 60),
        c500(2, vram_kib=-1024),
        c500(3, errors={"mxSmlGetDeviceInfo": FAILURE}),
        c500(4, uuid=b""),
    ]
    cards = backend(tmp_path, record_mxsml(garbled), C500_PCI[:5]).detect()
    assert [(c.product, c.memory_mib, c.healthy, bool(c.detail_missing)) for c in cards] == [
        ("MXC500", 65536, True, False),
        ("MXC500", 0, True, False),
        ("MXC500", 0, True, False),
        ("MXC500", 65536, True, False),
        ("PCI 9999:4081", 0, False, True),
    ]
    assert cards[3].uuid == "pci-0000-87-00.0", "card 4 gives no UUID: named by its bus address"
    assert cards[4].pci_bus_id == "0000:5a:00.0", "card 3, unreadable, is reported from the bus"
    assert "answered VRAM MiB=1125899906842624 for metax card 1, which cannot be right" in caplog.text
    assert "answered VRAM MiB=-1 for metax card 2" in caplog.text
    assert "MXSML cannot read metax card 3: mxSmlGetDeviceInfo returned 1" in caplog.text


def test_an_older_library_without_maca_or_ecc_calls_still_describes_the_card(tmp_path: Path) -> None:
    handle = record_mxsml(EIGHT_C500[:1], missing=["mxSmlGetMacaVersion", "mxSmlGetTotalEccErrors"])
    (card,) = detector(handle, tmp_path).cards([])
    assert (card.memory_mib, card.runtime_version, card.healthy) == (65536, "", True)
    assert card.minor == -1, "no DRM node visible in sysfs"


def test_metrics_read_vram_use_xcore_busy_and_hotspot_temperature(tmp_path: Path) -> None:
    broken = c500(1, errors={"mxSmlGetTotalEccErrors": FAILURE})
    readings = detector(record_mxsml([EIGHT_C500[0], broken]), tmp_path).metrics()
    assert [
        (m.index, m.healthy, m.memory_total_mib, m.memory_used_mib, m.utilization_percent, m.temperature_c)
        for m in readings
    ] == [
        (0, True, 65536, 858, 42, 46),
        (1, False, 65536, 858, 42, 46),
    ]
