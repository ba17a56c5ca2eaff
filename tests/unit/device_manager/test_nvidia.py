"""The NVIDIA detector reads recorded NVML answers the way the contract says an admin should see them.

The recorded library (``recorded_nvml``) answers through C callables with NVML's prototypes, so our
binding's structure layouts, pointer passing and return-code checks run as on a real libnvidia-ml.so.1.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

from gpustack_operator.device_manager.detector import clib, nvidia, nvml
from gpustack_operator.device_manager.detector.hardware import vendor_detectors
from gpustack_operator.device_manager.detector.native import IndexedDetector
from gpustack_operator.device_manager.detector.nvidia import corrected_memory_mib, family_of, runtime_version
from gpustack_operator.device_manager.detector.vendor import LibraryUnavailableError
from tests.unit.device_manager.recorded_nvml import (
    A10,
    A100_MIG,
    DRIVER_NOT_LOADED,
    GPU_IS_LOST,
    H100,
    H100_ECC_ERRORS,
    L40S_ECC,
    NOT_SUPPORTED,
    OLD_DRIVER_GDDR,
    NvmlGpu,
    opener,
    record_nvml,
)


def detector(handle: object) -> IndexedDetector:
    return nvidia.detector(opener(handle))


@pytest.mark.parametrize(
    ("gpu", "memory", "family", "capability", "cores", "healthy", "sliceable"),
    [
        pytest.param(H100, 81559, "Hopper", "9.0", 16896, True, True, id="hbm-card-with-ecc-keeps-nvml-size"),
        pytest.param(A10, 23028, "Ampere", "8.6", 9216, True, True, id="gddr-card-with-ecc-off-keeps-size"),
        pytest.param(
            L40S_ECC, 49139, "Ada-Lovelace", "8.9", 18176, True, True, id="gddr-card-with-ecc-on-gets-16/15"
        ),
        pytest.param(
            A100_MIG, 81920, "Ampere", "8.0", 6912, True, False, id="mig-enabled-card-is-not-sliceable"
        ),
        pytest.param(
            H100_ECC_ERRORS, 81559, "Hopper", "9.0", 16896, False, True, id="dram-ecc-errors-unhealthy"
        ),
        pytest.param(
            OLD_DRIVER_GDDR, 15109, "Turing", "7.5", 0, False, True, id="old-driver-no-bus-width-no-cores"
        ),
    ],
)
def test_recorded_card_reads_as_the_contract_says(
    gpu: NvmlGpu,
    memory: int,
    family: str,
    capability: str,
    cores: int,
    healthy: bool,
    sliceable: bool,
) -> None:
    (card,) = detector(record_nvml([gpu])).cards([])
    assert (card.product, card.uuid, card.memory_mib) == (gpu.name.decode(), gpu.uuid.decode(), memory)
    assert (card.family, card.compute_capability, card.cores) == (family, capability, cores)
    assert (card.healthy, card.sliceable) == (healthy, sliceable)
    assert (card.driver_version, card.runtime_version) == ("550.54.15", "12.4")
    assert card.minor == gpu.minor
    assert card.pci_bus_id == gpu.bus_id.lower()[4:]


def test_cards_come_in_nvml_index_order_with_sysfs_bus_ids() -> None:
    cards = detector(record_nvml([H100, A10])).cards([])
    assert [(c.index, c.pci_bus_id) for c in cards] == [(0, "0000:18:00.0"), (1, "0000:3b:00.0")]


def test_a_driver_that_refuses_initialisation_is_a_missing_library_with_nvmls_reason() -> None:
    with pytest.raises(LibraryUnavailableError, match=r"cannot be initialised: driver not loaded \(9\)"):
        detector(record_nvml([H100], init=DRIVER_NOT_LOADED)).cards([])


def test_a_node_without_libnvidia_ml_is_a_missing_library_naming_the_path(tmp_path: Path) -> None:
    absent = str(tmp_path / nvml.SONAME)
    missing = nvidia.detector(lambda: nvml.Nvml.open(clib.load([absent], nvml.Nvml.LABEL)))
    with pytest.raises(
        LibraryUnavailableError, match=r"NVIDIA NVML \(libnvidia-ml.so.1\) cannot be loaded from"
    ):
        missing.cards([])
    assert nvml.Nvml.library_paths() == ("libnvidia-ml.so.1",), "the soname, as the driver installs it"


def test_a_node_loads_no_nvml_binding_until_nvidia_cards_are_found() -> None:
    assert isinstance(vendor_detectors()["nvidia"], nvidia.NvidiaDetector)
    code = (
        "import sys; from gpustack_operator.device_manager.detector import hardware; "
        "hardware.vendor_detectors(); "
        "print('ctypes' in sys.modules, 'gpustack_operator.device_manager.detector.nvml' in sys.modules, "
        "'pynvml' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False", "False"]


def test_a_health_query_that_fails_is_unhealthy_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    lost = NvmlGpu(
        **{
            **H100.__dict__,
            "errors": {
                "nvmlDeviceGetMemoryErrorCounter": GPU_IS_LOST,
                "nvmlDeviceGetTotalEccErrors": GPU_IS_LOST,
            },
        }
    )
    with caplog.at_level(logging.WARNING):
        (card,) = detector(record_nvml([lost])).cards([])
    assert not card.healthy
    assert "cannot read the health" in caplog.text


def test_ecc_off_offers_no_counter_and_leaves_the_card_healthy() -> None:
    errors = {"nvmlDeviceGetMemoryErrorCounter": NOT_SUPPORTED, "nvmlDeviceGetTotalEccErrors": NOT_SUPPORTED}
    (card,) = detector(record_nvml([NvmlGpu(**{**A10.__dict__, "errors": errors})])).cards([])
    assert card.healthy


def test_a_card_nvml_cannot_name_is_left_out_for_the_bus_to_report(caplog: pytest.LogCaptureFixture) -> None:
    broken = NvmlGpu(**{**A10.__dict__, "errors": {"nvmlDeviceGetUUID": GPU_IS_LOST}})
    with caplog.at_level(logging.WARNING):
        cards = detector(record_nvml([H100, broken])).cards([])
    assert [c.uuid for c in cards] == [H100.uuid.decode()]
    assert "cannot read nvidia card 1" in caplog.text


def test_a_library_without_the_optional_calls_still_reads_every_card() -> None:
    missing = [
        "nvmlDeviceGetMemoryBusWidth",
        "nvmlDeviceGetEccMode",
        "nvmlDeviceGetMigMode",
        "nvmlDeviceGetNumGpuCores",
        "nvmlDeviceGetMemoryErrorCounter",
        "nvmlDeviceGetTotalEccErrors",
        "nvmlSystemGetCudaDriverVersion",
    ]
    (card,) = detector(record_nvml([L40S_ECC], missing=missing)).cards([])
    assert (card.memory_mib, card.cores, card.runtime_version) == (46068, 0, ""), (
        "no bus width: no correction"
    )
    assert (card.healthy, card.sliceable, card.family) == (True, True, "Ada-Lovelace")


def test_metrics_read_memory_utilisation_temperature_and_health() -> None:
    busy = NvmlGpu(**{**A10.__dict__, "used_bytes": 4 << 30, "utilization": 87, "temperature": 71})
    first, second = detector(record_nvml([busy, H100_ECC_ERRORS])).metrics()
    assert (first.memory_used_mib, first.memory_total_mib, first.utilization_percent) == (4096, 23028, 87)
    assert (first.temperature_c, first.healthy, second.healthy) == (71, True, False)


@pytest.mark.parametrize(
    ("major", "minor", "family"),
    [
        (1, 3, "Tesla"),
        (2, 1, "Fermi"),
        (3, 7, "Kepler"),
        (5, 2, "Maxwell"),
        (6, 1, "Pascal"),
        (7, 0, "Volta"),
        (7, 2, "Volta"),
        (7, 5, "Turing"),
        (8, 0, "Ampere"),
        (8, 6, "Ampere"),
        (8, 9, "Ada-Lovelace"),
        (9, 0, "Hopper"),
        (10, 0, "Blackwell"),
        (12, 0, "Blackwell"),
        (4, 0, ""),
        (11, 0, ""),
        (0, 0, ""),
    ],
)
def test_family_follows_compute_capability(major: int, minor: int, family: str) -> None:
    assert family_of(major, minor) == family


@pytest.mark.parametrize(
    ("version", "text"),
    [(12040, "12.4"), (12080, "12.8"), (11020, "11.2"), (13000, "13.0"), (0, ""), (-1, "")],
)
def test_runtime_version_from_cuda_driver_integer(version: int, text: str) -> None:
    assert runtime_version(version) == text


@pytest.mark.parametrize(
    ("bus_width", "ecc", "mib"),
    [(384, True, 49139), (384, False, 46068), (5120, True, 46068), (0, True, 46068), (1023, True, 49139)],
)
def test_ecc_correction_only_on_narrow_gddr_buses_with_ecc_on(bus_width: int, ecc: bool, mib: int) -> None:
    assert corrected_memory_mib(46068, bus_width, ecc) == mib, "an L40S: 48,305,799,168 bytes"
