"""Ascend NPUs through DCMI, on recorded library answers: what a node with Ascend cards reports."""

from __future__ import annotations

import logging
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from gpustack_operator.device_manager.detector import ascend, dcmi
from gpustack_operator.device_manager.detector.ascend import AscendDetector
from gpustack_operator.device_manager.detector.hardware import HardwareBackend, vendor_detectors
from gpustack_operator.device_manager.detector.vendor import LibraryUnavailableError
from gpustack_operator.device_manager.grouping import group_cards
from tests.unit.device_manager.recorded import SysfsDevice, build_sysfs
from tests.unit.device_manager.recorded_dcmi import (
    A2_PCI,
    ATLAS_800T_A2,
    DUO_310P3,
    INNER_ERROR,
    NOT_SUPPORT,
    RecordedNpu,
    npu_910b,
    opener,
    record_dcmi,
    toolkit,
)


def detector(handle: object, root: Path) -> AscendDetector:
    return AscendDetector(opener(handle), root=root, environ={})


def backend(tmp_path: Path, handle: object, devices: list[SysfsDevice] = A2_PCI) -> HardwareBackend:
    detectors = vendor_detectors()
    detectors["ascend"] = detector(handle, toolkit(tmp_path / "host"))
    return HardwareBackend(["ascend"], detectors=detectors, sysfs=build_sysfs(tmp_path / "sys", devices))


def test_an_atlas_800t_a2_reports_memory_cores_versions_and_ids(tmp_path: Path) -> None:
    cards = backend(tmp_path, record_dcmi(ATLAS_800T_A2)).detect()
    first = cards[0]
    assert len(cards) == 8
    assert all(not c.detail_missing and c.healthy and c.sliceable for c in cards)
    assert (first.product, first.memory_mib, first.cores, first.family) == ("Ascend910B2", 65536, 24, "910B")
    assert (first.driver_version, first.runtime_version) == ("24.1.rc3", "8.0")
    assert first.uuid == "8C1A2B3D-4E5F6071-12345678-9ABCDEF0-00000000"
    assert [(c.index, c.minor, c.pci_bus_id) for c in cards[:2]] == [
        (0, 0, "0000:c1:00.0"),
        (1, 1, "0000:01:00.0"),
    ]
    assert (first.numa_affinity, first.pci_root, first.pci_id) == ("0", "0000:c0", "19e5:d802"), (
        "topology from the bus"
    )


def test_the_group_is_sliceable_with_the_vendors_63_overcommitted_slices(tmp_path: Path) -> None:
    (group,) = group_cards(backend(tmp_path, record_dcmi(ATLAS_800T_A2)).detect())
    assert (group["id"], group["memory"], group.get("cores")) == ("910b2", 65536, 24)
    assert group.get("acceleratorsFeature") == {
        "logicalSliced": {"maxSize": 63, "coresPercentageOvercommit": True}
    }


def test_a_310p_duo_reads_ddr_memory_and_skips_the_cards_mcu(tmp_path: Path) -> None:
    cards = detector(record_dcmi(DUO_310P3), tmp_path).cards([])
    assert [(c.product, c.memory_mib, c.cores, c.family, c.index) for c in cards] == [
        ("Ascend310P3", 22140, 8, "310P", 0),
        ("Ascend310P3", 22140, 8, "310P", 1),
    ]
    assert cards[0].runtime_version == "", "no CANN toolkit on this host"


@pytest.mark.parametrize(
    ("npu", "healthy"),
    [
        pytest.param(npu_910b(0, health=1), True, id="a minor alarm leaves the NPU serving, as npu-smi says"),
        pytest.param(npu_910b(0, health=2), False, id="a major alarm makes it unhealthy"),
        pytest.param(npu_910b(0, health=3), False, id="a critical alarm makes it unhealthy"),
        pytest.param(npu_910b(0, double_bit_errors=2), False, id="uncorrectable HBM ECC errors"),
        pytest.param(npu_910b(0, double_bit_errors=2, ecc_enabled=0), True, id="ECC off counts nothing"),
        pytest.param(
            npu_910b(0, errors={"dcmi_get_device_health": NOT_SUPPORT}),
            True,
            id="a health query the driver does not offer falls back to ECC",
        ),
    ],
)
def test_health_follows_dcmis_alarm_level_and_ecc(npu: RecordedNpu, healthy: bool, tmp_path: Path) -> None:
    (card,) = detector(record_dcmi([npu]), tmp_path).cards([])
    assert card.healthy is healthy


def test_a_card_whose_health_query_fails_is_unhealthy_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken = npu_910b(3, errors={"dcmi_get_device_health": INNER_ERROR})
    cards = backend(tmp_path, record_dcmi([*ATLAS_800T_A2[:3], broken, *ATLAS_800T_A2[4:]])).detect()
    assert [c.index for c in cards if not c.healthy] == [3]
    assert cards[3].memory_mib == 65536, "the card is still described"
    assert "cannot read the health of ascend NPU card=3 device=0" in caplog.text
    (group,) = group_cards(cards)
    assert [a["status"]["unhealthy"] for a in group["accelerators"]].count(True) == 1


def test_a_node_without_libdcmi_reports_pci_facts_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(dcmi, "LIBRARY_PATHS", ("libdcmi-not-here.so", str(tmp_path / "libdcmi.so")))
    detectors = vendor_detectors()
    sysfs = build_sysfs(tmp_path / "sys", A2_PCI)
    with caplog.at_level(logging.WARNING):
        cards = HardwareBackend(["ascend"], detectors=detectors, sysfs=sysfs).detect()
    assert len(cards) == 8
    assert all(c.memory_mib == 0 and c.healthy for c in cards)
    assert "Ascend DCMI (libdcmi.so) cannot be loaded from libdcmi-not-here.so" in cards[0].detail_missing
    assert "ascend cards reported from PCI facts only" in caplog.text


def test_a_driver_that_refuses_initialisation_is_a_missing_library(tmp_path: Path) -> None:
    with pytest.raises(LibraryUnavailableError, match="cannot be initialised: dcmi_init returned -8005"):
        detector(record_dcmi(ATLAS_800T_A2, init=INNER_ERROR), tmp_path).cards([])


def test_a_garbage_card_count_falls_back_to_pci_facts(tmp_path: Path) -> None:
    cards = backend(tmp_path, record_dcmi(ATLAS_800T_A2, card_count=100_000)).detect()
    assert len(cards) == 8
    assert all(c.detail_missing and c.memory_mib == 0 for c in cards)
    assert "dcmi_get_card_list (count 100000)" in cards[0].detail_missing


def test_garbage_answers_are_cleaned_or_refused_never_a_crash(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    garbled = [
        npu_910b(0, chip=b"\xff910B3\x07", aicores=20),
        npu_910b(1, hbm_mib=1 << 60),
        npu_910b(2, health=0xFFFFFFFF),
        npu_910b(3, errors={"dcmi_get_device_logic_id": INNER_ERROR}),
    ]
    cards = backend(tmp_path, record_dcmi(garbled), A2_PCI[:4]).detect()
    assert [(c.product, c.memory_mib, c.healthy, bool(c.detail_missing)) for c in cards] == [
        ("Ascend910B3", 65536, True, False),
        ("Ascend910B2", 0, True, False),
        ("Ascend910B2", 65536, False, False),
        ("PCI 19e5:d802", 0, False, True),
    ]
    assert (
        "memory MiB=1152921504606846976 for ascend NPU card=1 device=0, which cannot be right" in caplog.text
    )
    assert "answered health 4294967295 for ascend NPU card=2 device=0" in caplog.text
    assert "cannot read ascend NPU card=3 device=0: dcmi_get_device_logic_id returned -8005" in caplog.text


def test_an_older_library_without_the_die_v2_call_still_names_the_chip(tmp_path: Path) -> None:
    handle = record_dcmi(ATLAS_800T_A2[:1], missing=["dcmi_get_device_die_v2", "dcmi_get_driver_version"])
    (driver_file := tmp_path / "usr/local/Ascend/driver/version.info").parent.mkdir(parents=True)
    driver_file.write_text("Version=23.0.3\n")
    (card,) = detector(handle, tmp_path).cards([])
    assert card.uuid == "pci-0000-c1-00.0", "no die: named by its bus address, as PCI facts name it"
    assert card.driver_version == "23.0.3", "the driver's version.info when DCMI cannot say"


def test_metrics_read_memory_use_aicore_busy_and_temperature(tmp_path: Path) -> None:
    broken = replace(ATLAS_800T_A2[1], errors={"dcmi_get_device_health": INNER_ERROR})
    readings = detector(record_dcmi([ATLAS_800T_A2[0], broken]), tmp_path).metrics()
    assert [
        (m.index, m.healthy, m.memory_total_mib, m.memory_used_mib, m.utilization_percent) for m in readings
    ] == [
        (0, True, 65536, 3383, 37),
        (1, False, 65536, 3383, 37),
    ]
    assert readings[0].temperature_c == 41


def test_cann_version_follows_ascend_toolkit_home(tmp_path: Path) -> None:
    (tmp_path / "cann").mkdir()
    (tmp_path / "cann/version.info").write_text("Version=8.1.RC1\n")
    assert (
        ascend.cann_version(tmp_path / "nothing", {"ASCEND_TOOLKIT_HOME": str(tmp_path / "cann")})
        == "8.1.RC1"
    )


@pytest.mark.parametrize(
    ("chip", "family"),
    [
        ("910B3", "910B"),
        ("310P3", "310P"),
        ("910", "910"),
        ("910_9392", "910_93"),
        ("Ascend950PR", "950"),
        ("", ""),
    ],
)
def test_family_is_the_chip_series_vcann_rt_is_built_for(chip: str, family: str) -> None:
    assert ascend.family_of(chip) == family


def test_a_node_loads_no_vendor_binding_until_its_cards_are_found() -> None:
    code = (
        "import sys; from gpustack_operator.device_manager.detector import hardware; "
        "hardware.vendor_detectors(); "
        "print('ctypes' in sys.modules, 'gpustack_operator.device_manager.detector.dcmi' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
