"""The resources an Instance's main container asks for: its cards (or slice) and its general resources.

Why this module exists: the Instance names cards in the user's terms (a count, or a VRAM/compute
percentage of one card) and general resources as limits; the Pod must name the manufacturer's extended
resources (contract §5.2) and, with ``instance-general-resources-overcommit``, request only a fraction of
the general limits so a node's CPU, memory and disk do not gate where the scarce cards are. Both rules
are here, pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final

from gpustack_operator.api.json import as_mapping
from gpustack_operator.api.quantity import Quantity
from gpustack_operator.rules.instance.input import RenderError, integer, mapping, quantity, text
from gpustack_operator.rules.naming.manufacturers import is_known_manufacturer
from gpustack_operator.rules.naming.resources import (
    ResourceKind,
    acceleratable_resource_name,
    visibility_resource_name,
)

GENERAL_CPU_REQUEST: Final = Fraction(800, 1000)
"""Cores one core of a CPU-only Instance requests under overcommit (the InstanceType CPU view scales
reservations back by it)."""
ACCELERATED_CPU_REQUEST: Final = Fraction(100, 1000)
"""Cores one core of an accelerated Instance requests under overcommit: there the cards are scarce."""
GENERAL_SHARE: Final = Fraction(1, 8)
"""Share of the memory and local-storage limits requested under overcommit (128Mi per Gi)."""
MEMORY_PERCENTAGE: Final = "acceleratorSlicedMemoryPercentage"
CORES_PERCENTAGE: Final = "acceleratorSlicedCoresPercentage"
_GENERAL: Final = (("cpu", "cpu"), ("memory", "ram"), ("ephemeral-storage", "localStorage"))
"""(Pod resource, spec.resources key)."""


@dataclass(frozen=True)
class Accelerator:
    """The cards main asks for: whole cards, or one slice of a card."""

    manufacturer: str
    base: str
    """The manufacturer's exclusive resource, e.g. ``nvidia.com/gpu``."""
    cards: int
    memory_percentage: int = 0
    """> 0: a slice of one card with this share of its VRAM."""
    cores_percentage: int = 0

    @property
    def sliced(self) -> bool:
        return self.memory_percentage > 0

    @property
    def visible_cards(self) -> int:
        """Cards the SSH sidecar must see: main's cards, or the one card a slice lives on."""
        return 1 if self.sliced else self.cards

    @property
    def visibility_resource(self) -> str:
        return visibility_resource_name(self.manufacturer)

    def resources(self) -> dict[str, str]:
        """The extended resources main requests (limits and requests alike)."""
        if not self.sliced:
            return {self.base: str(self.cards)}
        wanted = {
            ResourceKind.SLICED: 1,
            ResourceKind.SLICED_MEMORY_PERCENTAGE: self.memory_percentage,
            ResourceKind.SLICED_CORES_PERCENTAGE: self.cores_percentage,
        }
        return {self.base + kind.value: str(value) for kind, value in wanted.items() if value > 0}


def _max_slices(feature: object) -> int:
    sizes = (
        as_mapping(as_mapping(feature).get(mode)).get("maxSize")
        for mode in ("physicalSliced", "logicalSliced")
    )
    return max((size for size in sizes if isinstance(size, int) and not isinstance(size, bool)), default=0)


def instance_type_sliceable(instance_type: Mapping[str, Any]) -> bool:
    """The type's cards slice: its spec or observed detail names a slicing feature, or its sliced view
    has capacity. The Instance webhook asks this too before it treats percentages as a slice."""
    spec, status = as_mapping(instance_type.get("spec")), as_mapping(instance_type.get("status"))
    if spec.get("acceleratable") is not True:
        return False
    capacity = as_mapping(status.get("acceleratorSliced")).get("capacity")
    try:
        sliced_capacity = quantity(capacity, "status.acceleratorSliced.capacity")
    except RenderError:
        sliced_capacity = None
    return (
        _max_slices(spec.get("feature")) > 0
        or _max_slices(as_mapping(status.get("detail")).get("slicedDetail")) > 0
        or (sliced_capacity is not None and sliced_capacity > 0)
    )


def acceleratable(instance_type: Mapping[str, Any]) -> bool:
    """``spec.acceleratable`` of the type (absent reads false)."""
    value = mapping(instance_type.get("spec"), "InstanceType spec").get("acceleratable")
    if value is not None and not isinstance(value, bool):
        raise RenderError(f"InstanceType spec.acceleratable: want true or false, got {value!r}")
    return value is True


def type_manufacturer(type_spec: Mapping[str, Any]) -> str:
    """The manufacturer key: ``spec.manufacturer``, else the first token of ``spec.acceleratorGroup``."""
    named = text(type_spec.get("manufacturer"), "InstanceType spec.manufacturer").lower()
    group = text(type_spec.get("acceleratorGroup"), "InstanceType spec.acceleratorGroup")
    for candidate in (named, group.partition("-")[0]):
        if is_known_manufacturer(candidate):
            return candidate
    raise RenderError(
        f"InstanceType spec.manufacturer {named!r} / spec.acceleratorGroup {group!r}: "
        "names no known accelerator manufacturer"
    )


def _percentage(resources: Mapping[str, Any], key: str) -> int:
    value = integer(resources.get(key), f"spec.resources.{key}")
    if not 0 <= value <= 100:
        raise RenderError(f"spec.resources.{key}: want a percentage in [0, 100], got {value}")
    return value


def accelerator(resources: Mapping[str, Any], instance_type: Mapping[str, Any]) -> Accelerator | None:
    """What main asks for of the type's cards; None for a CPU-only type or zero cards.

    A slice when the type is sliceable and a percentage is set (the one set stands for both, as the
    webhook defaults them); otherwise ``spec.resources.accelerator`` whole cards (1 when absent).
    """
    memory, cores = _percentage(resources, MEMORY_PERCENTAGE), _percentage(resources, CORES_PERCENTAGE)
    count = quantity(resources.get("accelerator"), "spec.resources.accelerator")
    if not acceleratable(instance_type):
        if count is not None and count > 0:
            raise RenderError("spec.resources.accelerator: the InstanceType is CPU-only")
        return None
    if count is not None and count.exact.denominator != 1:
        raise RenderError(f"spec.resources.accelerator: want a whole number of cards, got {count}")
    manufacturer = type_manufacturer(mapping(instance_type.get("spec"), "InstanceType spec"))
    base = acceleratable_resource_name(manufacturer, ResourceKind.EXCLUSIVE)
    assert base is not None  # a known manufacturer always has one
    if instance_type_sliceable(instance_type) and (memory > 0 or cores > 0):
        return Accelerator(manufacturer, base, 1, memory or cores, cores or memory)
    cards = 1 if count is None else int(count.exact)
    return Accelerator(manufacturer, base, cards) if cards > 0 else None


def overcommitted_request(resource: str, limit: Quantity, *, accelerated: bool) -> Quantity:
    """The request for ``limit`` under overcommit, never above the limit.

    cpu: 800m per started core of the limit (100m on an accelerated type); memory and ephemeral-storage:
    one eighth of the limit (128Mi per Gi), rounded up to a whole byte.
    """
    if resource == "cpu":
        per_core = ACCELERATED_CPU_REQUEST if accelerated else GENERAL_CPU_REQUEST
        request = Quantity(per_core * math.ceil(limit.exact))
    else:
        request = Quantity(math.ceil(limit.exact * GENERAL_SHARE), limit.format)
    return min(request, limit)


def resource_requirements(
    resources: Mapping[str, Any],
    instance_type: Mapping[str, Any],
    cards: Accelerator | None,
    *,
    overcommit: bool,
) -> dict[str, dict[str, str]]:
    """main's ``resources``: limits = spec cpu / ram / localStorage (+ the cards); requests = the
    limits, or with ``overcommit`` the general ones scaled by ``overcommitted_request``."""
    limits: dict[str, str] = {}
    requests: dict[str, str] = {}
    accelerated = acceleratable(instance_type)
    for resource, key in _GENERAL:
        limit = quantity(resources.get(key), f"spec.resources.{key}")
        if limit is None or limit.is_zero():
            continue
        limits[resource] = str(limit)
        request = overcommitted_request(resource, limit, accelerated=accelerated) if overcommit else limit
        requests[resource] = str(request)
    if cards is not None:
        limits |= cards.resources()
        requests |= cards.resources()
    return {"limits": limits, "requests": requests}
