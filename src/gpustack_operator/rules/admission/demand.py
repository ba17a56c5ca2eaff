"""What a Kueue Workload asks of cards, per Pod and per podSet (contract §7.9, NodeDevicesAdmission); pure.

Kueue counts a pool's cards as one scalar of credits, so it cannot see that a 5-card Pod needs 5 cards on
one node, each with the room for it. The per-card admission check needs the request in card terms again:
per Pod, the cards it needs and how much of each card (`Need`): a base resource (`nvidia.com/gpu`) asks
that many whole cards (D = 1,600,000 units each), `.shared` that many cards with one owner share (D/10)
each, `.sliced` that many cards with `.sliced.units` each (the largest any container names: the webhook
folds a slice's memory into units per card). A container asks limits, else requests (extended resources are
asked in limits); init containers run before the app containers and reuse their cards, so a Pod asks the
larger of its app containers' sum and any one init container (as kubelet and Kueue count). A podSet's
demand is its Pod demand times the Pod count Kueue admitted, on the ResourceFlavor Kueue assigned to the
manufacturer's credits resource (`credits.gpustack.ai/<mfr>`): that flavor names the nodes to look at.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gpustack_operator.api.keys import CREDITS_PREFIX
from gpustack_operator.api.quantity import InvalidQuantityError, Quantity
from gpustack_operator.rules.cards import Mode, Need, merged_resources
from gpustack_operator.rules.environ import DEFAULT_ENVIRON, Environ
from gpustack_operator.rules.naming.manufacturers import manufacturers
from gpustack_operator.rules.naming.resources import ResourceKind, resource_name_for

__all__ = ["PodSetDemand", "pod_needs", "workload_demand"]

_KINDS = (ResourceKind.EXCLUSIVE, ResourceKind.SHARED, ResourceKind.SLICED, ResourceKind.SLICED_UNITS)


@dataclass(frozen=True)
class PodSetDemand:
    """`count` Pods, each needing `needs` on one node of `flavor` (the pool group of `manufacturer`)."""

    name: str
    count: int
    flavor: str
    manufacturer: str
    needs: tuple[Need, ...]


def _value(text: object) -> int:
    try:
        return max(Quantity.parse(str(text)).value(), 0)
    except InvalidQuantityError:
        return 0


def _asks(container: Mapping[str, Any], base: str) -> dict[ResourceKind, int]:
    merged = merged_resources(container)
    names = {kind: resource_name_for(base, kind) for kind in _KINDS}
    return {kind: _value(merged[name]) for kind, name in names.items() if name in merged}


def _effective(
    app: Iterable[Mapping[str, Any]], init: Iterable[Mapping[str, Any]], base: str
) -> dict[ResourceKind, int]:
    asks = [_asks(c, base) for c in app]
    total: dict[ResourceKind, int] = {k: sum(a.get(k, 0) for a in asks) for k in _KINDS}
    total[ResourceKind.SLICED_UNITS] = max((a.get(ResourceKind.SLICED_UNITS, 0) for a in asks), default=0)
    for ask in (_asks(c, base) for c in init):
        total = {k: max(v, ask.get(k, 0)) for k, v in total.items()}
    return total


def pod_needs(template: Mapping[str, Any], base: str) -> tuple[Need, ...]:
    """The cards of manufacturer resource `base` one Pod of the template needs (see the module docstring)."""
    spec = template.get("spec") or {}
    asks = _effective(spec.get("containers") or (), spec.get("initContainers") or (), base)
    units = asks[ResourceKind.SLICED_UNITS]
    sliced = asks[ResourceKind.SLICED] or (1 if units else 0)
    return (
        *[Need.of(Mode.EXCLUSIVE)] * asks[ResourceKind.EXCLUSIVE],
        *[Need.of(Mode.SHARED)] * asks[ResourceKind.SHARED],
        *[Need.of(Mode.SLICED, units)] * sliced,
    )


def workload_demand(workload: Mapping[str, Any], environ: Environ = DEFAULT_ENVIRON) -> list[PodSetDemand]:
    """Each podSet that has a credits flavor and needs cards, with its demand (empty: no card needed)."""
    assigned = {
        a.get("name"): a
        for a in ((workload.get("status") or {}).get("admission") or {}).get("podSetAssignments") or ()
    }
    known = manufacturers(environ)
    found = []
    for pod_set in (workload.get("spec") or {}).get("podSets") or ():
        assignment = assigned.get(pod_set.get("name")) or {}
        count = int(assignment.get("count", pod_set.get("count", 1)))
        for resource, flavor in sorted((assignment.get("flavors") or {}).items()):
            mfr = known.get(resource.removeprefix(CREDITS_PREFIX))
            if not resource.startswith(CREDITS_PREFIX) or mfr is None or count <= 0:
                continue
            needs = pod_needs(pod_set.get("template") or {}, mfr.resource_name)
            if needs:
                found.append(PodSetDemand(str(pod_set.get("name")), count, str(flavor), mfr.name, needs))
    return found
