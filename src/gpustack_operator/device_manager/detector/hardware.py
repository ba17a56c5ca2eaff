"""The real-hardware backend: the PCI bus says which cards are there, vendor libraries say what they are.

For each selected manufacturer it scans the bus once, asks the manufacturer's library for detail, and
fills topology in from the bus. A card the library cannot describe (library missing, driver not loaded,
or the library does not see a card the bus shows) is still reported, from PCI facts, with the reason in
``detail_missing``; with ``require_library`` (the `nvml` backend) such a failure is an error instead.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from gpustack_operator.device_manager.detector import (
    amd,
    ascend,
    cambricon,
    hygon,
    iluvatar,
    metax,
    mthreads,
    nvidia,
    thead,
)
from gpustack_operator.device_manager.detector import pci as pcibus
from gpustack_operator.device_manager.detector.vendor import LibraryUnavailableError, VendorDetector
from gpustack_operator.device_manager.model import Card, Metrics
from gpustack_operator.rules.environ import DEFAULT_ENVIRON, Environ
from gpustack_operator.rules.naming.manufacturers import manufacturers as known_manufacturers

log = logging.getLogger(__name__)

_NATIVE = (ascend, cambricon, hygon, iluvatar, metax, mthreads, nvidia, thead)
"""Vendors read through ``native.NativeDetector`` over our own ctypes bindings."""


def vendor_detectors() -> dict[str, VendorDetector]:
    """One detector per manufacturer: NVML for NVIDIA, amdsmi for AMD, DCMI for Ascend, CNDev for
    Cambricon, ROCm SMI for Hygon, IXML, MXSML, MTML and HGML for Iluvatar, MetaX, Moore Threads and
    T-Head. Constructing them loads nothing: each loads its library when its cards are first on the bus."""
    detectors: dict[str, VendorDetector] = {
        amd.MANUFACTURER: amd.AmdSmiDetector(),
    }
    detectors.update({module.MANUFACTURER: module.detector() for module in _NATIVE})
    return detectors


class HardwareBackend:
    """Cards of the selected manufacturers on this machine."""

    def __init__(
        self,
        manufacturers: Iterable[str],
        *,
        detectors: Mapping[str, VendorDetector] | None = None,
        use_libraries: bool = True,
        require_library: bool = False,
        pci_check: bool = True,
        class_prefixes: Sequence[str] = ("02", "03", "0b", "12"),
        sysfs: Path = pcibus.SYSFS,
        model_names: pcibus.ModelNames | None = None,
        environ: Environ = DEFAULT_ENVIRON,
    ) -> None:
        known = known_manufacturers(environ)
        self._manufacturers = [known[name] for name in sorted(set(manufacturers))]
        self._detectors = dict(detectors) if detectors is not None else vendor_detectors()
        self._use_libraries = use_libraries
        self._require_library = require_library
        self._pci_check = pci_check
        self._class_prefixes = tuple(class_prefixes)
        self._sysfs = sysfs
        self._names = pcibus.BusNames(model_names or pcibus.default_names(sysfs))
        self._reported: dict[str, str] = {}
        self.name = "nvml" if require_library else ("auto" if use_libraries else "pci")

    def _note(self, manufacturer: str, reason: str) -> None:
        """Log why detail is missing once per change, not once per detection period."""
        if self._reported.get(manufacturer) != reason:
            self._reported[manufacturer] = reason
            if reason:
                log.warning("%s cards reported from PCI facts only: %s", manufacturer, reason)

    def _library_cards(self, name: str, found: Sequence[pcibus.PciDevice]) -> list[Card]:
        detector = self._detectors.get(name)
        if detector is None:
            raise LibraryUnavailableError(f"no detector for manufacturer {name}")
        cards = detector.cards(found)
        seen = {card.pci_bus_id for card in cards}
        unseen = [device for device in found if device.address not in seen]
        reason = f"the {name} library does not see this card" if cards else ""
        extra = [pcibus.pci_card(name, dev, len(cards) + i, reason, False) for i, dev in enumerate(unseen)]
        return cards + (extra if cards else [])

    def detect(self) -> list[Card]:
        bus = pcibus.scan(self._sysfs, self._names)
        cards: list[Card] = []
        for mfr in self._manufacturers:
            found = [device for device in bus if device.belongs_to(mfr, self._class_prefixes)]
            if not found and self._pci_check:
                continue
            try:
                if not self._use_libraries:
                    raise LibraryUnavailableError("vendor libraries disabled (--backend pci)")
                cards += self._library_cards(mfr.name, found)
                self._note(mfr.name, "")
            except LibraryUnavailableError as exc:
                if self._require_library:
                    raise
                self._note(mfr.name, str(exc))
                cards += [pcibus.pci_card(mfr.name, dev, i, str(exc)) for i, dev in enumerate(found)]
        return cards

    def metrics(self) -> list[Metrics]:
        """Library readings where a library describes the cards; health alone (from detection) elsewhere."""
        cards = self.detect()
        readings: list[Metrics] = []
        covered: set[str] = set()
        for name in sorted({card.manufacturer for card in cards if not card.detail_missing}):
            try:
                readings += self._detectors[name].metrics()
                covered.add(name)
            except LibraryUnavailableError as exc:
                log.debug("no %s readings: %s", name, exc)
        readings += [
            Metrics(card.manufacturer, card.uuid, card.index, card.healthy)
            for card in cards
            if card.manufacturer not in covered
        ]
        return readings
