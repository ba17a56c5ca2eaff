"""Extended-resource names of every accelerator mode, and the recognisers the webhooks rely on (§5.2).

A card is sold in three modes (exclusive, shared, sliced) plus the worker-patched sliced dimensions, the
Kueue credits resource and the internal SSH visibility resource. Their names are all derived from the
manufacturer's base resource (``nvidia.com/gpu``) or the manufacturer key, here and nowhere else.
"""

from __future__ import annotations

import enum
import functools
from typing import Final

from gpustack_operator.api.keys import CREDITS_PREFIX, DEVICE_PREFIX
from gpustack_operator.rules.cards import Mode
from gpustack_operator.rules.environ import DEFAULT_ENVIRON, Environ, FrozenEnviron, frozen
from gpustack_operator.rules.naming.manufacturers import is_known_manufacturer, manufacturers


class ResourceKind(enum.StrEnum):
    """A resource derived from a manufacturer's base; the value is the suffix on the base name."""

    EXCLUSIVE = ""
    SHARED = ".shared"
    SLICED = ".sliced"
    SLICED_UNITS = ".sliced.units"
    SLICED_CORES_PERCENTAGE = ".sliced.cores-percentage"
    SLICED_MEMORY_PERCENTAGE = ".sliced.memory-percentage"
    SLICED_MEMORY_MIB = ".sliced.memory-mib"
    VISIBILITY = ".visibility"
    """Internal SSH-sidecar resource `device.gpustack.ai/<mfr>.visibility` (not on the base name)."""

    @property
    def is_sliced(self) -> bool:
        """True for `.sliced` and every `.sliced.*` dimension."""
        return self.value.startswith(ResourceKind.SLICED.value)


SLICED_KINDS: Final = tuple(kind for kind in ResourceKind if kind.is_sliced)

CARD_MODE_KINDS: Final = {
    Mode.EXCLUSIVE: ResourceKind.EXCLUSIVE,
    Mode.SHARED: ResourceKind.SHARED,
    Mode.SLICED: ResourceKind.SLICED,
}
"""The resource each card mode is asked (and served) by: the one table between the two ideas."""


def card_mode(kind: ResourceKind) -> Mode | None:
    """The card mode a resource kind requests (every `.sliced*` dimension is the sliced mode; None for the
    internal visibility resource)."""
    if kind.is_sliced:
        return Mode.SLICED
    return next((mode for mode, named in CARD_MODE_KINDS.items() if named is kind), None)


# Longest suffix first, so `.sliced.units` is not read as `.sliced` + garbage.
_BY_SUFFIX: Final = sorted(
    (kind for kind in ResourceKind if kind is not ResourceKind.VISIBILITY),
    key=lambda kind: len(kind.value),
    reverse=True,
)
_COUNTED: Final = frozenset(
    {ResourceKind.EXCLUSIVE, ResourceKind.SHARED, ResourceKind.SLICED_UNITS, ResourceKind.SLICED}
)


def resource_name_for(base: str, kind: ResourceKind) -> str:
    """The resource of ``kind`` on ``base`` (e.g. `nvidia.com/gpu` + SHARED -> `nvidia.com/gpu.shared`)."""
    if kind is ResourceKind.VISIBILITY:
        raise ValueError(
            "the visibility resource is named after the manufacturer; use visibility_resource_name"
        )
    return base + kind.value


def acceleratable_resource_name(
    manufacturer: str, kind: ResourceKind, environ: Environ = DEFAULT_ENVIRON
) -> str | None:
    """The manufacturer's resource of ``kind``, or None for an unknown manufacturer."""
    if kind is ResourceKind.VISIBILITY:
        return visibility_resource_name(manufacturer) if is_known_manufacturer(manufacturer) else None
    known = manufacturers(environ).get(manufacturer)
    return None if known is None else resource_name_for(known.resource_name, kind)


def visibility_resource_name(manufacturer: str) -> str:
    """`device.gpustack.ai/<mfr>.visibility`."""
    return f"{DEVICE_PREFIX}{manufacturer}{ResourceKind.VISIBILITY.value}"


def credits_resource_name(manufacturer: str) -> str:
    """GetAcceleratableCreditsResourceName: `credits.gpustack.ai/<mfr>`."""
    return f"{CREDITS_PREFIX}{manufacturer}"


def is_acceleratable_credits_resource_name(name: str) -> bool:
    """IsAcceleratableCreditsResourceName: the credits prefix followed by a known manufacturer."""
    return name.startswith(CREDITS_PREFIX) and is_known_manufacturer(name.removeprefix(CREDITS_PREFIX))


def acceleratable_bases(environ: Environ = DEFAULT_ENVIRON) -> dict[str, str]:
    """Base resource name -> manufacturer, for every known manufacturer."""
    return {m.resource_name: m.name for m in manufacturers(environ).values()}


def split_acceleratable_resource_name(
    name: str, environ: Environ = DEFAULT_ENVIRON
) -> tuple[str, ResourceKind] | None:
    """(base, kind) when ``name`` is a known base or one of its mode/sliced resources, else None."""
    snapshot = frozen(environ)
    if snapshot is not None:
        return _names(snapshot).get(name)
    bases = acceleratable_bases(environ)
    for kind in _BY_SUFFIX:
        base = name.removesuffix(kind.value)
        if name.endswith(kind.value) and base in bases:
            return base, kind
    return None


@functools.lru_cache(maxsize=8)
def _names(environ: FrozenEnviron) -> dict[str, tuple[str, ResourceKind]]:
    """Every resource name of every known base, as `split_acceleratable_resource_name` reads it (the first
    kind in `_BY_SUFFIX` order wins, so they are written last)."""
    bases = acceleratable_bases(environ)
    return {base + kind.value: (base, kind) for kind in reversed(_BY_SUFFIX) for base in bases}


def is_known_acceleratable_resource_name(name: str, environ: Environ = DEFAULT_ENVIRON) -> bool:
    """IsKnownAcceleratableResourceName: a known base, or one with `.shared`, `.sliced.units` or `.sliced`.

    The sliced percentage/MiB dimensions, credits and visibility resources are not counted: they never
    stand for a card request on their own.
    """
    split = split_acceleratable_resource_name(name, environ)
    return split is not None and split[1] in _COUNTED
