"""AMD cards through AMD SMI's Python package (`amdsmi`, shipped with ROCm and on PyPI) when importable.

amdsmi gives the marketing name, VRAM, UUID, bus address, driver and ROCm versions, compute units, the
gfx target (our compute capability) and ECC counts; a card with uncorrectable ECC errors is unhealthy.
Without the package (or without the amdgpu driver) the hardware backend falls back to PCI facts.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Final

from gpustack_operator.device_manager.detector.library import VendorLibrary
from gpustack_operator.device_manager.detector.pci import SYSFS, PciDevice, normalize_bus_id, with_topology
from gpustack_operator.device_manager.model import Card, Metrics

log = logging.getLogger(__name__)

MANUFACTURER: Final = "amd"


def drm_card_minor(address: str, sysfs: Path = SYSFS) -> int:
    """N of `/dev/dri/cardN` for the card at ``address``; -1 when the DRM node is not visible."""
    try:
        names = [entry.name for entry in (sysfs / "bus" / "pci" / "devices" / address / "drm").iterdir()]
    except OSError:
        return -1
    minors = [int(name[4:]) for name in names if name.startswith("card") and name[4:].isdigit()]
    return min(minors, default=-1)


class AmdSmiDetector:
    """Reads every AMD GPU through amdsmi; the library is initialised once and kept open."""

    manufacturer = MANUFACTURER

    def __init__(self, amdsmi: ModuleType | None = None, sysfs: Path = SYSFS) -> None:
        self._lib = VendorLibrary(
            "amdsmi",
            init="amdsmi_init",
            shutdown="amdsmi_shut_down",
            error="AmdSmiException",
            label="the amdsmi Python package",
            module=amdsmi,
        )
        self._sysfs = sysfs

    def _library(self) -> Any:
        return self._lib.get()

    def _try(self, amdsmi: Any, name: str, *args: Any, default: Any) -> Any:
        """amdsmi's `name(*args)`, or default when it fails or this amdsmi version lacks the call."""
        call = getattr(amdsmi, name, None)
        if call is None:
            log.debug("amdsmi has no %s", name)
            return default
        return self._lib.attempt(call, *args, default=default)

    def _healthy(self, amdsmi: Any, handle: Any) -> bool:
        ecc = self._try(amdsmi, "amdsmi_get_gpu_total_ecc_count", handle, default={})
        return int(ecc.get("uncorrectable_count", 0) or 0) == 0

    def _runtime(self, amdsmi: Any) -> str:
        version = self._try(amdsmi, "amdsmi_get_rocm_version", default="")
        if isinstance(version, tuple):  # some releases answer (ok, version)
            version = version[-1] if version and version[0] else ""
        return str(version or "")

    def _card(self, amdsmi: Any, index: int, handle: Any, runtime: str) -> Card:
        asic = amdsmi.amdsmi_get_gpu_asic_info(handle)
        vram = self._try(amdsmi, "amdsmi_get_gpu_vram_info", handle, default={})
        driver = self._try(amdsmi, "amdsmi_get_gpu_driver_info", handle, default={})
        address = normalize_bus_id(str(amdsmi.amdsmi_get_gpu_device_bdf(handle)))
        return Card(
            manufacturer=MANUFACTURER,
            product=str(asic.get("market_name", "")),
            memory_mib=int(vram.get("vram_size", 0) or 0),
            uuid=str(amdsmi.amdsmi_get_gpu_device_uuid(handle)),
            index=index,
            minor=drm_card_minor(address, self._sysfs),
            pci_bus_id=address,
            cores=int(asic.get("num_compute_units", 0) or 0),
            driver_version=str(driver.get("driver_version", "")),
            runtime_version=runtime,
            compute_capability=str(asic.get("target_graphics_version", "")),
            healthy=self._healthy(amdsmi, handle),
        )

    def cards(self, pci: Sequence[PciDevice]) -> list[Card]:
        amdsmi = self._library()
        by_address = {device.address: device for device in pci}
        runtime = self._runtime(amdsmi)
        cards = []
        for index, handle in enumerate(amdsmi.amdsmi_get_processor_handles()):
            try:
                card = self._card(amdsmi, index, handle, runtime)
            except amdsmi.AmdSmiException as exc:
                log.warning("amdsmi cannot read amd card index=%s: %s", index, exc)
                continue
            cards.append(with_topology(card, by_address.get(card.pci_bus_id)))
        return cards

    def metrics(self) -> list[Metrics]:
        amdsmi = self._library()
        readings = []
        for index, handle in enumerate(amdsmi.amdsmi_get_processor_handles()):
            vram = self._try(amdsmi, "amdsmi_get_gpu_vram_usage", handle, default={})
            activity = self._try(amdsmi, "amdsmi_get_gpu_activity", handle, default={})
            readings.append(
                Metrics(
                    manufacturer=MANUFACTURER,
                    uuid=str(amdsmi.amdsmi_get_gpu_device_uuid(handle)),
                    index=index,
                    healthy=self._healthy(amdsmi, handle),
                    memory_total_mib=int(vram.get("vram_total", -1)),
                    memory_used_mib=int(vram.get("vram_used", -1)),
                    utilization_percent=int(activity.get("gfx_activity", -1)),
                )
            )
        return readings
