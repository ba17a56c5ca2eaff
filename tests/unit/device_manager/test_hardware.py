"""The hardware backend on recorded sysfs trees: the bus decides which cards exist, libraries add detail."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gpustack_operator.device_manager.detector import nvidia, pci
from gpustack_operator.device_manager.detector.amd import AmdSmiDetector
from gpustack_operator.device_manager.detector.hardware import HardwareBackend, vendor_detectors
from gpustack_operator.device_manager.detector.vendor import LibraryUnavailableError
from gpustack_operator.rules.naming.manufacturers import known_manufacturers
from tests.unit.device_manager.recorded import SysfsDevice, build_sysfs
from tests.unit.device_manager.recorded_nvml import A10, DRIVER_NOT_LOADED, H100, opener, record_nvml

H100_PCI = SysfsDevice("0000:18:00.0", "10de", "2330", "030200", "0", "0-47,96-143", "0000:17")
A10_PCI = SysfsDevice("0000:3b:00.0", "10de", "2236", "030200", "1", "48-95,144-191", "0000:3a")
NVIDIA_AUDIO = SysfsDevice("0000:3b:00.1", "10de", "1aef", "040300", "1", "48-95", "0000:3a")
NVSWITCH = SysfsDevice("0000:c0:00.0", "10de", "22a3", "068000", "1", "48-95", "0000:bf")
ETHERNET = SysfsDevice("0000:01:00.0", "8086", "1593", "020000", "-1", "", "0000:00")
ASCEND = SysfsDevice("0000:c1:00.0", "19e5", "d802", "120001", "1", "48-95", "0000:c0")
AMD_MI300X = SysfsDevice("0000:0c:00.0", "1002", "74a1", "038000", "0", "0-47", "0000:0b")


def backend(root: Path, devices: list[SysfsDevice], nvml: Any = None, **kwargs: Any) -> HardwareBackend:
    detectors = vendor_detectors()
    if nvml is not None:
        detectors["nvidia"] = nvidia.detector(opener(nvml))
    return HardwareBackend(
        known_manufacturers(), detectors=detectors, sysfs=build_sysfs(root, devices), **kwargs
    )


def test_scan_reads_vendor_class_numa_cpus_and_host_bridge(tmp_path: Path) -> None:
    build_sysfs(tmp_path, [H100_PCI, ETHERNET])
    h100, nic = sorted(pci.scan(tmp_path), key=lambda d: d.address, reverse=True)
    assert (h100.vendor, h100.device, h100.pci_class) == ("10de", "2330", "030200")
    assert (h100.numa_node, h100.cpu_affinity, h100.root) == ("0", "0-47,96-143", "0000:17")
    assert nic.numa_node == "", "numa_node -1 means no NUMA affinity"


def test_scan_of_a_machine_without_a_visible_bus_is_empty(tmp_path: Path) -> None:
    assert pci.scan(tmp_path / "nothing") == []


@pytest.mark.parametrize(
    ("text", "address"),
    [("00000000:3B:00.0", "0000:3b:00.0"), ("0000:3b:00.0", "0000:3b:00.0"), ("3b:00.0", "0000:3b:00.0")],
)
def test_bus_ids_normalise_to_sysfs_spelling(text: str, address: str) -> None:
    assert pci.normalize_bus_id(text) == address


def test_nvml_cards_get_topology_from_the_bus(tmp_path: Path) -> None:
    nvml = record_nvml([H100, A10])
    cards = backend(tmp_path, [H100_PCI, A10_PCI, NVIDIA_AUDIO, NVSWITCH, ETHERNET], nvml).detect()
    assert [(c.uuid, c.numa_affinity, c.cpu_affinity, c.pci_root) for c in cards] == [
        (H100.uuid.decode(), "0", "0-47,96-143", "0000:17"),
        (A10.uuid.decode(), "1", "48-95,144-191", "0000:3a"),
    ]
    assert all(c.pci_class == "030200" and not c.detail_missing for c in cards)


def test_nvml_that_will_not_initialise_still_reports_every_card_from_pci_facts(tmp_path: Path) -> None:
    nvml = record_nvml([H100], init=DRIVER_NOT_LOADED)
    names = {"0000:18:00.0": "GH100 [H100 SXM5 80GB]"}
    cards = backend(
        tmp_path, [H100_PCI, A10_PCI, NVIDIA_AUDIO], nvml, model_names=lambda addresses: names
    ).detect()
    assert [(c.product, c.index, c.uuid) for c in cards] == [
        ("H100 SXM5 80GB", 0, "pci-0000-18-00.0"),
        ("PCI 10de:2236", 1, "pci-0000-3b-00.0"),
    ]
    assert all(
        "NVML (libnvidia-ml.so.1) cannot be initialised: driver not loaded (9)" in c.detail_missing
        for c in cards
    )
    assert all(c.healthy and not c.sliceable and c.memory_mib == 0 for c in cards)


def test_a_card_on_the_bus_that_nvml_does_not_see_is_reported_unhealthy(tmp_path: Path) -> None:
    nvml = record_nvml([H100])
    cards = backend(tmp_path, [H100_PCI, A10_PCI], nvml).detect()
    assert [(c.uuid, c.healthy) for c in cards] == [(H100.uuid.decode(), True), ("pci-0000-3b-00.0", False)]
    assert "does not see" in cards[1].detail_missing


def test_manufacturers_whose_library_is_missing_report_pci_facts(tmp_path: Path) -> None:
    (card,) = backend(tmp_path, [ASCEND, ETHERNET]).detect()
    assert (card.manufacturer, card.pci_bus_id, card.numa_affinity) == ("ascend", "0000:c1:00.0", "1")
    assert "Ascend DCMI (libdcmi.so) cannot be loaded" in card.detail_missing


def test_pci_backend_skips_libraries_and_nvml_backend_requires_them(tmp_path: Path) -> None:
    nvml = record_nvml([H100])
    (card,) = backend(tmp_path / "a", [H100_PCI], nvml, use_libraries=False).detect()
    assert "vendor libraries disabled" in card.detail_missing
    broken = record_nvml([H100], init=DRIVER_NOT_LOADED)
    with pytest.raises(LibraryUnavailableError, match="driver not loaded"):
        backend(tmp_path / "b", [H100_PCI], broken, require_library=True).detect()


def test_class_override_in_the_vendor_id_restricts_the_match(tmp_path: Path) -> None:
    root = build_sysfs(tmp_path, [H100_PCI, SysfsDevice("0000:19:00.0", "10de", "20b5", "030000")])
    environ = {"GPUSTACK_NVIDIA_PCI_VENDOR_ID": "0302_10de"}
    cards = HardwareBackend(["nvidia"], use_libraries=False, sysfs=root, environ=environ).detect()
    assert [c.pci_bus_id for c in cards] == ["0000:18:00.0"]


def test_no_card_on_the_bus_means_no_library_is_asked(tmp_path: Path) -> None:
    nvml = record_nvml([H100])
    assert backend(tmp_path, [ETHERNET], nvml).detect() == []
    assert [c.uuid for c in backend(tmp_path / "x", [ETHERNET], nvml, pci_check=False).detect()] == [
        H100.uuid.decode()
    ]


class AmdSmiError(Exception):
    pass


def fake_amdsmi(uncorrectable: int = 0) -> Any:
    """amdsmi's Python API answering as an MI300X does."""
    return SimpleNamespace(
        AmdSmiException=AmdSmiError,
        amdsmi_init=lambda: None,
        amdsmi_get_processor_handles=lambda: ["h0"],
        amdsmi_get_gpu_asic_info=lambda h: {
            "market_name": "AMD Instinct MI300X",
            "num_compute_units": 304,
            "target_graphics_version": "gfx942",
        },
        amdsmi_get_gpu_vram_info=lambda h: {"vram_type": "HBM3", "vram_size": 196592},
        amdsmi_get_gpu_device_uuid=lambda h: "2dff74a1-0000-1000-80a7-3b5a6c9ff0e1",
        amdsmi_get_gpu_device_bdf=lambda h: "0000:0c:00.0",
        amdsmi_get_gpu_driver_info=lambda h: {"driver_name": "amdgpu", "driver_version": "6.8.5"},
        amdsmi_get_rocm_version=lambda: (True, "6.3.1"),
        amdsmi_get_gpu_total_ecc_count=lambda h: {
            "correctable_count": 3,
            "uncorrectable_count": uncorrectable,
        },
        amdsmi_get_gpu_vram_usage=lambda h: {"vram_total": 196592, "vram_used": 1024},
        amdsmi_get_gpu_activity=lambda h: {"gfx_activity": 42},
    )


@pytest.mark.parametrize("uncorrectable", [0, 1], ids=["clean", "uncorrectable-ecc-is-unhealthy"])
def test_amd_cards_through_amdsmi(tmp_path: Path, uncorrectable: int) -> None:
    root = build_sysfs(tmp_path, [AMD_MI300X])
    drm = root / "bus" / "pci" / "devices" / "0000:0c:00.0" / "drm"
    (drm / "card1").mkdir(parents=True)
    (drm / "renderD128").mkdir()
    detector = AmdSmiDetector(fake_amdsmi(uncorrectable), sysfs=root)
    (card,) = HardwareBackend(["amd"], detectors={"amd": detector}, sysfs=root).detect()
    assert (card.product, card.memory_mib, card.cores, card.compute_capability) == (
        "AMD Instinct MI300X",
        196592,
        304,
        "gfx942",
    )
    assert (card.driver_version, card.runtime_version, card.minor, card.numa_affinity) == (
        "6.8.5",
        "6.3.1",
        1,
        "0",
    )
    assert card.healthy is (uncorrectable == 0)
    (reading,) = detector.metrics()
    assert (reading.utilization_percent, reading.memory_used_mib) == (42, 1024)


def test_amd_without_the_amdsmi_package_falls_back_to_pci(tmp_path: Path) -> None:
    root = build_sysfs(tmp_path, [AMD_MI300X])
    (card,) = HardwareBackend(["amd"], detectors={"amd": AmdSmiDetector()}, sysfs=root).detect()
    assert "amdsmi" in card.detail_missing
    assert card.memory_mib == 0


def test_metrics_fall_back_to_health_where_no_library_reads(tmp_path: Path) -> None:
    nvml = record_nvml([H100])
    readings = backend(tmp_path, [H100_PCI, ASCEND], nvml).metrics()
    assert [(r.manufacturer, r.memory_total_mib) for r in readings] == [("nvidia", 81559), ("ascend", -1)]


def test_missing_library_is_logged_once_not_every_period(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    hardware = backend(tmp_path, [ASCEND])
    for _ in range(3):
        hardware.detect()
    assert len([r for r in caplog.records if "PCI facts only" in r.getMessage()]) == 1


def test_library_unavailable_is_a_detection_error() -> None:
    from gpustack_operator.device_manager.model import DetectionError

    assert issubclass(LibraryUnavailableError, DetectionError)


def test_udev_names_are_read_once_per_bus_and_again_when_it_changes(tmp_path: Path) -> None:
    reads: list[int] = []

    def names(addresses: Sequence[str]) -> dict[str, str]:
        reads.append(1)
        return {"0000:18:00.0": "GH100 [H100 SXM5 80GB]", "0000:3b:00.0": "GA102GL [A10]"}

    pci_only = HardwareBackend(
        ["nvidia"], use_libraries=False, sysfs=build_sysfs(tmp_path, [H100_PCI]), model_names=names
    )
    assert [c.product for c in pci_only.detect()] == ["H100 SXM5 80GB"]
    assert [c.product for c in pci_only.detect()] == ["H100 SXM5 80GB"]
    assert len(reads) == 1, "the same bus must not ask udev again"
    build_sysfs(tmp_path, [A10_PCI])
    assert [c.product for c in pci_only.detect()] == ["H100 SXM5 80GB", "A10"]
    assert len(reads) == 2, "a card added to the bus reads the names again"
    pci_only.detect()
    assert len(reads) == 2


def test_bus_names_follow_the_set_of_addresses() -> None:
    reads: list[int] = []

    def source(addresses: Sequence[str]) -> dict[str, str]:
        reads.append(1)
        return {"a": str(len(reads))}

    names = pci.BusNames(source)
    assert names(["a", "b"]) == {"a": "1"}
    assert names(["a", "b"]) == {"a": "1"}
    assert names(["a"]) == {"a": "2"}, "a card removed reads them again"
    assert names(["a", "c"]) == {"a": "3"}, "a card moved reads them again"


def test_udev_names_come_from_udevs_database_files(tmp_path: Path) -> None:
    (tmp_path / "+pci:0000:18:00.0").write_text(
        "S:bus/pci/0000:18:00.0\nI:1733\nE:ID_PCI_CLASS_FROM_DATABASE=Display controller\n"
        "E:ID_VENDOR_FROM_DATABASE=NVIDIA Corporation\nE:ID_MODEL_FROM_DATABASE=GH100 [H100 SXM5 80GB]\nG:x\n"
    )
    (tmp_path / "+pci:0000:01:00.0").write_text("I:1733\nE:ID_VENDOR_FROM_DATABASE=Intel Corporation\n")
    addresses = ["0000:01:00.0", "0000:18:00.0", "0000:3b:00.0"]
    assert pci.udev_model_names(addresses, tmp_path) == {"0000:18:00.0": "GH100 [H100 SXM5 80GB]"}
    assert pci.udev_model_names(addresses, tmp_path / "no-udev") == {}, "no /run/udev in the container"
