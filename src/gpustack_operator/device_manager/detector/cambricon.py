"""Cambricon MLUs through CNDev (the driver's `libcndev.so`, called through our binding in ``cndev``).

Without CNDev a Cambricon node reports VRAM 0, so its `.sliced.*` capacities are zero and a broken MLU
stays healthy. CNDev gives per MLU: the name (`MLU370-X8`, the product the group ID comes from), memory
in MiB, MLU cores, the driver version, the UUID (`MLU-...`), the PCI address and the health flag; its
index in CNDev's enumeration is our index, which is what `CAMBRICON_VISIBLE_DEVICES` and the
`/dev/cambricon_dev<N>` nodes the allocator hands out are numbered by. The runtime version is not
CNDev's: it is the Neuware (CNToolkit) version from `$NEUWARE_HOME/version.txt`, as major.minor.

An MLU is unhealthy when CNDev's health flag reads 0 (in problem) or a value CNDev does not define, or
when its health query fails (logged as a warning); a driver that does not offer the health query falls
back to uncorrected ECC errors. The manufacturer table makes Cambricon cards logically sliceable (16
slices, compute partitioned); sliced containers get the whole card (no sMLU profile is created).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

from gpustack_operator.device_manager.detector.native import (
    IndexedDetector,
    NodeFacts,
    brief_version,
    toolkit_version,
    version_in_file,
)
from gpustack_operator.device_manager.detector.pci import bus_name, normalize_bus_id
from gpustack_operator.device_manager.model import Card, Metrics

if TYPE_CHECKING:
    from gpustack_operator.device_manager.detector.cndev import Cndev

MANUFACTURER: Final = "cambricon"
LIBRARY: Final = "CNDev"
MAX_CORES: Final = 4096
NEUWARE_HOME: Final = "usr/local/neuware"
HEALTHY, IN_PROBLEM = 1, 0


def neuware_version(root: Path = Path("/"), environ: Mapping[str, str] = os.environ) -> str:
    """The Neuware (CNToolkit) version (`1.17.0`) from `version.txt` in `$NEUWARE_HOME` or the default."""
    return toolkit_version(
        environ, ("NEUWARE_HOME",), [root / NEUWARE_HOME], lambda home: version_in_file(home / "version.txt")
    )


def _open_cndev() -> Cndev:
    from gpustack_operator.device_manager.detector.cndev import Cndev

    return Cndev.open()


class CambriconDetector(IndexedDetector["Cndev"]):
    """Reads every MLU through CNDev; the library is loaded on first use and kept open."""

    manufacturer = MANUFACTURER
    label = "Cambricon CNDev"
    noun = "MLU"

    def __init__(
        self,
        open_library: Callable[[], Cndev] = _open_cndev,
        root: Path = Path("/"),
        environ: Mapping[str, str] = os.environ,
    ) -> None:
        super().__init__(open_library)
        self._root = root
        self._environ = environ

    def node_facts(self, lib: Cndev) -> NodeFacts:
        return NodeFacts(runtime_version=brief_version(neuware_version(self._root, self._environ)))

    def _healthy(self, lib: Cndev, handle: int, where: str) -> bool:
        state = lib.health(handle)
        if state is None:
            return self.attempt(lib.uncorrectable_ecc, handle, default=0) == 0
        if state not in (HEALTHY, IN_PROBLEM):
            return self.undefined_health(state, where)
        return state == HEALTHY

    def read_card(self, lib: Cndev, device: int, node: NodeFacts) -> Card:
        where = self.where(device)
        handle = lib.handle(device)
        bus_id = normalize_bus_id(lib.bus_id(handle))
        memory = self.attempt(lib.memory, handle, default=None)
        return Card(
            manufacturer=MANUFACTURER,
            product=self.attempt(lib.name, handle, default="") or "MLU",
            memory_mib=self.memory_mib(memory.total_mib if memory else None, where),
            uuid=self.attempt(lib.uuid, handle, default="") or bus_name(bus_id),
            index=device,
            pci_bus_id=bus_id,
            cores=self.plausible(self.attempt(lib.cores, handle, default=0), MAX_CORES, "MLU cores", where),
            driver_version=self.attempt(lib.driver_version, handle, default=""),
            runtime_version=node.runtime_version,
            healthy=self.checked_health(lambda: self._healthy(lib, handle, where), where),
        )

    def read_metrics(self, lib: Cndev, device: int) -> Metrics:
        where = self.where(device)
        handle = lib.handle(device)
        memory = self.attempt(lib.memory, handle, default=None)
        uuid = self.attempt(lib.uuid, handle, default="")
        return Metrics(
            manufacturer=MANUFACTURER,
            uuid=uuid or bus_name(normalize_bus_id(lib.bus_id(handle))),
            index=device,
            healthy=self.checked_health(lambda: self._healthy(lib, handle, where), where),
            memory_total_mib=memory.total_mib if memory else -1,
            memory_used_mib=memory.used_mib if memory else -1,
            utilization_percent=self.attempt(lib.utilization, handle, default=-1),
            temperature_c=self.attempt(lib.temperature, handle, default=-1),
        )


def detector() -> CambriconDetector:
    """The cambricon detector: CNDev, loaded when the bus first shows a Cambricon card."""
    return CambriconDetector()
