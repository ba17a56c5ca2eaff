"""Hygon DCUs through the DTK's ROCm SMI, on recorded library answers: what a Hygon node reports."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from gpustack_operator.device_manager.detector import hygon, rsmi
from gpustack_operator.device_manager.detector.hardware import HardwareBackend, vendor_detectors
from gpustack_operator.device_manager.detector.hygon import HygonDetector
from gpustack_operator.device_manager.detector.vendor import LibraryUnavailableError
from gpustack_operator.device_manager.grouping import group_cards
from tests.unit.device_manager.recorded_rsmi import (
    FILE_ERROR,
    K100_NODE,
    NOT_SUPPORTED,
    RecordedDcu,
    dcu_sysfs,
    k100,
    opener,
    record_rsmi,
)


def host(root: Path, dtk: str = "24.04.3", module: str = "6.3.8-V1.6.0") -> Path:
    """A host root with the DTK's .info/version where the default install puts it."""
    (root / "opt/dtk/.info").mkdir(parents=True)
    (root / "opt/dtk/.info/version").write_text(f"{dtk}\n")
    return root


def detector(handle: object, tmp_path: Path, dcus: list[RecordedDcu] = K100_NODE) -> HygonDetector:
    sysfs = dcu_sysfs(tmp_path / "sys", dcus)
    (sysfs / "module/hydcu").mkdir(parents=True)
    (sysfs / "module/hydcu/version").write_text("6.3.8-V1.6.0\n")
    return HygonDetector(opener(handle), sysfs=sysfs, root=host(tmp_path / "host"), environ={})


def backend(tmp_path: Path, handle: object, dcus: list[RecordedDcu] = K100_NODE) -> HardwareBackend:
    detectors = vendor_detectors()
    detectors["hygon"] = found = detector(handle, tmp_path, dcus)
    return HardwareBackend(["hygon"], detectors=detectors, sysfs=found._sysfs)


def test_a_k100_node_reports_memory_cores_versions_and_ids(tmp_path: Path) -> None:
    cards = backend(tmp_path, record_rsmi(K100_NODE)).detect()
    first = cards[0]
    assert len(cards) == 4
    assert all(not c.detail_missing and c.healthy and c.sliceable for c in cards)
    assert (first.product, first.memory_mib, first.cores) == ("K100_AI", 65536, 120)
    assert (first.driver_version, first.runtime_version) == ("6.3.8-V1.6.0", "24.04")
    assert first.uuid == "GPU-5c3a1b2d00000000"
    assert [(c.index, c.minor, c.pci_bus_id) for c in cards[:2]] == [
        (0, 1, "0000:0a:00.0"),
        (1, 2, "0000:2a:00.0"),
    ]
    assert (first.numa_affinity, first.pci_root, first.pci_id) == ("0", "0000:09", "1d94:6320")


def test_the_group_is_sliceable_with_the_vendors_4_slices(tmp_path: Path) -> None:
    (group,) = group_cards(backend(tmp_path, record_rsmi(K100_NODE)).detect())
    assert (group["id"], group["memory"], group.get("cores")) == ("k100_ai", 65536, 120)
    assert group.get("acceleratorsFeature") == {
        "logicalSliced": {"maxSize": 4, "coresPercentageOvercommit": False}
    }


@pytest.mark.parametrize(
    ("dcu", "healthy"),
    [
        pytest.param(k100(0, uncorrectable=1), False, id="uncorrectable VRAM ECC errors"),
        pytest.param(
            k100(0, errors={"rsmi_dev_ecc_count_get": NOT_SUPPORTED}), True, id="a card without ECC counters"
        ),
    ],
)
def test_health_follows_uncorrectable_ecc(dcu: RecordedDcu, healthy: bool, tmp_path: Path) -> None:
    (card,) = detector(record_rsmi([dcu]), tmp_path, [dcu]).cards([])
    assert card.healthy is healthy


def test_a_card_whose_health_query_fails_is_unhealthy_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken = k100(1, errors={"rsmi_dev_ecc_count_get": FILE_ERROR})
    cards = backend(tmp_path, record_rsmi([K100_NODE[0], broken, *K100_NODE[2:]])).detect()
    assert [c.index for c in cards if not c.healthy] == [1]
    assert cards[1].memory_mib == 65536, "the card is still described"
    assert "cannot read the health of hygon DCU index 1 (rsmi_dev_ecc_count_get returned 3)" in caplog.text
    (group,) = group_cards(cards)
    assert [a["status"]["unhealthy"] for a in group["accelerators"]].count(True) == 1


def test_a_node_without_rocm_smi_reports_pci_facts_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(rsmi, "library_paths", lambda: ("librocm_smi64-not-here.so",))
    sysfs = dcu_sysfs(tmp_path / "sys", K100_NODE)
    with caplog.at_level(logging.WARNING):
        cards = HardwareBackend(["hygon"], detectors=vendor_detectors(), sysfs=sysfs).detect()
    assert len(cards) == 4
    assert all(c.memory_mib == 0 and c.healthy and not c.sliceable for c in cards)
    assert "ROCm SMI of the Hygon DTK (librocm_smi64.so) cannot be loaded from librocm_smi64-not-here" in (
        cards[0].detail_missing
    )
    assert "hygon cards reported from PCI facts only" in caplog.text


def test_the_library_is_searched_where_the_dtk_and_hyhal_install_it() -> None:
    assert rsmi.library_paths({"ROCM_PATH": "/opt/dtk-24.04.3"}) == (
        "librocm_smi64.so",
        "/opt/dtk-24.04.3/lib/librocm_smi64.so",
        "/opt/dtk-24.04.3/rocm_smi/lib/librocm_smi64.so",
        "/opt/hyhal/lib/librocm_smi64.so",
        "/opt/dtk/.hyhal/rocm_smi/lib/librocm_smi64.so",
    )
    assert rsmi.library_paths({"ROCM_SMI_LIB_PATH": "/x"})[1] == "/x/librocm_smi64.so"


def test_a_driver_that_refuses_initialisation_is_a_missing_library(tmp_path: Path) -> None:
    with pytest.raises(LibraryUnavailableError, match="cannot be initialised: rsmi_init returned 8"):
        detector(record_rsmi(K100_NODE, init=8), tmp_path).cards([])


def test_a_garbage_card_count_falls_back_to_pci_facts(tmp_path: Path) -> None:
    cards = backend(tmp_path, record_rsmi(K100_NODE, count=100_000)).detect()
    assert len(cards) == 4
    assert all(c.detail_missing and c.memory_mib == 0 for c in cards)
    assert "rsmi_num_monitor_devices (count 100000)" in cards[0].detail_missing


def test_garbage_answers_are_cleaned_or_refused_never_a_crash(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    garbled = [
        k100(0, name=b"\xffK100_AI\x07", unique_id=0),
        k100(1, vram_bytes=1 << 63),
        k100(2, simds=1 << 40),
        k100(3, errors={"rsmi_dev_pci_id_get": FILE_ERROR}),
    ]
    cards = backend(tmp_path, record_rsmi(garbled), garbled).detect()
    assert [(c.product, c.memory_mib, c.cores, c.uuid[:4], bool(c.detail_missing)) for c in cards] == [
        ("K100_AI", 65536, 120, "pci-", False),
        ("K100_AI", 0, 120, "GPU-", False),
        ("K100_AI", 65536, 0, "GPU-", False),
        ("PCI 1d94:6320", 0, 0, "pci-", True),
    ]
    assert "memory MiB=8796093022208 for hygon DCU index 1, which cannot be right" in caplog.text
    assert "compute units=274877906944 for hygon DCU index 2" in caplog.text
    assert "cannot read hygon DCU index 3: rsmi_dev_pci_id_get returned 3" in caplog.text


def test_without_the_driver_modules_version_rocm_smi_names_the_driver(tmp_path: Path) -> None:
    sysfs = dcu_sysfs(tmp_path / "sys", K100_NODE[:1])
    found = HygonDetector(
        opener(record_rsmi(K100_NODE[:1], driver=b"5.16.29")), sysfs=sysfs, root=tmp_path, environ={}
    )
    (card,) = found.cards([])
    assert (card.driver_version, card.runtime_version) == ("5.16.29", ""), "no DTK on this host"


def test_metrics_read_memory_use_busy_share_and_temperature(tmp_path: Path) -> None:
    broken = k100(1, errors={"rsmi_dev_ecc_count_get": FILE_ERROR})
    readings = detector(record_rsmi([K100_NODE[0], broken]), tmp_path).metrics()
    assert [
        (m.index, m.healthy, m.memory_total_mib, m.memory_used_mib, m.utilization_percent, m.temperature_c)
        for m in readings
    ] == [(0, True, 65536, 1536, 63, 52), (1, False, 65536, 1536, 63, 52)]


def test_dtk_version_follows_rocm_path(tmp_path: Path) -> None:
    (tmp_path / "dtk/.info").mkdir(parents=True)
    (tmp_path / "dtk/.info/version").write_text("25.04\n")
    assert hygon.dtk_version(tmp_path / "nothing", {"ROCM_PATH": str(tmp_path / "dtk")}) == "25.04"


def test_compute_units_need_the_cards_kfd_node(tmp_path: Path) -> None:
    sysfs = dcu_sysfs(tmp_path, K100_NODE[:1])
    assert hygon.kfd_compute_units("0000:0a:00.0", sysfs) == 120
    assert hygon.kfd_compute_units("0000:0b:00.0", sysfs) == 0
    assert hygon.kfd_compute_units("0000:0a:00.0", tmp_path / "empty") == 0


def test_a_node_loads_no_vendor_binding_until_its_cards_are_found() -> None:
    code = (
        "import sys; from gpustack_operator.device_manager.detector import hardware; "
        "hardware.vendor_detectors(); "
        "print('ctypes' in sys.modules, 'gpustack_operator.device_manager.detector.rsmi' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
