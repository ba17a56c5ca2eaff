"""Moore Threads GPUs through MTML, on recorded library answers: what a node with MT cards reports."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from gpustack_operator.device_manager.detector import mthreads, mtml
from gpustack_operator.device_manager.detector.hardware import HardwareBackend, vendor_detectors
from gpustack_operator.device_manager.detector.native import IndexedDetector
from gpustack_operator.device_manager.detector.vendor import LibraryUnavailableError
from gpustack_operator.device_manager.grouping import group_cards
from tests.unit.device_manager.recorded import SysfsDevice, build_sysfs
from tests.unit.device_manager.recorded_mtml import (
    DRIVER_FAILURE,
    EIGHT_S4000,
    GPU_IS_LOST,
    NOT_SUPPORTED,
    S4000_PCI,
    RecordedGpu,
    opener,
    record_mtml,
    s4000,
)


def backend(tmp_path: Path, handle: object, devices: list[SysfsDevice] = S4000_PCI) -> HardwareBackend:
    detectors = vendor_detectors()
    detectors["mthreads"] = mthreads.detector(opener(handle))
    return HardwareBackend(["mthreads"], detectors=detectors, sysfs=build_sysfs(tmp_path / "sys", devices))


def detector(handle: object) -> IndexedDetector:
    return mthreads.detector(opener(handle))


def test_eight_s4000s_report_vram_cores_driver_and_ids_and_free_every_handle(tmp_path: Path) -> None:
    freed: list[int] = []
    cards = backend(tmp_path, record_mtml(EIGHT_S4000, freed=freed)).detect()
    first = cards[0]
    assert len(cards) == 8
    assert all(not c.detail_missing and c.healthy and c.sliceable for c in cards)
    assert (first.product, first.memory_mib, first.cores) == ("MTT S4000", 49152, 8192)
    assert (first.driver_version, first.runtime_version) == ("2.7.0", "")
    assert first.uuid == "8a1f2c3d-4e5f-6071-8293-a4b5c6d7e800"
    assert [(c.index, c.pci_bus_id) for c in cards[:2]] == [(0, "0000:19:00.0"), (1, "0000:3b:00.0")]
    assert (first.numa_affinity, first.pci_id) == ("0", "1ed5:0327"), "topology from the bus"
    assert {2, 100, 200} <= set(freed), "system, device and memory handles are given back"


def test_the_group_is_sliceable_with_16_partitioned_slices(tmp_path: Path) -> None:
    (group,) = group_cards(backend(tmp_path, record_mtml(EIGHT_S4000)).detect())
    assert (group["id"], group["memory"], group.get("cores")) == ("mtt-s4000", 49152, 8192)
    assert group.get("acceleratorsFeature") == {
        "logicalSliced": {"maxSize": 16, "coresPercentageOvercommit": False}
    }


@pytest.mark.parametrize(
    ("gpu", "healthy"),
    [
        pytest.param(s4000(0, uncorrected=2), False, id="volatile uncorrected DRAM ECC errors"),
        pytest.param(s4000(0, errors={"mtmlMemoryGetEccErrorCounter": NOT_SUPPORTED}), True, id="no ECC"),
    ],
)
def test_health_follows_uncorrected_ecc(gpu: RecordedGpu, healthy: bool) -> None:
    (card,) = detector(record_mtml([gpu])).cards([])
    assert card.healthy is healthy


def test_a_card_whose_health_query_fails_is_unhealthy_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    gpus = [
        *EIGHT_S4000[:5],
        s4000(5, errors={"mtmlMemoryGetEccErrorCounter": GPU_IS_LOST}),
        *EIGHT_S4000[6:],
    ]
    cards = backend(tmp_path, record_mtml(gpus)).detect()
    assert [c.index for c in cards if not c.healthy] == [5]
    assert cards[5].memory_mib == 49152, "the card is still described"
    assert (
        "MTML cannot read the health of mthreads card 5 (mtmlMemoryGetEccErrorCounter returned 669)"
        in caplog.text
    )


def test_a_node_without_libmtml_reports_pci_facts_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(mtml, "LIBRARY_PATHS", ("libmtml-not-here.so.2", str(tmp_path / "libmtml.so")))
    sysfs = build_sysfs(tmp_path / "sys", S4000_PCI)
    with caplog.at_level(logging.WARNING):
        cards = HardwareBackend(["mthreads"], detectors=vendor_detectors(), sysfs=sysfs).detect()
    assert len(cards) == 8
    assert all(c.memory_mib == 0 and c.healthy and not c.sliceable for c in cards)
    assert (
        "Moore Threads MTML (libmtml.so) cannot be loaded from libmtml-not-here.so.2"
        in cards[0].detail_missing
    )
    assert "mthreads cards reported from PCI facts only" in caplog.text


def test_a_driver_that_refuses_initialisation_is_a_missing_library() -> None:
    with pytest.raises(
        LibraryUnavailableError, match="MTML cannot be initialised: mtmlLibraryInit returned 2"
    ):
        detector(record_mtml(EIGHT_S4000, init=DRIVER_FAILURE)).cards([])


def test_a_garbage_card_count_falls_back_to_pci_facts(tmp_path: Path) -> None:
    cards = backend(tmp_path, record_mtml(EIGHT_S4000, count=1 << 31)).detect()
    assert all(c.detail_missing and c.memory_mib == 0 for c in cards)
    assert "MTML counts 2147483648 cards, which cannot be right" in cards[0].detail_missing


def test_garbage_answers_are_cleaned_or_refused_never_a_crash(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    garbled = [
        s4000(0, name=b"MTT\x00 garbage after the NUL"),
        s4000(1, memory_bytes=(1 << 64) - 1),
        s4000(2, errors={"mtmlLibraryInitDeviceByIndex": DRIVER_FAILURE}),
        s4000(3, uuid=b"", errors={"mtmlMemoryGetTotal": DRIVER_FAILURE}),
    ]
    cards = backend(tmp_path, record_mtml(garbled), S4000_PCI[:4]).detect()
    assert [(c.product, c.memory_mib, c.healthy, bool(c.detail_missing)) for c in cards] == [
        ("MTT", 49152, True, False),
        ("MTT S4000", 0, True, False),
        ("MTT S4000", 0, True, False),
        ("PCI 1ed5:0327", 0, False, True),
    ]
    assert cards[2].uuid == "pci-0000-5d-00.0", "card 3 gives no UUID: named by its bus address"
    assert "answered VRAM MiB=17592186044415 for mthreads card 1, which cannot be right" in caplog.text
    assert "MTML cannot read mthreads card 2: mtmlLibraryInitDeviceByIndex returned 2" in caplog.text


def test_metrics_read_memory_use_gpu_busy_and_temperature() -> None:
    broken = s4000(1, errors={"mtmlMemoryGetEccErrorCounter": GPU_IS_LOST})
    readings = detector(
        record_mtml([EIGHT_S4000[0], broken], missing=["mtmlSystemGetDriverVersion"])
    ).metrics()
    assert [
        (m.index, m.healthy, m.memory_total_mib, m.memory_used_mib, m.utilization_percent, m.temperature_c)
        for m in readings
    ] == [(0, True, 49152, 512, 71, 48), (1, False, 49152, 512, 71, 48)]


def test_a_node_loads_no_metax_iluvatar_or_mthreads_binding_until_their_cards_are_found() -> None:
    code = (
        "import sys; from gpustack_operator.device_manager.detector import hardware; "
        "hardware.vendor_detectors(); "
        "print(*[f'gpustack_operator.device_manager.detector.{m}' in sys.modules "
        "for m in ('mxsml', 'ixml', 'mtml')], 'ctypes' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False", "False", "False"]
