"""The accelerator manufacturers the operator knows, with their deploy-time overrides (contract §5.1).

Every other rule (resource names, accelerator keys, credits, device-manager DaemonSets) starts from this
table. A site can re-point a manufacturer at a different PCI vendor ID, extended resource or RuntimeClass
with ``GPUSTACK_<MFR>_PCI_VENDOR_ID`` (``<vendor>`` or ``<class>_<vendor>``),
``GPUSTACK_<MFR>_ACCELERATABLE_RESOURCE_NAME`` and ``GPUSTACK_<MFR>_ACCELERATABLE_RUNTIME_NAME``.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Final

from gpustack_operator.rules.environ import DEFAULT_ENVIRON, Environ, FrozenEnviron, env_text, frozen


class ManufacturerConfigError(ValueError):
    """A manufacturer override in the environment is malformed; the message names the variable."""


@dataclasses.dataclass(frozen=True)
class Manufacturer:
    """One accelerator manufacturer as this deployment sees it."""

    name: str
    """Lower-case manufacturer key, e.g. `nvidia`."""
    pci_vendor_id: str
    """Four lower-case hex digits, e.g. `10de`."""
    pci_class: str
    """PCI class prefix the vendor ID is restricted to ("" = any of the accelerator classes)."""
    resource_name: str
    """Exclusive extended resource, e.g. `nvidia.com/gpu`; every mode's name derives from it."""
    runtime_class: str
    """RuntimeClass for accelerated pods ("" = none)."""
    max_logical_slices: int
    """Logical slices per card the detector advertises (0 = not logically sliceable)."""
    compute_overcommit: bool
    """Slices share compute (cores-percentage capacity = cards × slices × 100) instead of partitioning it."""


_DEFAULTS: Final = (
    Manufacturer("amd", "1002", "", "amd.com/gpu", "amd", 0, False),
    Manufacturer("ascend", "19e5", "", "huawei.com/npu", "ascend", 63, True),
    Manufacturer("cambricon", "cabc", "", "cambricon.com/mlu", "cambricon", 16, False),
    # Hygon partitions compute (each slice's vdev.conf gets a disjoint CU mask): cores-percentage capacity is
    # cards x 100, as the architecture says; the contract's table, which calls it overcommit, yields to it.
    Manufacturer("hygon", "1d94", "", "hygon.com/dcu", "hygon", 4, False),
    Manufacturer("iluvatar", "1e3e", "", "iluvatar.com/gpu", "iluvatar", 0, False),
    Manufacturer("metax", "9999", "", "metax-tech.com/gpu", "metax", 16, False),
    Manufacturer("mthreads", "1ed5", "", "mthreads.com/gpu", "mthreads", 16, False),
    Manufacturer("nvidia", "10de", "", "nvidia.com/gpu", "nvidia", 128, True),
    Manufacturer("thead", "1ded", "", "alibabacloud.com/ppu", "", 0, False),
)

_PCI_VENDOR: Final = re.compile(r"(?:(?P<klass>[0-9a-f]{2,6})_)?(?P<vendor>[0-9a-f]{4})")


def known_manufacturers() -> tuple[str, ...]:
    """GetKnownAcceleratableManufacturers: every manufacturer key, sorted."""
    return tuple(sorted(m.name for m in _DEFAULTS))


def _variable(name: str, setting: str) -> str:
    return f"GPUSTACK_{name.upper()}_{setting}"


def _with_overrides(default: Manufacturer, environ: Environ) -> Manufacturer:
    variable = _variable(default.name, "PCI_VENDOR_ID")
    vendor_text = env_text(variable, environ).lower()
    vendor, klass = default.pci_vendor_id, default.pci_class
    if vendor_text:
        match = _PCI_VENDOR.fullmatch(vendor_text)
        if match is None:
            raise ManufacturerConfigError(
                f"{variable}={vendor_text!r}: want <vendor> or <class>_<vendor> in hex (10de, 0302_10de)"
            )
        vendor, klass = match["vendor"], match["klass"] or ""
    return dataclasses.replace(
        default,
        pci_vendor_id=vendor,
        pci_class=klass,
        resource_name=env_text(_variable(default.name, "ACCELERATABLE_RESOURCE_NAME"), environ)
        or default.resource_name,
        runtime_class=env_text(_variable(default.name, "ACCELERATABLE_RUNTIME_NAME"), environ)
        or default.runtime_class,
    )


def _table(environ: Environ) -> dict[str, Manufacturer]:
    return {m.name: _with_overrides(m, environ) for m in sorted(_DEFAULTS, key=lambda m: m.name)}


@functools.lru_cache(maxsize=8)
def _frozen_table(environ: FrozenEnviron) -> dict[str, Manufacturer]:
    return _table(environ)


def manufacturers(environ: Environ = DEFAULT_ENVIRON) -> dict[str, Manufacturer]:
    """Every known manufacturer by name, overrides from ``environ`` applied, in sorted order (computed
    once per frozen environment, see rules.environ)."""
    snapshot = frozen(environ)
    return dict(_frozen_table(snapshot)) if snapshot is not None else _table(environ)


def manufacturer(name: str, environ: Environ = DEFAULT_ENVIRON) -> Manufacturer | None:
    """The named manufacturer with overrides applied, or None when it is not known."""
    return manufacturers(environ).get(name)


def is_known_manufacturer(name: str) -> bool:
    """True for one of the nine manufacturer keys."""
    return name in known_manufacturers()
