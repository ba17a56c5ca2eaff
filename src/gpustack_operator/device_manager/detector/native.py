"""What every detector over one of our own ctypes bindings (``clib``) does, whatever the vendor.

A vendor library without a Python binding is opened on first use and kept open; a library that will not
load or initialise, or cannot list its cards (or lists more than a node holds), is a missing library
(``LibraryUnavailableError``), so the hardware backend reports the bus's cards from PCI facts instead.
Each card is read on its own: one the library cannot identify is left out with a warning (the bus then
reports it, unhealthy) rather than costing the node every card, though a library that can read none of
them counts as missing. An implausible number reads 0 with a warning; a health query that fails marks
the card unhealthy with a warning (a card the library can no longer read is not one to schedule on); one
the driver does not offer leaves it healthy; topology comes from the bus.

``NativeDetector`` holds that life cycle and those rules, and a vendor's detector says only how its
library lists cards, reads one, and reads its live metrics: DCMI (Ascend) lists (card, chip) pairs;
every other library numbers its cards 0..n-1 (``IndexedDetector``), and those whose binding answers each
fact by card index in the same words (IXML, MTML, HGML) need no more than ``BindingDetector``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Generic, Protocol, TypeVar

from gpustack_operator.device_manager.detector.pci import PciDevice, bus_name, normalize_bus_id, with_topology
from gpustack_operator.device_manager.detector.vendor import CallError, LibraryUnavailableError
from gpustack_operator.device_manager.model import Card, Metrics

log = logging.getLogger(__name__)

L = TypeVar("L")
"""The vendor's binding object (``Cndev``, ...)."""
D = TypeVar("D")
"""How the library addresses one card (an index, a handle, a (card, device) pair)."""
T = TypeVar("T")

MAX_CARDS: Final = 256
"""More cards than any node holds: a larger count is garbage, not cards."""
MAX_MEMORY_MIB: Final = 1 << 22
"""4 TiB: no card has more; a larger answer is garbage, not memory."""
MAX_CORES: Final = 1 << 20

_VERSION = re.compile(r"\d+\.\d+(?:\.\d+)*")


@dataclass(frozen=True)
class NodeFacts:
    """What the library (or the vendor's install) says once per node rather than per card."""

    driver_version: str = ""
    runtime_version: str = ""


def brief_version(version: str) -> str:
    """`5.10.22` -> `5.10` (major.minor, as the runtime version label carries CUDA's); "" stays ""."""
    return ".".join(version.split(".")[:2])


def toolkit_version(
    environ: Mapping[str, str],
    variables: Sequence[str],
    defaults: Iterable[Path],
    read: Callable[[Path], str],
) -> str:
    """A vendor toolkit's version: ``read(home)`` of the home named by the first of ``variables`` set in
    ``environ``, else of each default home in turn; "" when none gives one."""
    configured = next((environ[name] for name in variables if environ.get(name)), "")
    for home in [*([Path(configured)] if configured else []), *defaults]:
        version = read(home)
        if version:
            return version
    return ""


def version_in_file(path: Path) -> str:
    """The first dotted version number (`1.17.0`) in ``path``; "" when absent or unreadable."""
    try:
        content = path.read_text(errors="ignore")
    except OSError:
        return ""
    match = _VERSION.search(content)
    return match.group() if match else ""


class NativeDetector(Generic[L, D]):
    """One manufacturer's cards through its ctypes binding. Subclasses set ``manufacturer`` and
    ``label`` (`Cambricon CNDev`) and implement ``devices``, ``read_card`` and ``read_metrics``."""

    manufacturer: str
    label: str
    noun: str = "card"
    """What the vendor calls a card in messages (`MLU`, `DCU`)."""

    def __init__(self, open_library: Callable[[], L]) -> None:
        self._open = open_library
        self._lib: L | None = None

    # -- what a vendor supplies ------------------------------------------------------------------

    def devices(self, lib: L) -> Sequence[D]:
        """Every card the library lists; CallError when the list itself cannot be read."""
        raise NotImplementedError

    def node_facts(self, lib: L) -> NodeFacts:
        """Versions that hold for every card of the node (read once per detection)."""
        return NodeFacts()

    def read_card(self, lib: L, device: D, node: NodeFacts) -> Card:
        """One card, bus address included; CallError (or ValueError) when it cannot be identified."""
        raise NotImplementedError

    def read_metrics(self, lib: L, device: D) -> Metrics:
        """One card's live readings; CallError when it cannot be identified."""
        raise NotImplementedError

    def where(self, device: D) -> str:
        """How messages name the card (`index 3`)."""
        return f"index {device}"

    # -- shared --------------------------------------------------------------------------------------

    def library(self) -> L:
        if self._lib is None:
            try:
                self._lib = self._open()
            except CallError as exc:
                raise LibraryUnavailableError(f"{self.label} cannot be initialised: {exc}") from exc
        return self._lib

    def _listed(self, lib: L) -> Sequence[D]:
        try:
            return self.devices(lib)
        except CallError as exc:
            raise LibraryUnavailableError(f"{self.label} cannot list the {self.noun}s: {exc}") from exc

    def attempt(self, call: Callable[..., T], *args: object, default: T) -> T:
        """``call(*args)``, or ``default`` when the library answers an error (an optional fact; logged
        at debug)."""
        try:
            return call(*args)
        except CallError as exc:
            log.debug("%s: %s", self.label, exc)
            return default

    def plausible(self, value: int, limit: int, what: str, where: str) -> int:
        """``value`` when within [0, limit]; 0 with a warning otherwise (garbage, not a fact)."""
        if 0 <= value <= limit:
            return value
        log.warning(
            "%s answered %s=%s for %s %s %s, which cannot be right; reporting 0",
            self.label,
            what,
            value,
            self.manufacturer,
            self.noun,
            where,
        )
        return 0

    def checked_health(self, query: Callable[[], bool | None], where: str) -> bool:
        """``query()``: True, False, or None where the library cannot judge (healthy: nothing says
        otherwise); False with a warning when the query fails (the library can no longer read the card)."""
        try:
            verdict = query()
        except CallError as exc:
            log.warning(
                "%s cannot read the health of %s %s %s (%s); reporting it unhealthy",
                self.label,
                self.manufacturer,
                self.noun,
                where,
                exc,
            )
            return False
        return verdict is not False

    def undefined_health(self, state: int, where: str) -> bool:
        """False, with a warning that ``state`` is no health state the library defines."""
        log.warning(
            "%s answered health %s for %s %s %s, not a state it defines; unhealthy",
            self.label,
            state,
            self.manufacturer,
            self.noun,
            where,
        )
        return False

    def memory_mib(self, total: int | None, where: str) -> int:
        """``total`` MiB when plausible; 0 with a warning when it is not, or when it cannot be read (None)."""
        if total is None:
            log.warning(
                "%s cannot read the memory of %s %s %s; reporting 0 MiB",
                self.label,
                self.manufacturer,
                self.noun,
                where,
            )
            return 0
        return self.plausible(total, MAX_MEMORY_MIB, "memory MiB", where)

    def cards(self, pci: Sequence[PciDevice]) -> list[Card]:
        lib = self.library()
        by_address = {device.address: device for device in pci}
        node = self.node_facts(lib)
        cards = []
        listed = self._listed(lib)
        failure: Exception | None = None
        for device in listed:
            try:
                found = self.read_card(lib, device, node)
            except (CallError, ValueError, OverflowError) as exc:
                failure = exc
                log.warning(
                    "%s cannot read %s %s %s: %s",
                    self.label,
                    self.manufacturer,
                    self.noun,
                    self.where(device),
                    exc,
                )
                continue
            if found.pci_bus_id not in by_address:
                log.warning(
                    "%s places %s %s %s at %s, where the bus shows none",
                    self.label,
                    self.manufacturer,
                    self.noun,
                    found.uuid,
                    found.pci_bus_id,
                )
            cards.append(with_topology(found, by_address.get(found.pci_bus_id)))
        if listed and not cards:
            # Not one card readable is the library failing (a driver too old for a call every card
            # needs), not every card breaking: report the bus's cards from PCI facts, saying why.
            raise LibraryUnavailableError(
                f"{self.label} lists {len(listed)} {self.noun}s but cannot read any (last: {failure})"
            )
        return cards

    def metrics(self) -> list[Metrics]:
        lib = self.library()
        readings = []
        for device in self._listed(lib):
            try:
                readings.append(self.read_metrics(lib, device))
            except (CallError, ValueError, OverflowError) as exc:
                log.debug("%s cannot read %s %s: %s", self.label, self.noun, self.where(device), exc)
        return readings


class Counted(Protocol):
    def count(self) -> int:
        """The number of cards, numbered 0..count-1; CallError when it cannot be read."""
        ...


C = TypeVar("C", bound=Counted)


class IndexedDetector(NativeDetector[C, int]):
    """A library that numbers its cards 0..n-1 (every one here but DCMI); a count past ``MAX_CARDS``
    is garbage, and the node falls back to PCI facts."""

    def devices(self, lib: C) -> range:
        count = lib.count()
        if not 0 <= count <= MAX_CARDS:
            raise LibraryUnavailableError(f"{self.label} counts {count} {self.noun}s, which cannot be right")
        return range(count)


class Usage(Protocol):
    @property
    def total_mib(self) -> int: ...

    @property
    def used_mib(self) -> int: ...


class IndexedBinding(Counted, Protocol):
    """A library binding that answers each fact by card index (IXML's, MTML's and HGML's do); every
    failure is CallError."""

    def driver_version(self) -> str: ...

    def runtime_version(self) -> str:
        """The vendor runtime's version the driver implements (major.minor); "" when it names none."""
        ...

    def name(self, index: int) -> str: ...

    def uuid(self, index: int) -> str: ...

    def bus_id(self, index: int) -> str: ...

    def memory(self, index: int) -> Usage: ...

    def cores(self, index: int) -> int: ...

    def health(self, index: int) -> bool | None:
        """False when the card reports a fault; None when this driver cannot say."""
        ...

    def utilization(self, index: int) -> int: ...

    def temperature(self, index: int) -> int: ...


B = TypeVar("B", bound=IndexedBinding)


class BindingDetector(IndexedDetector[B]):
    """Cards read through an ``IndexedBinding``: name, UUID (the bus address when the card gives none), VRAM,
    cores, bus address and health from the binding, driver and runtime versions per node; a vendor adds
    the facts only its library has (``minor``, ``compute_capability``). Messages name a card by index."""

    def where(self, device: int) -> str:
        return str(device)

    def minor(self, lib: B, index: int) -> int:
        """The card's device-node number; -1 where the vendor's library does not say."""
        return -1

    def compute_capability(self, lib: B, index: int) -> str:
        return ""

    def node_facts(self, lib: B) -> NodeFacts:
        return NodeFacts(
            self.attempt(lib.driver_version, default=""), self.attempt(lib.runtime_version, default="")
        )

    def _uuid(self, lib: B, index: int) -> str:
        return lib.uuid(index) or bus_name(normalize_bus_id(lib.bus_id(index)))

    def read_card(self, lib: B, device: int, node: NodeFacts) -> Card:
        where = self.where(device)
        memory = self.attempt(lib.memory, device, default=None)
        return Card(
            manufacturer=self.manufacturer,
            product=lib.name(device),
            memory_mib=self.plausible(memory.total_mib if memory else 0, MAX_MEMORY_MIB, "VRAM MiB", where),
            uuid=self._uuid(lib, device),
            index=device,
            minor=self.attempt(self.minor, lib, device, default=-1),
            pci_bus_id=normalize_bus_id(lib.bus_id(device)),
            cores=self.plausible(self.attempt(lib.cores, device, default=0), MAX_CORES, "cores", where),
            driver_version=node.driver_version,
            runtime_version=node.runtime_version,
            compute_capability=self.attempt(self.compute_capability, lib, device, default=""),
            healthy=self.checked_health(lambda: lib.health(device), where),
        )

    def read_metrics(self, lib: B, device: int) -> Metrics:
        memory = self.attempt(lib.memory, device, default=None)
        return Metrics(
            manufacturer=self.manufacturer,
            uuid=self._uuid(lib, device),
            index=device,
            healthy=self.checked_health(lambda: lib.health(device), self.where(device)),
            memory_total_mib=memory.total_mib if memory else -1,
            memory_used_mib=memory.used_mib if memory else -1,
            utilization_percent=self.attempt(lib.utilization, device, default=-1),
            temperature_c=self.attempt(lib.temperature, device, default=-1),
        )
