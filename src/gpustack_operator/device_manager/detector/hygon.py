"""Hygon DCUs through the DTK's ROCm SMI (`librocm_smi64.so`, called through our binding in ``rsmi``).

Without it a Hygon node reports VRAM 0, so its `.sliced.*` capacities are zero and a broken DCU stays
healthy. ROCm SMI gives per DCU: the name (`K100_AI`, the product the group ID comes from), VRAM in MiB,
the unique ID (our UUID, `GPU-<hex>`), the PCI address and the VRAM's ECC counters; its index is our
index, which `HYGON_VISIBLE_DEVICES` names. The compute units are not ROCm SMI's: they come from the KFD
topology in sysfs (SIMDs / SIMDs per CU, as rocminfo counts them), and the DRM card minor
(`/dev/dri/cardN`, which the allocator hands out) from the card's sysfs directory, as for AMD. The driver
version is the `hydcu` module's (else ROCm SMI's), the runtime version the DTK's `.info/version`.

A DCU is unhealthy when its memory controller reports uncorrectable ECC errors, or when the ECC query
fails (logged as a warning); a card or driver without ECC counters counts as healthy. The manufacturer
table makes Hygon cards logically sliceable (4 slices); sliced containers get the whole card.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

from gpustack_operator.device_manager.detector.amd import drm_card_minor
from gpustack_operator.device_manager.detector.native import (
    IndexedDetector,
    NodeFacts,
    brief_version,
    toolkit_version,
    version_in_file,
)
from gpustack_operator.device_manager.detector.pci import SYSFS, bus_name, normalize_bus_id
from gpustack_operator.device_manager.model import Card, Metrics

if TYPE_CHECKING:
    from gpustack_operator.device_manager.detector.rsmi import RocmSmi

MANUFACTURER: Final = "hygon"
LIBRARY: Final = "ROCm SMI"
MAX_COMPUTE_UNITS: Final = 4096
DRIVER_MODULES: Final = ("hydcu", "hycu")
DTK_HOMES: Final = ("opt/dtk",)


def kfd_compute_units(address: str, sysfs: Path = SYSFS) -> int:
    """The compute units of the GPU at ``address`` from the KFD topology; 0 when it is not there."""
    domain, bus, rest = address.split(":")
    device, function = rest.split(".")
    location = (int(bus, 16) << 8) | (int(device, 16) << 3) | int(function, 16)
    try:
        nodes = list((sysfs / "class/kfd/kfd/topology/nodes").iterdir())
    except OSError:
        return 0
    for node in nodes:
        try:
            lines = (node / "properties").read_text().splitlines()
        except OSError:
            continue
        properties = dict(line.split(" ", 1) for line in lines if " " in line)
        try:
            if int(properties.get("location_id", -1)) != location or int(properties.get("domain", 0)) != int(
                domain, 16
            ):
                continue
            simds, per_cu = int(properties.get("simd_count", 0)), int(properties.get("simd_per_cu", 0))
        except ValueError:
            return 0
        return simds // per_cu if per_cu > 0 else 0
    return 0


def driver_module_version(sysfs: Path = SYSFS) -> str:
    """The loaded DCU driver's version (`/sys/module/hydcu/version`); "" when neither module says."""
    for module in DRIVER_MODULES:
        try:
            version = (sysfs / "module" / module / "version").read_text().strip()
        except OSError:
            continue
        if version:
            return version
    return ""


def dtk_version(root: Path = Path("/"), environ: Mapping[str, str] = os.environ) -> str:
    """The DTK's version (`24.04.3`) from `.info/version` in `$ROCM_PATH` or the default DTK home."""
    return toolkit_version(
        environ,
        ("ROCM_PATH", "ROCM_HOME"),
        [root / home for home in DTK_HOMES],
        lambda home: version_in_file(home / ".info" / "version"),
    )


def _open_rocm_smi() -> RocmSmi:
    from gpustack_operator.device_manager.detector.rsmi import RocmSmi

    return RocmSmi.open()


class HygonDetector(IndexedDetector["RocmSmi"]):
    """Reads every DCU through ROCm SMI; the library is loaded on first use and kept open."""

    manufacturer = MANUFACTURER
    label = "Hygon ROCm SMI"
    noun = "DCU"

    def __init__(
        self,
        open_library: Callable[[], RocmSmi] = _open_rocm_smi,
        sysfs: Path = SYSFS,
        root: Path = Path("/"),
        environ: Mapping[str, str] = os.environ,
    ) -> None:
        super().__init__(open_library)
        self._sysfs = sysfs
        self._root = root
        self._environ = environ

    def node_facts(self, lib: RocmSmi) -> NodeFacts:
        driver = driver_module_version(self._sysfs) or self.attempt(lib.driver_version, default="")
        return NodeFacts(driver, brief_version(dtk_version(self._root, self._environ)))

    @staticmethod
    def _healthy(lib: RocmSmi, index: int) -> bool:
        return (lib.uncorrectable_ecc(index) or 0) == 0

    def read_card(self, lib: RocmSmi, device: int, node: NodeFacts) -> Card:
        where = self.where(device)
        address = normalize_bus_id(lib.bus_id(device))
        memory = self.attempt(lib.memory_total_mib, device, default=None)
        cores = kfd_compute_units(address, self._sysfs)
        return Card(
            manufacturer=MANUFACTURER,
            product=self.attempt(lib.name, device, default="") or "DCU",
            memory_mib=self.memory_mib(memory, where),
            uuid=self.attempt(lib.unique_id, device, default="") or bus_name(address),
            index=device,
            minor=drm_card_minor(address, self._sysfs),
            pci_bus_id=address,
            cores=self.plausible(cores, MAX_COMPUTE_UNITS, "compute units", where),
            driver_version=node.driver_version,
            runtime_version=node.runtime_version,
            healthy=self.checked_health(lambda: self._healthy(lib, device), where),
        )

    def read_metrics(self, lib: RocmSmi, device: int) -> Metrics:
        where = self.where(device)
        return Metrics(
            manufacturer=MANUFACTURER,
            uuid=self.attempt(lib.unique_id, device, default="")
            or bus_name(normalize_bus_id(lib.bus_id(device))),
            index=device,
            healthy=self.checked_health(lambda: self._healthy(lib, device), where),
            memory_total_mib=self.attempt(lib.memory_total_mib, device, default=-1),
            memory_used_mib=self.attempt(lib.memory_used_mib, device, default=-1),
            utilization_percent=self.attempt(lib.busy_percent, device, default=-1),
            temperature_c=self.attempt(lib.temperature, device, default=-1),
        )


def detector() -> HygonDetector:
    """The hygon detector: the DTK's ROCm SMI, loaded when the bus first shows a Hygon card."""
    return HygonDetector()
