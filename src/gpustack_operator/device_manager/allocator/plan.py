"""The decision inside the node lock: which pod, are its cards free, what it is given - no I/O.

Given the pods on the node, the reservations and the kubelet's device IDs, a Planner identifies the pod,
checks the cards against the cross-mode view (no card held in another mode, and room on every card for
the units the container takes: a demand that does not fit is refused, never recorded as an overcommit)
and builds the allocation to record; the container response
comes from the vendor's module in `responses`, which may add host files to write once the allocation is
recorded (outside the lock). Keeping this pure makes every mode's rules testable as tables, and keeps the
locked section as short as the pod listing in front of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from gpustack_operator.api.types.devices import DeviceAllocationMode
from gpustack_operator.device_manager.allocator import identify, responses
from gpustack_operator.device_manager.allocator import pods as p
from gpustack_operator.device_manager.allocator.annotation import (
    AllocatedCard,
    ContainerAllocation,
    pod_allocations,
)
from gpustack_operator.device_manager.allocator.demand import SlicedRequest, card_demand, sliced_request
from gpustack_operator.device_manager.allocator.holdings import (
    CardHomes,
    Holding,
    Holdings,
    NeedOf,
    Reservations,
)
from gpustack_operator.device_manager.allocator.workdirs import HostPaths
from gpustack_operator.device_manager.plugin.handler import (
    AllocationRefusedError,
    ContainerResponse,
    ResourceSpec,
)
from gpustack_operator.device_manager.plugin.ids import DeviceID
from gpustack_operator.device_manager.plugin.inventory import CardInfo, Inventory
from gpustack_operator.device_manager.podresources.model import PodName
from gpustack_operator.rules.cards import CARD_UNITS, Need

CardKey = tuple[str, str]
Pod = Mapping[str, Any]
Change = tuple[Pod, str, ContainerAllocation | None]
"""(pod, container, the container's allocation or None): a what-if for `Planner.holdings`."""


class CardConflictError(AllocationRefusedError):
    """A card the kubelet picked is held in another mode - by the pods as listed, which may lag."""

    def __init__(self, message: str, holders: Iterable[PodName]) -> None:
        super().__init__(message)
        self.holders = frozenset(holders)
        """The holding pods, (namespace, name)."""


class CardCapacityError(CardConflictError):
    """A card the kubelet picked has fewer units left than the container takes from it."""


@dataclass(frozen=True)
class Plan:
    """What one Allocate gives one container of one pod."""

    pod: Pod
    container: str
    allocation: ContainerAllocation | None
    """None for the visibility sidecar, which holds nothing."""
    response: ContainerResponse
    prepare: responses.Prepare | None = None
    """Host files the container needs before it starts, written once the allocation is recorded."""
    tier: identify.Tier = identify.Tier.FEASIBLE
    """How the pod was found; anything but FEASIBLE is re-checked against a fresh pod list."""


class Planner:
    def __init__(
        self, reservations: Reservations, paths: HostPaths, inventories: Mapping[str, Inventory] | None = None
    ) -> None:
        self.reservations = reservations
        self.paths = paths
        self.inventories: Mapping[str, Inventory] = inventories or {}
        """The node's cards now: where each card is filed, for records made under an older group ID."""

    def homes(self) -> CardHomes:
        """(manufacturer, UUID) -> the card's group ID now, from the inventories."""
        return {
            (card.manufacturer, card.uuid): card.group
            for inventory in self.inventories.values()
            for card in inventory.cards()
        }

    def allocations(self, pod: Pod) -> dict[str, ContainerAllocation]:
        """The pod's workload allocations: its annotation overlaid with this process's reservations."""
        return {**pod_allocations(pod), **self.reservations.containers(p.pod_uid(pod))}

    def holdings(self, pods: Iterable[Pod], change: Change | None = None) -> Holdings:
        """The cross-mode view: active pods oldest first, then reservations of pods not listed yet; each
        recorded card counted under the group it is filed under now (see holdings.py). `change` is one
        container's allocation as it would be (None: dropped), to ask what an Allocate would leave."""

        def held(uid: str, allocs: Mapping[str, ContainerAllocation]) -> Mapping[str, ContainerAllocation]:
            if change is None or p.pod_uid(change[0]) != uid:
                return allocs
            rest = {name: alloc for name, alloc in allocs.items() if name != change[1]}
            return rest if change[2] is None else {**rest, change[1]: change[2]}

        holdings = Holdings(self.homes())
        seen = set()
        for pod in sorted(pods, key=p.age_key):
            uid = p.pod_uid(pod)
            seen.add(uid)
            if p.is_active(pod) and (allocs := held(uid, self.allocations(pod))):
                holdings.add_pod(p.pod_key(pod), allocs)
        for uid, reservation in self.reservations.items():
            if uid not in seen and (allocs := held(uid, reservation.containers)):
                seen.add(uid)
                holdings.add_pod(reservation.key, allocs)
        if change is not None and change[2] is not None and p.pod_uid(change[0]) not in seen:
            holdings.add_pod(p.pod_key(change[0]), {change[1]: change[2]})
        return holdings

    def _with_and_without(
        self,
        holdings: Holdings,
        everyone: Iterable[Pod],
        pod: Pod,
        container: str,
        allocation: ContainerAllocation,
    ) -> tuple[dict[CardKey, Holding], dict[CardKey, int]]:
        """Per card of `allocation`: the holding without the container's record (for the message), and the
        remaining with `allocation` in its place. Only the asking pod's charge changes, so both come from the
        holdings already built, not from folding every pod again; a pod whose records were skipped for a mode
        conflict is folded again in full."""
        keys = [holdings.key_of(card) for card in allocation.cards]
        if p.pod_key(pod) not in holdings.applied and self.allocations(pod):
            without = self.holdings(everyone, change=(pod, container, None))
            with_it = self.holdings(everyone, change=(pod, container, allocation))
            return {k: without.get(k) for k in keys}, {k: with_it.get(k).remaining for k in keys}
        current = self.allocations(pod) if p.pod_key(pod) in holdings.applied else {}
        rest = {name: alloc for name, alloc in current.items() if name != container}
        charged, charged_rest = holdings.charges(current), holdings.charges(rest)
        charged_new = holdings.charges({**rest, container: allocation})
        before, after = {}, {}
        for key in keys:
            held = holdings.get(key)
            base = held.remaining + charged.get(key, 0)
            before[key] = replace(held, remaining=base - charged_rest.get(key, 0))
            after[key] = base - charged_new.get(key, 0)
        return before, after

    def need(self, resource: ResourceSpec, size: int, pods: Sequence[Pod]) -> NeedOf:
        """What one token of `resource` takes on a card, for the pod the kubelet is about to allocate:
        the containers that may be asking for `size` tokens (a pod part-way through admission when there
        is one, else every pending pod with such a container) and, when they differ, the largest of their
        needs, so that a card with room for it has room for whichever of them it is. With no pod asking,
        the least the mode takes."""
        mode = resource.mode
        if mode is not DeviceAllocationMode.SLICED:  # the card model's need, the same on every card
            whole = Need.of(mode).units if mode is not DeviceAllocationMode.VISIBILITY else 0
            return lambda _key: whole
        found = identify.candidates(
            pods, resource.name, size, claimed=lambda pod: set(self.allocations(pod)), fits=lambda *_: True
        )
        asking = [c for c in found if c.tier is found[0].tier and c.tier is not identify.Tier.CLAIMED]
        requests = [_sliced(resource, c.pod, c.container) for c in asking]
        inventory = self.inventories.get(resource.manufacturer)

        def units(key: CardKey) -> int:
            card = inventory.card(key) if inventory is not None else None
            most = 1
            for request in requests:
                if request is not None and card is not None:
                    try:
                        most = max(most, request.card_units(card.memory_mib))
                    except AllocationRefusedError:
                        continue  # Allocate will refuse that pod with the reason
            return most

        return units

    def plan(
        self,
        resource: ResourceSpec,
        devices: Sequence[DeviceID],
        cards: Mapping[CardKey, CardInfo],
        pods: Sequence[Pod],
        holders: Sequence[Pod] | None = None,
    ) -> Plan | None:
        """The plan for the best candidate among `pods`, None when none matches; raises AllocationRefused.

        `holders` are the pods whose cards count in the cross-mode view (default: `pods`).
        """
        holdings = self.holdings(pods if holders is None else holders)
        mode = resource.mode

        def fits(pod: Pod, container: str) -> bool:
            try:
                demand = card_demand(mode, devices, cards, _sliced(resource, pod, container))
                return holdings.fits(demand, mode)
            except AllocationRefusedError:
                return False

        found = identify.candidates(
            pods, resource.name, len(devices), claimed=lambda pod: set(self.allocations(pod)), fits=fits
        )
        if not found:
            return None
        best = found[0]
        conflicts = holdings.conflicts(cards, mode)
        if conflicts:
            held = "; ".join(
                f"card {key[1]} is held {h.mode.label} by {', '.join(h.holders)}"
                for key, h in conflicts.items()
            )
            names = {_pod_name(h) for holding in conflicts.values() for h in holding.holders}
            raise CardConflictError(f"{resource.name} for pod {best.key}: {held}", names)
        sliced = _sliced(resource, best.pod, best.container)
        demand = card_demand(mode, devices, cards, sliced)
        allocation = ContainerAllocation(
            mode,
            tuple(
                AllocatedCard(c.group, c.manufacturer, c.uuid, c.index, demand[c.key]) for c in cards.values()
            ),
            tuple(str(d) for d in devices),
        )
        everyone = pods if holders is None else holders
        before, after = self._with_and_without(holdings, everyone, best.pod, best.container, allocation)
        # Refused: a card this allocation leaves oversold and takes more from than is taken now. A replay
        # (its record replaced by the same) or an app container on its init container's token adds
        # nothing, and is answered even on a card older records oversold.
        now = {key: holdings.get(key).remaining for key in demand}
        if short := [key for key in demand if after[key] < 0 and after[key] < now[key]]:
            raise _capacity_error(
                resource, best.key, best.container, {key: before[key] for key in short}, demand
            )
        grant = responses.Grant(
            resource.manufacturer,
            mode,
            tuple(cards.values()),
            sliced,
            frozenset(p.env_names(p.container(best.pod, best.container))),
            p.pod_uid(best.pod),
            best.container,
            self.paths,
        )
        injection = responses.respond(grant)
        return Plan(best.pod, best.container, allocation, injection.response, injection.prepare, best.tier)

    def mirror(self, resource: ResourceSpec, count: int, pods: Sequence[Pod]) -> Plan | None:
        """The sidecar's plan: the visible-devices env of the cards its pod already holds."""
        found = identify.visibility_candidates(
            pods,
            resource.name,
            count,
            claimed=lambda pod: set(self.allocations(pod)),
            served=lambda pod: self.reservations.served(p.pod_uid(pod)),
        )
        if not found:
            return None
        best = found[0]
        held: dict[CardKey, AllocatedCard] = {}
        for name in sorted(allocs := self.allocations(best.pod)):
            for card in allocs[name].cards:
                if card.manufacturer == resource.manufacturer:
                    held.setdefault(card.key, card)
        known = {
            (card.manufacturer, card.uuid): card
            for inventory in self.inventories.values()
            for card in inventory.cards()
        }
        named = [known.get((card.manufacturer, card.uuid), card) for card in held.values()]
        response = responses.visibility_response(resource.manufacturer, named)
        return Plan(best.pod, best.container, None, response, tier=best.tier)


def _capacity_error(
    resource: ResourceSpec,
    pod: str,
    container: str,
    short: Mapping[CardKey, Holding],
    demand: Mapping[CardKey, int],
) -> CardCapacityError:
    """The refusal of a demand that does not fit, naming each card, what it has left and what is asked."""
    cards = "; ".join(
        f"card {key[1]} has {h.remaining} of {CARD_UNITS} units left"
        + (f" (held {h.mode.label} by {', '.join(h.holders)})" if h.holders else "")
        + f" and the container needs {demand[key]}"
        for key, h in short.items()
    )
    names = {_pod_name(holder) for h in short.values() for holder in h.holders}
    return CardCapacityError(
        f"{resource.name} for pod {pod} container {container}: {cards}; "
        "refused rather than oversell the card",
        names,
    )


def _pod_name(key: str) -> PodName:
    namespace, _, name = key.partition("/")
    return namespace, name


def _sliced(resource: ResourceSpec, pod: Pod, container: str) -> SlicedRequest | None:
    """The container's `.sliced.*` limits when the resource is a slice."""
    if resource.mode is not DeviceAllocationMode.SLICED:
        return None
    return sliced_request(p.container(pod, container), resource.name.removesuffix(".sliced"))
