"""What every detector over one of our own ctypes bindings (``clib``) does, whatever the vendor.

A vendor library without a Python binding is opened on first use and kept open; a library that will not
load or initialise, or cannot list its cards, is a missing library (``LibraryUnavailableError``), so the
hardware backend reports the bus's cards from PCI facts instead. Each card is read on its own: one the
library cannot identify is left out with a warning (the bus then reports it, unhealthy) rather than
costing the node every card, though a library that can read none of them counts as missing. An
implausible number reads 0 with a warning; a health query that fails marks the card unhealthy with a
warning (a card the library can no longer read is not one to schedule on); topology comes from the bus.
``NativeDetector`` holds that life cycle and those rules, and a vendor's detector says only how its
library lists cards, reads one, and reads its live metrics.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from gpustack_operator.device_manager.detector.pci import PciDevice, with_topology
from gpustack_operator.device_manager.detector.vendor import CallError, LibraryUnavailableError
from gpustack_operator.device_manager.model import Card, Metrics

log = logging.getLogger(__name__)

L = TypeVar("L")
"""The vendor's binding object (``Cndev``, ...)."""
D = TypeVar("D")
"""How the library addresses one card (an index, a handle, a (card, device) pair)."""
T = TypeVar("T")

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
        """``call(*args)``, or ``default`` when the library answers an error (logged at debug)."""
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

    def checked_health(self, query: Callable[[], bool], where: str) -> bool:
        """``query()``; False with a warning when the library cannot answer it."""
        try:
            return query()
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
