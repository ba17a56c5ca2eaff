"""The four `.sliced.*` node capacities the worker publishes (contract §5.2, architecture Stage 3).

The device plugin can only advertise countable tokens; the VRAM and compute budgets of slices are
extended resources the scheduler counts from Node.status.capacity, and only the worker, which sees both
the Node and its Devices ledger, can compute them. Presence-gated per manufacturer: published only while
the node advertises `<base>.sliced` > 0 and only from groups whose cards are logically sliceable;
otherwise every one of the four is removed, so a model that cannot slice never looks sliceable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gpustack_operator.api.quantity import InvalidQuantityError, Quantity
from gpustack_operator.api.types.devices import AcceleratorSliced, DevicesGroup
from gpustack_operator.rules.capacity.credits import CREDITS_PER_CARD
from gpustack_operator.rules.environ import DEFAULT_ENVIRON, Environ
from gpustack_operator.rules.naming.manufacturers import manufacturers
from gpustack_operator.rules.naming.resources import ResourceKind, resource_name_for

SLICED_CAPACITY_KINDS = (
    ResourceKind.SLICED_UNITS,
    ResourceKind.SLICED_CORES_PERCENTAGE,
    ResourceKind.SLICED_MEMORY_PERCENTAGE,
    ResourceKind.SLICED_MEMORY_MIB,
)


def _value(text: object) -> int | None:
    """A capacity as an integer (the API server writes `12800000` back as `12800k`); None if unreadable."""
    try:
        return Quantity.parse(str(text)).value()
    except InvalidQuantityError:
        return None


def _positive(capacity: Mapping[str, str], name: str) -> bool:
    return (_value(capacity.get(name, "0")) or 0) > 0


def sliced_capacities(
    capacity: Mapping[str, str], groups: Iterable[DevicesGroup], environ: Environ = DEFAULT_ENVIRON
) -> dict[str, str | None]:
    """Node capacity changes: name -> value to set, or None to remove a stale one.

    Only names that must change are returned; an empty dict means the node is up to date.
    """
    totals: dict[str, list[int]] = {}
    known = manufacturers(environ)
    for group in groups:
        mfr = known.get(group.get("manufacturer", ""))
        sliced: AcceleratorSliced | dict[str, Any] = (group.get("acceleratorsFeature") or {}).get(
            "logicalSliced"
        ) or {}
        slices = sliced.get("maxSize", 0)
        overcommit = sliced.get("coresPercentageOvercommit", mfr.compute_overcommit if mfr else False)
        cards = len(group.get("accelerators") or [])
        if mfr is None or slices <= 0 or cards == 0:
            continue
        if not _positive(capacity, resource_name_for(mfr.resource_name, ResourceKind.SLICED)):
            continue
        sums = totals.setdefault(mfr.resource_name, [0, 0, 0, 0])
        sums[0] += cards * CREDITS_PER_CARD
        sums[1] += cards * (slices if overcommit else 1) * 100
        sums[2] += cards * 100
        sums[3] += cards * int(group.get("memory", 0))
    desired: dict[str, str] = {}
    for base, sums in totals.items():
        for kind, value in zip(SLICED_CAPACITY_KINDS, sums, strict=True):
            desired[resource_name_for(base, kind)] = str(value)
    stale = {
        resource_name_for(m.resource_name, kind) for m in known.values() for kind in SLICED_CAPACITY_KINDS
    } - set(desired)
    changes: dict[str, str | None] = {
        k: v for k, v in desired.items() if k not in capacity or _value(capacity[k]) != int(v)
    }
    changes.update({name: None for name in stale if name in capacity})
    return changes
