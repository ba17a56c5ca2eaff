"""What the detectors of libraries that number their cards 0..n-1 (MXSML, IXML, MTML) share.

MetaX's MXSML, Iluvatar's IXML and Moore Threads' MTML all open once, count the cards, and answer per card
index. Each vendor module says how one card is read (``CardReader``; ``BindingReader`` where the binding
answers every fact by index, as IXML's and MTML's do); this module does the rest the same
way for all of them, as the Ascend detector does for DCMI: the library is opened on first use and kept
open (a refusal to initialise becomes LibraryUnavailableError, so the node falls back to PCI facts), a
card that cannot be read is left out with a warning (the bus then reports it unhealthy), topology comes
from the bus, and ``Checks`` turns implausible answers into 0 and a failing health query into an
unhealthy card, each with a warning naming the card.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Final, Protocol, TypeVar

from gpustack_operator.device_manager.detector.pci import PciDevice, bus_name, normalize_bus_id, with_topology
from gpustack_operator.device_manager.detector.vendor import CallError, LibraryUnavailableError
from gpustack_operator.device_manager.model import Card, Metrics

log = logging.getLogger(__name__)

T = TypeVar("T")
MAX_CARDS: Final = 256
"""More cards than any node holds: a larger count is garbage, not cards."""
MAX_MEMORY_MIB: Final = 1 << 22
"""4 TiB: no card has more; a larger answer is garbage, not memory."""
MAX_CORES: Final = 1 << 20


class CardReader(Protocol):
    """One vendor library, opened: its card count and each card's facts. Failures are CallError."""

    def count(self) -> int: ...

    def card(self, index: int) -> Card:
        """The card at ``index`` without topology (the detector adds it from the bus)."""
        ...

    def metrics(self, index: int) -> Metrics: ...


class Usage(Protocol):
    @property
    def total_mib(self) -> int: ...

    @property
    def used_mib(self) -> int: ...


class Binding(Protocol):
    """A library binding that answers each fact by card index (IXML's and MTML's do)."""

    def count(self) -> int: ...

    def name(self, index: int) -> str: ...

    def uuid(self, index: int) -> str: ...

    def bus_id(self, index: int) -> str: ...

    def memory(self, index: int) -> Usage: ...

    def cores(self, index: int) -> int: ...

    def utilization(self, index: int) -> int: ...

    def temperature(self, index: int) -> int: ...


class Checks:
    """Sanity checks on one library's answers, logged with the manufacturer and library they came from."""

    def __init__(self, manufacturer: str, library: str) -> None:
        self.manufacturer = manufacturer
        self.library = library

    def where(self, index: int) -> str:
        return f"{self.manufacturer} card {index}"

    def plausible(self, value: int, limit: int, what: str, index: int) -> int:
        """``value`` when in [0, limit]; 0 with a warning otherwise."""
        if 0 <= value <= limit:
            return value
        log.warning(
            "%s answered %s=%s for %s, which cannot be right; reporting 0",
            self.library,
            what,
            value,
            self.where(index),
        )
        return 0

    def attempt(self, call: Callable[..., T], *args: int, default: T) -> T:
        """``call(*args)``, or ``default`` when the library cannot answer (an optional fact)."""
        try:
            return call(*args)
        except CallError as exc:
            log.debug("%s: %s", self.library, exc)
            return default

    def healthy(self, query: Callable[[int], bool | None], index: int) -> bool:
        """``query(index)``: True, False, or None where the library cannot judge (healthy: nothing says
        otherwise). A query that fails marks the card unhealthy: the library can no longer read it."""
        try:
            verdict = query(index)
        except CallError as exc:
            log.warning(
                "%s cannot read the health of %s (%s); reporting it unhealthy",
                self.library,
                self.where(index),
                exc,
            )
            return False
        return verdict is not False


class BindingReader:
    """A ``CardReader`` over a ``Binding``: name, UUID (the bus address when the card gives none), VRAM,
    cores and bus address from the binding; node-wide versions and the optional per-card facts
    (device-node number, compute capability) from the vendor module; health from ``health``."""

    def __init__(
        self,
        checks: Checks,
        binding: Binding,
        health: Callable[[int], bool | None],
        *,
        driver: str = "",
        runtime: str = "",
        minor: Callable[[int], int] | None = None,
        compute_capability: Callable[[int], str] | None = None,
    ) -> None:
        self._checks, self._binding, self._health = checks, binding, health
        self._driver, self._runtime = driver, runtime
        self._minor, self._compute_capability = minor, compute_capability

    def count(self) -> int:
        return self._binding.count()

    def _uuid(self, index: int) -> str:
        return self._binding.uuid(index) or bus_name(normalize_bus_id(self._binding.bus_id(index)))

    def card(self, index: int) -> Card:
        binding, checks = self._binding, self._checks
        memory = checks.attempt(binding.memory, index, default=None)
        cores = checks.attempt(binding.cores, index, default=0)
        return Card(
            manufacturer=checks.manufacturer,
            product=binding.name(index),
            memory_mib=checks.plausible(memory.total_mib if memory else 0, MAX_MEMORY_MIB, "VRAM MiB", index),
            uuid=self._uuid(index),
            index=index,
            minor=checks.attempt(self._minor, index, default=-1) if self._minor else -1,
            pci_bus_id=normalize_bus_id(binding.bus_id(index)),
            cores=checks.plausible(cores, MAX_CORES, "cores", index),
            driver_version=self._driver,
            runtime_version=self._runtime,
            compute_capability=(
                checks.attempt(self._compute_capability, index, default="")
                if self._compute_capability
                else ""
            ),
            healthy=checks.healthy(self._health, index),
        )

    def metrics(self, index: int) -> Metrics:
        binding, checks = self._binding, self._checks
        memory = checks.attempt(binding.memory, index, default=None)
        return Metrics(
            manufacturer=checks.manufacturer,
            uuid=self._uuid(index),
            index=index,
            healthy=checks.healthy(self._health, index),
            memory_total_mib=memory.total_mib if memory else -1,
            memory_used_mib=memory.used_mib if memory else -1,
            utilization_percent=checks.attempt(binding.utilization, index, default=-1),
            temperature_c=checks.attempt(binding.temperature, index, default=-1),
        )


class IndexedDetector:
    """A ``VendorDetector`` over a ``CardReader`` opened on first use and kept open."""

    def __init__(self, manufacturer: str, library: str, open_reader: Callable[[], CardReader]) -> None:
        self.manufacturer = manufacturer
        self._label = library
        self._open = open_reader
        self._reader: CardReader | None = None

    def _library(self) -> CardReader:
        if self._reader is None:
            try:
                self._reader = self._open()
            except CallError as exc:
                raise LibraryUnavailableError(f"{self._label} cannot be initialised: {exc}") from exc
        return self._reader

    def _indexes(self, reader: CardReader) -> range:
        try:
            count = reader.count()
        except CallError as exc:
            raise LibraryUnavailableError(f"{self._label} cannot count the cards: {exc}") from exc
        if not 0 <= count <= MAX_CARDS:
            raise LibraryUnavailableError(f"{self._label} counts {count} cards, which cannot be right")
        return range(count)

    def cards(self, pci: Sequence[PciDevice]) -> list[Card]:
        reader = self._library()
        by_address = {device.address: device for device in pci}
        cards = []
        for index in self._indexes(reader):
            try:
                found = reader.card(index)
            except (CallError, ValueError, OverflowError) as exc:
                log.warning("%s cannot read %s card %s: %s", self._label, self.manufacturer, index, exc)
                continue
            if found.pci_bus_id not in by_address:
                log.warning(
                    "%s places %s card %s at %s, where the bus shows none",
                    self._label,
                    self.manufacturer,
                    found.uuid,
                    found.pci_bus_id,
                )
            cards.append(with_topology(found, by_address.get(found.pci_bus_id)))
        return cards

    def metrics(self) -> list[Metrics]:
        reader = self._library()
        readings = []
        for index in self._indexes(reader):
            try:
                readings.append(reader.metrics(index))
            except (CallError, ValueError, OverflowError) as exc:
                log.debug("%s cannot read %s card %s: %s", self._label, self.manufacturer, index, exc)
        return readings
