"""A vendor's Python binding, imported and initialised on first use and kept open for the process.

amdsmi (AMD's own Python binding) is read this way; every other vendor, NVIDIA's NVML included, through
our ctypes bindings (``clib``, ``native``). A node without the library (or without the driver) must still
be reported from PCI facts, so a missing import or a failing init becomes LibraryUnavailableError with the
reason, and tests inject a recorded stand-in module instead of importing the real one.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

from gpustack_operator.device_manager.detector.vendor import LibraryUnavailableError

log = logging.getLogger(__name__)
T = TypeVar("T")


class VendorLibrary:
    """`get()` returns the initialised module; `close()` shuts it down (it can be opened again)."""

    def __init__(
        self, module_name: str, *, init: str, shutdown: str, error: str, label: str, module: ModuleType | None
    ) -> None:
        self._module_name = module_name
        self._init, self._shutdown, self._error = init, shutdown, error
        self._label = label
        self.module: Any = module
        self._ready = False

    def get(self) -> Any:
        if self.module is None:
            try:
                self.module = importlib.import_module(self._module_name)
            except ImportError as exc:
                raise LibraryUnavailableError(f"{self._label} is not installed: {exc}") from exc
        if not self._ready:
            try:
                getattr(self.module, self._init)()
            except getattr(self.module, self._error) as exc:
                raise LibraryUnavailableError(f"{self._label} cannot be initialised: {exc}") from exc
            self._ready = True
        return self.module

    def close(self) -> None:
        if self._ready and self.module is not None:
            getattr(self.module, self._shutdown)()
            self._ready = False

    def attempt(self, call: Callable[..., T], *args: Any, default: T) -> T:
        """``call(*args)``, or ``default`` when the library says the query is unsupported or failed."""
        try:
            return call(*args)
        except getattr(self.module, self._error) as exc:
            log.debug("%s: %s failed: %s", self._label, getattr(call, "__name__", call), exc)
            return default
