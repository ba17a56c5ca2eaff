"""Huawei Ascend NPUs through DCMI (the driver's `libdcmi.so`, called through our binding in ``dcmi``).

Without DCMI an Ascend node reports VRAM 0, so its `.sliced.*` capacities are zero and vcann-rt slicing
is unreachable, and a broken NPU stays healthy. DCMI gives per NPU: the chip (`Ascend` + `910B3`, the
product the group ID comes from), HBM (or DDR) size in MiB, AI cores, the logic ID (our index), the
physical ID (`/dev/davinciN`, our device-node number), the SoC die (our UUID) and the PCI address; per
node the driver version. The CANN version is not DCMI's: it is read from the toolkit's `version.info`.

An NPU is unhealthy when DCMI's health reads major or critical alarm (2, 3), or a value DCMI does not
define, when HBM/DDR report uncorrectable ECC errors, or when its health query fails (a card the library
can no longer read); a minor alarm (1) leaves it serving, as npu-smi does. Ascend cards are
logically sliceable (vcann-rt: 63 slices, compute overcommitted, from the manufacturer table).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypeVar

from gpustack_operator.device_manager.detector.native import brief_version, toolkit_version
from gpustack_operator.device_manager.detector.pci import PciDevice, bus_name, normalize_bus_id, with_topology
from gpustack_operator.device_manager.detector.vendor import CallError, LibraryUnavailableError
from gpustack_operator.device_manager.model import Card, Metrics

if TYPE_CHECKING:
    from gpustack_operator.device_manager.detector.dcmi import Dcmi

log = logging.getLogger(__name__)

MANUFACTURER: Final = "ascend"
LIBRARY: Final = "DCMI"
MAJOR_ALARM: Final = 2
HEALTH_STATES: Final = range(4)
MAX_MEMORY_MIB: Final = 1 << 22
"""4 TiB: no NPU has more; a larger answer is garbage, not memory."""
MAX_AICORES: Final = 4096
TOOLKIT_HOMES: Final = (
    "usr/local/Ascend/cann",
    "usr/local/Ascend/ascend-toolkit/latest",
    "usr/local/Ascend/ascend-toolkit/latest/runtime",
)
VERSION_FILES: Final = ("version.info", "runtime/version.info", "share/info/runtime/version.info")
DRIVER_VERSION_FILE: Final = "usr/local/Ascend/driver/version.info"

T = TypeVar("T")
_FAMILY = re.compile(r"(?:Ascend)?(910_93|\d{3}(?:[A-Z](?=\d|$))?)", re.IGNORECASE)


def family_of(chip_name: str) -> str:
    """The chip series vcann-rt is built for: `910B3` -> `910B`, `310P3` -> `310P`, `910_9392` -> `910_93`."""
    match = _FAMILY.match(chip_name.strip())
    return match.group(1).upper() if match else ""


def product_of(chip_type: str, chip_name: str) -> str:
    """`Ascend` + `910B3` -> `Ascend910B3` (a name that already carries the type is kept as is)."""
    if chip_name.lower().startswith(chip_type.lower()):
        return chip_name
    return f"{chip_type}{chip_name}"


def version_info(path: Path) -> str:
    """The `Version=` line of an Ascend `version.info`; "" when absent or unreadable."""
    try:
        lines = path.read_text(errors="ignore").splitlines()
    except OSError:
        return ""
    for line in lines:
        key, sep, value = line.partition("=")
        if sep and key.strip() == "Version":
            return value.strip()
    return ""


def cann_version(root: Path = Path("/"), environ: Mapping[str, str] = os.environ) -> str:
    """The CANN toolkit's version (full, `8.0.RC3`) from `$ASCEND_TOOLKIT_HOME` or the default homes."""

    def in_home(home: Path) -> str:
        return next((v for name in VERSION_FILES if (v := version_info(home / name))), "")

    return toolkit_version(
        environ, ("ASCEND_TOOLKIT_HOME",), [root / home for home in TOOLKIT_HOMES], in_home
    )


def _open_dcmi() -> Dcmi:
    from gpustack_operator.device_manager.detector.dcmi import Dcmi

    return Dcmi.open()


def _plausible(value: int, limit: int, what: str, where: str) -> int:
    if 0 <= value <= limit:
        return value
    log.warning(
        "DCMI answered %s=%s for ascend NPU %s, which cannot be right; reporting 0", what, value, where
    )
    return 0


class AscendDetector:
    """Reads every Ascend NPU through DCMI; the library is loaded on first use and kept open."""

    manufacturer = MANUFACTURER

    def __init__(
        self,
        open_library: Callable[[], Dcmi] = _open_dcmi,
        root: Path = Path("/"),
        environ: Mapping[str, str] = os.environ,
    ) -> None:
        self._open = open_library
        self._root = root
        self._environ = environ
        self._dcmi: Dcmi | None = None

    def _library(self) -> Dcmi:
        if self._dcmi is None:
            try:
                self._dcmi = self._open()
            except CallError as exc:
                raise LibraryUnavailableError(f"Ascend DCMI cannot be initialised: {exc}") from exc
        return self._dcmi

    def _npus(self, dcmi: Dcmi) -> list[tuple[int, int]]:
        try:
            return [(card, device) for card, device in dcmi.devices() if dcmi.is_npu(card, device)]
        except CallError as exc:
            raise LibraryUnavailableError(f"Ascend DCMI cannot list the NPUs: {exc}") from exc

    @staticmethod
    def _try(call: Callable[..., T], *args: int, default: T) -> T:
        try:
            return call(*args)
        except CallError as exc:
            log.debug("DCMI: %s", exc)
            return default

    def _uuid(self, dcmi: Dcmi, card: int, device: int, bus_id: str) -> str:
        """The SoC die; a chip whose die is unreadable is named by its bus address, as PCI facts name it."""
        return self._try(dcmi.die, card, device, default=bus_name(bus_id))

    def _healthy(self, dcmi: Dcmi, card: int, device: int, where: str) -> bool:
        try:
            state = dcmi.health(card, device)
        except CallError as exc:
            log.warning(
                "DCMI cannot read the health of ascend NPU %s (%s); reporting it unhealthy", where, exc
            )
            return False
        if state is not None and state not in HEALTH_STATES:
            log.warning(
                "DCMI answered health %s for ascend NPU %s, not a state it defines; unhealthy", state, where
            )
            return False
        ecc = self._try(dcmi.uncorrectable_ecc, card, device, default=0)
        return (state or 0) < MAJOR_ALARM and ecc == 0

    def _card(self, dcmi: Dcmi, card: int, device: int, driver: str, runtime: str) -> Card:
        where = f"card={card} device={device}"
        chip_type, chip_name, cores = dcmi.chip(card, device)
        logic = dcmi.logic_id(card, device)
        bus_id = normalize_bus_id(dcmi.bus_id(card, device))
        memory = self._try(dcmi.memory, card, device, default=None)
        if memory is None:
            log.warning("DCMI cannot read the memory of ascend NPU %s; reporting 0 MiB", where)
        return Card(
            manufacturer=MANUFACTURER,
            product=product_of(chip_type or "Ascend", chip_name),
            memory_mib=_plausible(memory.total_mib if memory else 0, MAX_MEMORY_MIB, "memory MiB", where),
            uuid=self._uuid(dcmi, card, device, bus_id),
            index=logic,
            minor=dcmi.physical_id(logic),
            pci_bus_id=bus_id,
            cores=_plausible(cores, MAX_AICORES, "AI cores", where),
            driver_version=driver,
            runtime_version=runtime,
            family=family_of(chip_name),
            healthy=self._healthy(dcmi, card, device, where),
        )

    def _driver(self, dcmi: Dcmi) -> str:
        return self._try(dcmi.driver_version, default="") or version_info(self._root / DRIVER_VERSION_FILE)

    def cards(self, pci: Sequence[PciDevice]) -> list[Card]:
        dcmi = self._library()
        by_address = {device.address: device for device in pci}
        driver = self._driver(dcmi)
        runtime = brief_version(cann_version(self._root, self._environ))
        cards = []
        for card, device in self._npus(dcmi):
            try:
                found = self._card(dcmi, card, device, driver, runtime)
            except (CallError, ValueError, OverflowError) as exc:
                log.warning("DCMI cannot read ascend NPU card=%s device=%s: %s", card, device, exc)
                continue
            if found.pci_bus_id not in by_address:
                log.warning(
                    "DCMI places ascend NPU %s at %s, where the bus shows none", found.uuid, found.pci_bus_id
                )
            cards.append(with_topology(found, by_address.get(found.pci_bus_id)))
        return cards

    def metrics(self) -> list[Metrics]:
        dcmi = self._library()
        readings = []
        for card, device in self._npus(dcmi):
            try:
                logic = dcmi.logic_id(card, device)
                uuid = self._uuid(dcmi, card, device, normalize_bus_id(dcmi.bus_id(card, device)))
            except CallError as exc:
                log.debug("DCMI cannot read ascend NPU card=%s device=%s: %s", card, device, exc)
                continue
            memory = self._try(dcmi.memory, card, device, default=None)
            readings.append(
                Metrics(
                    manufacturer=MANUFACTURER,
                    uuid=uuid,
                    index=logic,
                    healthy=self._healthy(dcmi, card, device, f"card={card} device={device}"),
                    memory_total_mib=memory.total_mib if memory else -1,
                    memory_used_mib=memory.used_mib if memory else -1,
                    utilization_percent=self._try(dcmi.aicore_utilization, card, device, default=-1),
                    temperature_c=self._try(dcmi.temperature, card, device, default=-1),
                )
            )
        return readings


def detector() -> AscendDetector:
    """The ascend detector: DCMI, loaded when the bus first shows an Ascend card."""
    return AscendDetector()
