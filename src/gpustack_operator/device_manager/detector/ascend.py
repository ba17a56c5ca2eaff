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

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypeVar

from gpustack_operator.device_manager.detector.native import (
    NativeDetector,
    NodeFacts,
    brief_version,
    toolkit_version,
)
from gpustack_operator.device_manager.detector.pci import bus_name, normalize_bus_id
from gpustack_operator.device_manager.model import Card, Metrics

if TYPE_CHECKING:
    from gpustack_operator.device_manager.detector.dcmi import Dcmi

MANUFACTURER: Final = "ascend"
LIBRARY: Final = "DCMI"
MAJOR_ALARM: Final = 2
HEALTH_STATES: Final = range(4)
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


class AscendDetector(NativeDetector["Dcmi", "tuple[int, int]"]):
    """Reads every Ascend NPU through DCMI; the library is loaded on first use and kept open. DCMI
    addresses an NPU as (card ID, chip in card), MCUs and CPUs of a card left out."""

    manufacturer = MANUFACTURER
    label = "Ascend DCMI"
    noun = "NPU"

    def __init__(
        self,
        open_library: Callable[[], Dcmi] = _open_dcmi,
        root: Path = Path("/"),
        environ: Mapping[str, str] = os.environ,
    ) -> None:
        super().__init__(open_library)
        self._root = root
        self._environ = environ

    def devices(self, lib: Dcmi) -> list[tuple[int, int]]:
        return [(card, device) for card, device in lib.devices() if lib.is_npu(card, device)]

    def where(self, device: tuple[int, int]) -> str:
        return "card={} device={}".format(*device)

    def node_facts(self, lib: Dcmi) -> NodeFacts:
        driver = self.attempt(lib.driver_version, default="") or version_info(
            self._root / DRIVER_VERSION_FILE
        )
        return NodeFacts(driver, brief_version(cann_version(self._root, self._environ)))

    def _uuid(self, dcmi: Dcmi, card: int, device: int, bus_id: str) -> str:
        """The SoC die; a chip whose die is unreadable is named by its bus address, as PCI facts name it."""
        return self.attempt(dcmi.die, card, device, default=bus_name(bus_id))

    def _healthy(self, dcmi: Dcmi, card: int, device: int) -> bool:
        state = dcmi.health(card, device)
        if state is not None and state not in HEALTH_STATES:
            return self.undefined_health(state, self.where((card, device)))
        ecc = self.attempt(dcmi.uncorrectable_ecc, card, device, default=0)
        return (state or 0) < MAJOR_ALARM and ecc == 0

    def read_card(self, lib: Dcmi, device: tuple[int, int], node: NodeFacts) -> Card:
        card, chip = device
        where = self.where(device)
        chip_type, chip_name, cores = lib.chip(card, chip)
        logic = lib.logic_id(card, chip)
        bus_id = normalize_bus_id(lib.bus_id(card, chip))
        memory = self.attempt(lib.memory, card, chip, default=None)
        return Card(
            manufacturer=MANUFACTURER,
            product=product_of(chip_type or "Ascend", chip_name),
            memory_mib=self.memory_mib(memory.total_mib if memory else None, where),
            uuid=self._uuid(lib, card, chip, bus_id),
            index=logic,
            minor=lib.physical_id(logic),
            pci_bus_id=bus_id,
            cores=self.plausible(cores, MAX_AICORES, "AI cores", where),
            driver_version=node.driver_version,
            runtime_version=node.runtime_version,
            family=family_of(chip_name),
            healthy=self.checked_health(lambda: self._healthy(lib, card, chip), where),
        )

    def read_metrics(self, lib: Dcmi, device: tuple[int, int]) -> Metrics:
        card, chip = device
        logic = lib.logic_id(card, chip)
        uuid = self._uuid(lib, card, chip, normalize_bus_id(lib.bus_id(card, chip)))
        memory = self.attempt(lib.memory, card, chip, default=None)
        return Metrics(
            manufacturer=MANUFACTURER,
            uuid=uuid,
            index=logic,
            healthy=self.checked_health(lambda: self._healthy(lib, card, chip), self.where(device)),
            memory_total_mib=memory.total_mib if memory else -1,
            memory_used_mib=memory.used_mib if memory else -1,
            utilization_percent=self.attempt(lib.aicore_utilization, card, chip, default=-1),
            temperature_c=self.attempt(lib.temperature, card, chip, default=-1),
        )


def detector() -> AscendDetector:
    """The ascend detector: DCMI, loaded when the bus first shows an Ascend card."""
    return AscendDetector()
