"""The NVIDIA detector reads recorded NVML answers the way the contract says an admin should see them."""

from __future__ import annotations

import pynvml
import pytest

from gpustack_operator.device_manager.detector.nvidia import (
    NvmlDetector,
    corrected_memory_mib,
    family_of,
    runtime_version,
)
from gpustack_operator.device_manager.detector.vendor import LibraryUnavailableError
from tests.unit.device_manager.recorded import (
    A10,
    A100_MIG,
    H100,
    H100_ECC_ERRORS,
    L40S_ECC,
    OLD_DRIVER_GDDR,
    NvmlGpu,
    record_nvml,
)


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
    monkeypatch: pytest.MonkeyPatch,
    gpu: NvmlGpu,
    memory: int,
    family: str,
    capability: str,
    cores: int,
    healthy: bool,
    sliceable: bool,
) -> None:
    nvml = record_nvml(monkeypatch, [gpu])
    (card,) = NvmlDetector(nvml).cards([])
    assert (card.product, card.uuid, card.memory_mib) == (gpu.name, gpu.uuid, memory)
    assert (card.family, card.compute_capability, card.cores) == (family, capability, cores)
    assert (card.healthy, card.sliceable) == (healthy, sliceable)
    assert (card.driver_version, card.runtime_version) == ("550.54.15", "12.4")
    assert card.minor == gpu.minor
    assert card.pci_bus_id == gpu.bus_id.lower()[4:]


def test_cards_come_in_nvml_index_order_with_sysfs_bus_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    nvml = record_nvml(monkeypatch, [H100, A10])
    cards = NvmlDetector(nvml).cards([])
    assert [(c.index, c.pci_bus_id) for c in cards] == [(0, "0000:18:00.0"), (1, "0000:3b:00.0")]


def test_missing_nvml_library_is_reported_as_unavailable_with_nvmls_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    nvml = record_nvml(monkeypatch, [H100], init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    with pytest.raises(LibraryUnavailableError, match="NVML Shared Library Not Found"):
        NvmlDetector(nvml).cards([])


def test_metrics_read_memory_utilisation_temperature_and_health(monkeypatch: pytest.MonkeyPatch) -> None:
    busy = NvmlGpu(**{**A10.__dict__, "used_bytes": 4 << 30, "utilization": 87, "temperature": 71})
    nvml = record_nvml(monkeypatch, [busy, H100_ECC_ERRORS])
    first, second = NvmlDetector(nvml).metrics()
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
    assert corrected_memory_mib(48_305_799_168, bus_width, ecc) == mib
