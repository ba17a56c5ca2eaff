"""Cambricon MLUs through CNDev, on recorded library answers: what a node with Cambricon cards reports."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from gpustack_operator.device_manager.detector import cambricon, cndev
from gpustack_operator.device_manager.detector.cambricon import CambriconDetector
from gpustack_operator.device_manager.detector.hardware import HardwareBackend, vendor_detectors
from gpustack_operator.device_manager.detector.vendor import LibraryUnavailableError
from gpustack_operator.device_manager.grouping import group_cards
from tests.unit.device_manager.recorded import SysfsDevice, build_sysfs
from tests.unit.device_manager.recorded_cndev import (
    MLU370_NODE,
    MLU370_PCI,
    NOT_SUPPORTED,
    UNKNOWN,
    RecordedMlu,
    mlu370,
    opener,
    record_cndev,
)


def neuware(root: Path, version: str = "3.15.2") -> Path:
    """A host root with CNToolkit's version.txt where the default install puts it."""
    (root / "usr/local/neuware").mkdir(parents=True)
    (root / "usr/local/neuware/version.txt").write_text(f"Neuware Version {version}\n")
    return root


def detector(handle: object, root: Path) -> CambriconDetector:
    return CambriconDetector(opener(handle), root=root, environ={})


def backend(tmp_path: Path, handle: object, devices: list[SysfsDevice] = MLU370_PCI) -> HardwareBackend:
    detectors = vendor_detectors()
    detectors["cambricon"] = detector(handle, neuware(tmp_path / "host"))
    return HardwareBackend(["cambricon"], detectors=detectors, sysfs=build_sysfs(tmp_path / "sys", devices))


def test_an_mlu370_node_reports_memory_cores_versions_and_ids(tmp_path: Path) -> None:
    cards = backend(tmp_path, record_cndev(MLU370_NODE)).detect()
    first = cards[0]
    assert len(cards) == 4
    assert all(not c.detail_missing and c.healthy and c.sliceable for c in cards)
    assert (first.product, first.memory_mib, first.cores) == ("MLU370-X4", 24576, 16)
    assert (first.driver_version, first.runtime_version) == ("5.10.22", "3.15")
    assert first.uuid == "MLU-5a1b2c3d-0000-4e5f-8a9b-0c1d2e3f4a5b"
    assert [(c.index, c.minor, c.pci_bus_id) for c in cards[:2]] == [
        (0, -1, "0000:1a:00.0"),
        (1, -1, "0000:1b:00.0"),
    ]
    assert (first.numa_affinity, first.pci_root, first.pci_id) == ("0", "0000:19", "cabc:0370")


def test_the_group_is_sliceable_with_the_vendors_16_partitioned_slices(tmp_path: Path) -> None:
    (group,) = group_cards(backend(tmp_path, record_cndev(MLU370_NODE)).detect())
    assert (group["id"], group["memory"], group.get("cores")) == ("mlu370-x4", 24576, 16)
    assert group.get("acceleratorsFeature") == {
        "logicalSliced": {"maxSize": 16, "coresPercentageOvercommit": False}
    }


@pytest.mark.parametrize(
    ("mlu", "healthy"),
    [
        pytest.param(mlu370(0, health=0), False, id="the health flag reads in problem"),
        pytest.param(
            mlu370(0, uncorrected_ecc=3), True, id="ECC counts only when the health query is absent"
        ),
        pytest.param(
            mlu370(0, uncorrected_ecc=3, errors={"cndevGetCardHealthState": NOT_SUPPORTED}),
            False,
            id="a driver without the health query falls back to uncorrected ECC",
        ),
        pytest.param(
            mlu370(0, errors={"cndevGetCardHealthState": NOT_SUPPORTED, "cndevGetECCInfo": NOT_SUPPORTED}),
            True,
            id="nothing readable says it is broken",
        ),
    ],
)
def test_health_follows_cndevs_health_flag(mlu: RecordedMlu, healthy: bool, tmp_path: Path) -> None:
    (card,) = detector(record_cndev([mlu]), tmp_path).cards([])
    assert card.healthy is healthy


def test_a_card_whose_health_query_fails_is_unhealthy_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken = mlu370(2, errors={"cndevGetCardHealthState": UNKNOWN})
    cards = backend(tmp_path, record_cndev([*MLU370_NODE[:2], broken, MLU370_NODE[3]])).detect()
    assert [c.index for c in cards if not c.healthy] == [2]
    assert cards[2].memory_mib == 24576, "the card is still described"
    assert (
        "cannot read the health of cambricon MLU index 2 (cndevGetCardHealthState returned 7)" in caplog.text
    )
    (group,) = group_cards(cards)
    assert [a["status"]["unhealthy"] for a in group["accelerators"]].count(True) == 1


def test_a_node_without_libcndev_reports_pci_facts_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("NEUWARE_HOME", str(tmp_path / "neuware"))
    monkeypatch.setattr(cndev, "library_paths", lambda: ("libcndev-not-here.so",))
    sysfs = build_sysfs(tmp_path / "sys", MLU370_PCI)
    with caplog.at_level(logging.WARNING):
        cards = HardwareBackend(["cambricon"], detectors=vendor_detectors(), sysfs=sysfs).detect()
    assert len(cards) == 4
    assert all(c.memory_mib == 0 and c.healthy and not c.sliceable for c in cards)
    assert (
        "Cambricon CNDev (libcndev.so) cannot be loaded from libcndev-not-here.so" in cards[0].detail_missing
    )
    assert "cambricon cards reported from PCI facts only" in caplog.text


def test_the_library_is_searched_in_the_neuware_home() -> None:
    assert cndev.library_paths({"NEUWARE_HOME": "/opt/neuware"}) == (
        "libcndev.so",
        "/opt/neuware/lib64/libcndev.so",
        "/opt/neuware/lib/libcndev.so",
    )


def test_a_driver_that_refuses_initialisation_is_a_missing_library(tmp_path: Path) -> None:
    with pytest.raises(LibraryUnavailableError, match="cannot be initialised: cndevInit returned 1"):
        detector(record_cndev(MLU370_NODE, init=1), tmp_path).cards([])


def test_a_garbage_card_count_falls_back_to_pci_facts(tmp_path: Path) -> None:
    cards = backend(tmp_path, record_cndev(MLU370_NODE, count=100_000)).detect()
    assert len(cards) == 4
    assert all(c.detail_missing and c.memory_mib == 0 for c in cards)
    assert "cndevGetDeviceCount (count 100000)" in cards[0].detail_missing


def test_garbage_answers_are_cleaned_or_refused_never_a_crash(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    garbled = [
        mlu370(0, name=b"\xffMLU370-X8\x07", cores=-5),
        mlu370(1, memory_mib=1 << 60),
        mlu370(2, health=7),
        mlu370(3, errors={"cndevGetPCIeInfoV2": UNKNOWN}),
    ]
    cards = backend(tmp_path, record_cndev(garbled), MLU370_PCI).detect()
    assert [(c.product, c.memory_mib, c.cores, c.healthy, bool(c.detail_missing)) for c in cards] == [
        ("MLU370-X8", 24576, 0, True, False),
        ("MLU370-X4", 0, 16, True, False),
        ("MLU370-X4", 24576, 16, False, False),
        ("PCI cabc:0370", 0, 0, False, True),
    ]
    assert "MLU cores=-5 for cambricon MLU index 0, which cannot be right" in caplog.text
    assert "memory MiB=1152921504606846976 for cambricon MLU index 1" in caplog.text
    assert "answered health 7 for cambricon MLU index 2, not a state it defines" in caplog.text
    assert "cannot read cambricon MLU index 3: cndevGetPCIeInfoV2 returned 7" in caplog.text


def test_an_older_driver_speaks_api_version_5_and_has_no_handles_or_name_string(tmp_path: Path) -> None:
    old = [mlu370(0, uuid=b"", name_id=26)]
    handle = record_cndev(
        old, api_version=5, missing=["cndevGetDeviceHandleByIndex", "cndevGetCardNameStringByDevId"]
    )
    (card,) = detector(handle, tmp_path).cards([])
    assert (card.product, card.driver_version, card.cores, card.memory_mib) == (
        "MLU590",
        "5.10.22",
        16,
        24576,
    )
    assert card.uuid == "pci-0000-1a-00.0", "no UUID: named by its bus address, as PCI facts name it"


def test_a_driver_none_of_whose_cards_can_be_read_falls_back_to_pci_facts(tmp_path: Path) -> None:
    cards = backend(tmp_path, record_cndev(MLU370_NODE, missing=["cndevGetPCIeInfoV2"])).detect()
    assert [(c.memory_mib, c.healthy, c.sliceable) for c in cards] == [(0, True, False)] * 4
    assert cards[0].detail_missing == (
        "Cambricon CNDev lists 4 MLUs but cannot read any "
        "(last: cndevGetPCIeInfoV2 not exported by this library version)"
    )


def test_a_name_string_the_driver_cannot_give_falls_back_to_the_name_enum(tmp_path: Path) -> None:
    nameless = mlu370(0, errors={"cndevGetCardNameStringByDevId": UNKNOWN})
    (card,) = detector(record_cndev([nameless]), tmp_path).cards([])
    assert card.product == "MLU370"


def test_metrics_read_memory_use_core_busy_and_temperature(tmp_path: Path) -> None:
    broken = mlu370(1, errors={"cndevGetCardHealthState": UNKNOWN})
    readings = detector(record_cndev([MLU370_NODE[0], broken]), tmp_path).metrics()
    assert [
        (m.index, m.healthy, m.memory_total_mib, m.memory_used_mib, m.utilization_percent, m.temperature_c)
        for m in readings
    ] == [(0, True, 24576, 1021, 42, 47), (1, False, 24576, 1021, 42, 47)]


def test_neuware_version_follows_neuware_home(tmp_path: Path) -> None:
    (tmp_path / "nw").mkdir()
    (tmp_path / "nw/version.txt").write_text("neuware: v1.17.0-rc1\n")
    assert cambricon.neuware_version(tmp_path / "nothing", {"NEUWARE_HOME": str(tmp_path / "nw")}) == "1.17.0"
    assert cambricon.neuware_version(tmp_path / "nothing", {}) == ""


def test_a_node_loads_no_vendor_binding_until_its_cards_are_found() -> None:
    code = (
        "import sys; from gpustack_operator.device_manager.detector import hardware; "
        "hardware.vendor_detectors(); "
        "print('ctypes' in sys.modules, 'gpustack_operator.device_manager.detector.cndev' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
