"""What an Allocate call is for: the cards its device IDs name, and the pod being admitted.

The kubelet sends only device IDs, never the pod. First the IDs are checked against this node's cards:
an Allocate the plugin cannot honour must fail with FAILED_PRECONDITION and change nothing - IDs it
never advertised for the resource's mode, tokens of an unhealthy card (the visibility resource excepted:
it only mirrors cards a pod already holds), and a sliced request whose tokens fall on fewer cards than
it asks for (a slice is one token on each of `limit` distinct cards; two tokens of one card would
silently become a single slice, leaving the container with fewer cards than the scheduler accounted for),
and likewise shares: N shares are one share of each of N cards, as the worker's admission check places
them (the card model, rules.cards), never two shares of one card.

Then the pod. The kubelet admits the pods bound to its node one at a time, oldest first, and allocates
each container's resources right then; so the pod being admitted is a Pending pod on this node with a
container whose limit for the resource equals the number of IDs. Among several, the oldest wins, in
tiers: first a pod part-way through admission (it holds cards for one container and still has a matching
container without any: the kubelet allocates every container of a pod before it admits the next pod,
and an app container reusing its init container's IDs lands here too), then pods whose demand fits the
cards the kubelet picked, then pods it would not fit (found only to be refused with the reason), and last
pods whose every matching container already holds an allocation (a replay after a restart). The
sidecar's visibility resource instead re-finds a pod that already holds cards and mirrors them.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpustack_operator.api.types.devices import DeviceAllocationMode
from gpustack_operator.device_manager.allocator import pods as p
from gpustack_operator.device_manager.plugin import ids
from gpustack_operator.device_manager.plugin.handler import AllocationRefusedError, ResourceSpec
from gpustack_operator.device_manager.plugin.inventory import CardInfo, Inventory

CardKey = tuple[str, str]


def resolve(
    resource: ResourceSpec, inventory: Inventory | None, device_ids: Sequence[str]
) -> tuple[list[ids.DeviceID], dict[CardKey, CardInfo]]:
    """The parsed IDs and their cards (first-seen order); AllocationRefusedError when one is not servable."""
    if inventory is None or not device_ids:
        raise AllocationRefusedError(f"{resource.name}: no devices of {resource.manufacturer} to allocate")
    devices: list[ids.DeviceID] = []
    cards: dict[CardKey, CardInfo] = {}
    for device_id in device_ids:
        try:
            device = ids.parse_id(device_id)
        except ids.InvalidDeviceIDError as err:
            raise AllocationRefusedError(f"{resource.name}: {err}") from err
        card = inventory.card(device.card)
        if card is None or not ids.valid_in(device, resource.mode, card.max_slices):
            raise AllocationRefusedError(f"{resource.name}: unknown device {device_id!r}")
        if not card.healthy and resource.mode is not DeviceAllocationMode.VISIBILITY:
            raise AllocationRefusedError(f"{resource.name}: device {device_id} is on unhealthy card")
        devices.append(device)
        cards.setdefault(card.key, card)
    one_per_card = {DeviceAllocationMode.SLICED: "slice", DeviceAllocationMode.SHARED: "share"}
    if (what := one_per_card.get(resource.mode)) and len(cards) < len(devices):
        raise AllocationRefusedError(
            f"{resource.name}: {len(devices)} {what}s asked for but the devices fall on {len(cards)} "
            f"card(s) ({', '.join(card.uuid for card in cards.values())}); a {what} takes one token on "
            "each of distinct cards"
        )
    return devices, cards


class Tier(enum.IntEnum):
    """How a candidate was found, best first; every tier but FEASIBLE is re-checked against the API server."""

    CONTINUING = 0
    """Holds cards for some containers and has a matching container without: its admission is under way."""
    FEASIBLE = 1
    INFEASIBLE = 2
    """Its demand does not fit the cards: the planner refuses it, naming the cards short of room."""
    CLAIMED = 3
    """Every matching container holds cards already: a replay."""


@dataclass(frozen=True)
class Candidate:
    """A pod that may be the one being admitted, the container the IDs are for, and how likely."""

    pod: Mapping[str, Any]
    container: str
    tier: Tier

    @property
    def key(self) -> str:
        return p.pod_key(self.pod)


def _matching(pod: Mapping[str, Any], resource: str, count: int) -> list[str]:
    """Containers (kubelet order) whose limit for `resource` equals `count`."""
    return [str(c.get("name")) for c in p.containers(pod) if p.limit(c, resource) == count]


def candidates(
    pods: Iterable[Mapping[str, Any]],
    resource: str,
    count: int,
    *,
    claimed: Callable[[Mapping[str, Any]], set[str]],
    fits: Callable[[Mapping[str, Any], str], bool],
) -> list[Candidate]:
    """Every pending pod that may be this Allocate's, best first.

    `claimed(pod)` names the containers the pod already holds cards for; `fits(pod, container)` says
    whether that container's demand fits the cards of this call.
    """
    found = []
    for pod in pods:
        if not p.is_pending(pod):
            continue
        matching = _matching(pod, resource, count)
        if not matching:
            continue
        held = claimed(pod)
        free = [name for name in matching if name not in held]
        if not free:
            tier = Tier.CLAIMED
        elif held:
            tier = Tier.CONTINUING
        else:
            tier = Tier.FEASIBLE if fits(pod, free[0]) else Tier.INFEASIBLE
        found.append(Candidate(pod, (free or matching)[0], tier))
    return sorted(found, key=lambda c: (c.tier, p.arrival_key(c.pod)))


def visibility_candidates(
    pods: Iterable[Mapping[str, Any]],
    resource: str,
    count: int,
    *,
    claimed: Callable[[Mapping[str, Any]], set[str]],
    served: Callable[[Mapping[str, Any]], set[str]],
) -> list[Candidate]:
    """Pending pods that hold cards and whose sidecar asks for `count` visibility tokens, best first.

    A sidecar not served yet ranks before one that was (a replay); `served(pod)` names those served.
    """
    found = []
    for pod in pods:
        if not p.is_pending(pod) or not claimed(pod):
            continue
        matching = _matching(pod, resource, count)
        if not matching:
            continue
        done = served(pod)
        free = [name for name in matching if name not in done]
        tier = Tier.FEASIBLE if free else Tier.CLAIMED
        found.append(Candidate(pod, (free or matching)[0], tier))
    return sorted(found, key=lambda c: (c.tier, p.arrival_key(c.pod)))
