"""Who holds each card right now, and in which mode: the cross-mode view, and what it steers.

The kubelet accounts each resource separately, so it will happily hand a sliced token of a card that an
exclusive pod owns. Before reserving, the allocator checks the cards against Holdings, built the way the
ledger is (contract §2.5: seed every card free with 1,600,000 units, apply each pod's recorded mode and
units, a pod whose mode conflicts with a card's is skipped), from the pod annotations plus this
process's Reservations. Pods that finished (Succeeded, Failed) hold nothing: the kubelet has already
taken their devices back.

A pod records each card under the group ID it had at Allocate, and a group can be renamed under running
work (GPUSTACK_DEVICES_GROUP_ID_WITH_MEMORY toggled, a driver that spells the product differently). So
Holdings is given the cards' homes - (manufacturer, UUID) -> the group the card is filed under now: the
Devices spec for the ledger, the plugin inventories for Allocate - and counts every recorded card under
its current group. Both views fold through this one `add_pod`, so a card held whole under its old ID is
held under the new one in the ledger and in Allocate's check alike.

Reservations are the allocations made here whose annotations may not be visible yet: between reserving
cards under the node lock and the annotation patch reaching the pod cache, the cards would look free to
the next Allocate. They also remember which sidecar containers were served the visibility resource, so
a batch of SSH pods maps one-to-one. A reservation lives until its pod is gone or finished; after a
restart the annotations alone carry the state. A pod can vanish without the informer ever showing it
(found through the API server, deleted before the cache caught up), so a reservation whose pod the
synced cache has not shown for longer than the allocator's retry window expires: a ghost must not keep a
card held until the next restart.

Nothing here clamps. A card whose holders add up to more than it has (annotations written by an older
version that allocated past the card, or by hand) keeps its true, negative `remaining` and reads as
oversold: the ledger shows it, the device manager logs and counts it, and the InstanceType views give
nothing from it. Hiding it at zero would make the card look exactly full while every holder was told it
may use more than its share.

GetPreferredAllocation (`prefer`) reads the same view to steer the kubelet's pick towards cards Allocate
will accept. It is told how many units one token of the asking container takes on each card (`need`, the
allocator works it out from the pods that may be asking) and ranks the cards the way the worker's
admission placement does (`rules.admission.placement`): cards that can take the need, those already held in
the requested mode first and among them the one with the least room left (packing), then free cards;
cards without room for the need after them (the roomiest first), and cards held in another mode last.
Tokens are spread over distinct cards before a second token of one card is taken (a slice never takes a
second token of a card, nor does a share), and a token goes to a card only while the card has room for it and
the tokens already picked there; when the cards with room cannot make up the size, the rest come from the
others in rank order, so the kubelet still gets a full answer and Allocate refuses it with a message naming
the card.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from gpustack_operator.api.types.devices import DeviceAllocationMode
from gpustack_operator.device_manager.allocator.annotation import AllocatedCard, ContainerAllocation
from gpustack_operator.device_manager.plugin import ids
from gpustack_operator.rules.cards import CARD_UNITS, CardState, Need

log = logging.getLogger(__name__)

CardKey = tuple[str, str]
NONE = DeviceAllocationMode.NONE


@dataclass
class Holding:
    """One card: its mode, the units still free, and the pods holding it."""

    mode: DeviceAllocationMode = NONE
    remaining: int = CARD_UNITS
    """Units left; negative when the holders were given more than the card has."""
    holders: list[str] = field(default_factory=list)

    @property
    def oversold(self) -> bool:
        """The holders add up to more than the card."""
        return self.remaining < 0

    def can_take(self, mode: DeviceAllocationMode, units: int) -> bool:
        """The card can give `units` in `mode` now, by the card model's rule (the worker's too)."""
        return CardState(self.remaining, self.mode).can_take(Need(mode, units))


CardHomes = Mapping[tuple[str, str], str]
"""(manufacturer, card UUID) -> the ID of the group the card is filed under now."""


class Holdings:
    """Per-card holdings built from allocations, in the ledger's order and with its conflict rule; cards
    recorded under a group ID that ``homes`` files them elsewhere now count under their current group."""

    def __init__(self, homes: CardHomes | None = None) -> None:
        self._cards: dict[CardKey, Holding] = {}
        self._homes: CardHomes = homes or {}
        self.applied: set[str] = set()
        """The holders whose records were applied (not skipped for a mode conflict)."""

    def key_of(self, card: AllocatedCard) -> CardKey:
        """The key a recorded card counts under: its group now (``homes``), else the one recorded."""
        return self._homes.get((card.manufacturer, card.uuid), card.group), card.uuid

    def get(self, key: CardKey) -> Holding:
        return self._cards.get(key) or Holding()

    def add_pod(self, holder: str, allocations: Mapping[str, ContainerAllocation]) -> bool:
        """Apply one pod's containers (in name order); False, and nothing applied, on a mode conflict.

        A token (device ID) two containers of the pod both record counts once, at the larger of their
        units: the kubelet hands an init container's devices on to the app containers that follow it, and
        those never run at the same time. Tokens the record does not name count per container.
        """
        modes: dict[CardKey, DeviceAllocationMode] = {}
        for name in sorted(allocations):
            alloc = allocations[name]
            for card in alloc.cards:
                key = self.key_of(card)
                held = self.get(key).mode
                if held not in (NONE, alloc.mode) or modes.get(key, alloc.mode) is not alloc.mode:
                    log.warning(
                        "skipping holder=%s: card %s is held %s, it claims %s",
                        holder,
                        card.uuid,
                        held.label,
                        alloc.mode.label,
                    )
                    return False
                modes[key] = alloc.mode
        for key, units in self.charges(allocations).items():
            holding = self._cards.setdefault(key, Holding())
            holding.mode = modes[key]
            holding.remaining -= units
            holding.holders.append(holder)
        self.applied.add(holder)
        return True

    def charges(self, allocations: Mapping[str, ContainerAllocation]) -> dict[CardKey, int]:
        """The units one pod's containers take from each card (the token rule of `add_pod`), counted under
        the card's home; no mode check."""
        charged: dict[CardKey, dict[str, int]] = {}
        for name in sorted(allocations):
            alloc = allocations[name]
            tokens = _tokens_by_card(alloc.device_ids)
            for card in alloc.cards:
                mine: list[str] = sorted(tokens.get(card.uuid, ())) or [f"container {name}"]
                per_token, rest = divmod(card.units, len(mine))
                by_token = charged.setdefault(self.key_of(card), {})
                for n, token in enumerate(mine):
                    by_token[token] = max(by_token.get(token, 0), per_token + (rest if n == 0 else 0))
        return {key: sum(by_token.values()) for key, by_token in charged.items()}

    def conflicts(self, keys: Iterable[CardKey], mode: DeviceAllocationMode) -> dict[CardKey, Holding]:
        """The cards among `keys` already held in a mode other than `mode`."""
        return {key: self.get(key) for key in keys if self.get(key).mode not in (NONE, mode)}

    def fits(self, demand: Mapping[CardKey, int], mode: DeviceAllocationMode) -> bool:
        """True when every card is free or held in `mode` and has the units the demand takes from it."""
        return all(self.get(key).can_take(mode, units) for key, units in demand.items())

    def modes(self) -> dict[CardKey, DeviceAllocationMode]:
        """The mode of every card held now."""
        return {key: holding.mode for key, holding in self._cards.items() if holding.mode is not NONE}

    def oversold(self) -> dict[CardKey, Holding]:
        """Every card whose holders add up to more than the card."""
        return {key: holding for key, holding in self._cards.items() if holding.oversold}


def _tokens_by_card(device_ids: Iterable[str]) -> dict[str, set[str]]:
    """Card UUID -> the device IDs among `device_ids` that are its tokens (unreadable IDs left out)."""
    found: dict[str, set[str]] = {}
    for device_id in device_ids:
        try:
            found.setdefault(ids.parse_id(device_id).uuid, set()).add(device_id)
        except ids.InvalidDeviceIDError:
            continue
    return found


@dataclass
class PodReservation:
    key: str
    """`namespace/name`."""
    containers: dict[str, ContainerAllocation] = field(default_factory=dict)
    visibility_served: set[str] = field(default_factory=set)
    absent_since: float | None = None
    """When a sweep first found the pod missing from the cache (None while it is there)."""


class Reservations:
    """Reservations by pod UID."""

    def __init__(self) -> None:
        self._pods: dict[str, PodReservation] = {}

    def __len__(self) -> int:
        return len(self._pods)

    def get(self, uid: str) -> PodReservation | None:
        return self._pods.get(uid)

    def items(self) -> list[tuple[str, PodReservation]]:
        return list(self._pods.items())

    def containers(self, uid: str) -> Mapping[str, ContainerAllocation]:
        reservation = self._pods.get(uid)
        return reservation.containers if reservation else {}

    def reserve(self, uid: str, key: str, container: str, allocation: ContainerAllocation) -> None:
        self._pods.setdefault(uid, PodReservation(key)).containers[container] = allocation

    def unreserve(self, uid: str, container: str) -> None:
        reservation = self._pods.get(uid)
        if reservation is not None:
            reservation.containers.pop(container, None)
            if not reservation.containers and not reservation.visibility_served:
                del self._pods[uid]

    def served(self, uid: str) -> set[str]:
        reservation = self._pods.get(uid)
        return set(reservation.visibility_served) if reservation else set()

    def mark_served(self, uid: str, key: str, container: str) -> None:
        self._pods.setdefault(uid, PodReservation(key)).visibility_served.add(container)

    def release(self, uid: str) -> None:
        self._pods.pop(uid, None)

    def expire(self, live: set[str], now: float, window: float) -> list[tuple[str, PodReservation]]:
        """Drop the reservations of pods missing from `live` for more than `window`; returns them."""
        dropped = []
        for uid, reservation in list(self._pods.items()):
            if uid in live:
                reservation.absent_since = None
            elif reservation.absent_since is None:
                reservation.absent_since = now
            elif now - reservation.absent_since > window:
                dropped.append((uid, self._pods.pop(uid)))
        return dropped


NeedOf = Callable[[CardKey], int]
"""Card -> the units one token of the asking container takes on it."""


def _rank(holdings: Holdings, key: CardKey, mode: DeviceAllocationMode, units: int) -> tuple[int, int]:
    """Smaller is better: held in `mode` with room (least room first), free, without room (most room
    first: when `units` is the largest of several pods' needs, the card with the most room is the one most
    likely to take the pod actually asking), held in another mode."""
    holding = holdings.get(key)
    if holding.mode not in (NONE, mode):
        return 3, 0
    if holding.remaining < units:
        return 2, -holding.remaining
    if holding.mode is mode:
        return 0, holding.remaining
    return 1, 0


def prefer(
    mode: DeviceAllocationMode,
    available: Sequence[str],
    must_include: Sequence[str],
    size: int,
    holdings: Holdings,
    order: Mapping[CardKey, int] | None = None,
    need: NeedOf | None = None,
) -> list[str]:
    """Up to `size` IDs: every `must_include` ID, then the best of `available` by the rules above.

    `need(card)` is what one token takes on that card (default: one unit, i.e. any room at all). Among
    equally good cards the lower `order` (the card index) wins.
    """
    order = order or {}
    units: NeedOf = functools.cache(need) if need else (lambda _key: 1)
    chosen = list(dict.fromkeys(must_include))
    taken: dict[CardKey, int] = {}
    by_card: dict[CardKey, list[ids.DeviceID]] = {}
    for device_id in chosen:
        try:
            key = ids.parse_id(device_id).card
        except ids.InvalidDeviceIDError:
            continue
        taken[key] = taken.get(key, 0) + units(key)
    for device_id in available:
        if device_id in chosen:
            continue
        try:
            device = ids.parse_id(device_id)
        except ids.InvalidDeviceIDError:
            continue
        by_card.setdefault(device.card, []).append(device)

    def rank(key: CardKey) -> tuple[tuple[int, int], int, CardKey]:
        return _rank(holdings, key, mode, units(key) + taken.get(key, 0)), order.get(key, 0), key

    ranked = sorted(by_card, key=rank)
    queues = [sorted(by_card[key], key=lambda d: d.idx) for key in ranked]
    # One token per card first (an exclusive card has one; a slice or a share never takes a second token of
    # a card, identify.resolve refuses it), each only where the card has room for it.
    without_room: list[str] = []
    for key, queue in zip(ranked, queues, strict=True):
        if len(chosen) >= size:
            break
        want = taken.get(key, 0) + units(key)
        if key not in taken and holdings.get(key).can_take(mode, want):
            chosen.append(str(queue[0]))
            taken[key] = want
        else:
            without_room.append(str(queue[0]))
    if len(chosen) < size:  # too few cards with room: answer in full, Allocate refuses naming the card
        deeper = [
            str(queue[depth])
            for depth in range(1, max(map(len, queues), default=0))
            for queue in queues
            if depth < len(queue)
        ]
        chosen += [*without_room, *deeper][: size - len(chosen)]
    return chosen[: max(size, len(must_include))]
