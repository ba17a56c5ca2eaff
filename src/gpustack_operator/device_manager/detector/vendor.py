"""What a per-manufacturer detector is, and the errors a vendor library answers with.

Each manufacturer module under ``detector/`` offers one ``VendorDetector``: given the manufacturer's PCI
functions it returns full ``Card``s from the vendor's management library, or raises
``LibraryUnavailableError`` saying why it cannot (package not installed, shared library missing, driver not
loaded). The hardware backend then reports those cards from PCI facts alone, so the node is never
silently empty.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from gpustack_operator.device_manager.detector.pci import PciDevice
from gpustack_operator.device_manager.model import Card, DetectionError, Metrics


class LibraryUnavailableError(DetectionError):
    """The vendor library cannot be used on this node; the message is what `detail_missing` reports."""


class CallError(Exception):
    """A vendor library call answered an error code (``code`` None: the library lacks the function).

    Raised by our ctypes bindings (``clib``); defined here so a detector can catch it without importing
    ctypes before its vendor's cards are found.
    """

    def __init__(self, function: str, code: int | None) -> None:
        reason = "not exported by this library version" if code is None else f"returned {code}"
        super().__init__(f"{function} {reason}")
        self.function = function
        self.code = code


class VendorDetector(Protocol):
    """Full detail of one manufacturer's cards from its management library."""

    manufacturer: str

    def cards(self, pci: Sequence[PciDevice]) -> list[Card]:
        """The manufacturer's cards; raises LibraryUnavailableError when the library cannot be used."""
        ...

    def metrics(self) -> list[Metrics]:
        """Live readings of the cards; raises LibraryUnavailableError when the library cannot be used."""
        ...
