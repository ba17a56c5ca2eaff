"""The capacity views an InstanceType shows, from the Devices ledger and its ClusterQueue (contract §7.9).

A user picks a type by what it can still give: whole cards (exclusive), owner shares (10 per card) or VRAM
percent (100 per logically sliceable card). Kueue's scalar credits cannot say that, since one number hides
how free each card is, so the three views are a per-card bin-packing projection of the pool's Devices ledger
(`remaining` out of D = 1_600_000 per card), by the card model's rules (rules.cards: which card serves
which mode). Per card of the pool's group on each node: a card is free when
remaining >= D and the device manager does not report it unhealthy (an unhealthy card keeps its place in
capacity, as the kubelet keeps it in a node's capacity, but gives nothing in any view); exclusive counts
free cards; shared adds remaining / 160_000 when the card is free or already Shared; sliced (logically
sliceable cards only) adds remaining / 16_000 when it is free or already Sliced; an oversold card (negative
remaining, see device_manager.ledger) adds nothing. onceMaxRequest is the most
one request can get: a node's sum for exclusive and shared (one request may span a node's cards), the freest
single card for sliced (VRAM is per card). A CPU-only type's view comes from its ClusterQueue instead: the
nominal cpu quota, less what workloads reserved (scaled back from the overcommitted 800m-per-core request
when overcommit is on), at most one node's cores at once. Pure: `pool_cards` reads one Devices object and
raises MalformedLedgerError naming what is wrong; the rest is arithmetic.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from gpustack_operator.api.json import as_mapping, as_mappings
from gpustack_operator.api.quantity import Quantity
from gpustack_operator.api.types.instancetype import InstanceTypeResource
from gpustack_operator.rules.capacity.quota import CPU, flavor_count, quantity_of
from gpustack_operator.rules.cards import (
    MEMORY_PERCENT_UNITS,
    SHARED_UNITS,
    SHARES_PER_CARD,
    CardState,
    Mode,
)
from gpustack_operator.rules.naming.groups import accelerator_key

PERCENT_PER_CARD: Final = 100
GENERAL_CPU_OVERCOMMIT_MILLI: Final = 800
"""Milli-CPU one core of a CPU-only unit requests while instance-general-resources-overcommit is on."""


class MalformedLedgerError(ValueError):
    """A Devices object whose ledger cannot be read; the message says where."""


@dataclass(frozen=True)
class View:
    """One capacity view; quantities are whole units of the view (cards, shares, percent, cores)."""

    capacity: Quantity
    remaining: Quantity
    once_max_request: Quantity

    def resource(self) -> InstanceTypeResource:
        return {
            "onceMaxRequest": str(self.once_max_request),
            "remaining": str(self.remaining),
            "capacity": str(self.capacity),
        }


ZERO: Final = View(Quantity(0), Quantity(0), Quantity(0))
"""What every view of a draining pool shows."""


@dataclass(frozen=True)
class AcceleratorViews:
    exclusive: View
    shared: View
    sliced: View


def _int(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise MalformedLedgerError(f"{where} is {value!r}, not an integer")
    return value


def _entries(value: object, where: str) -> list[Mapping[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise MalformedLedgerError(f"{where} is not a list of objects")
    return value


def _sliceable_groups(devices: Mapping[str, Any]) -> set[str]:
    keys = set()
    for group in _entries(as_mapping(devices.get("spec")).get("groups"), "spec.groups"):
        size = as_mapping(as_mapping(group.get("acceleratorsFeature")).get("logicalSliced")).get("maxSize", 0)
        if isinstance(size, int) and size > 0:
            keys.add(accelerator_key(str(group.get("manufacturer")), str(group.get("id"))))
    return keys


def pool_card_rows(devices: Mapping[str, Any], group: str) -> list[tuple[str, CardState]]:
    """(card ID, ledger row) of the pool's cards (group `<mfr>-<id>`) on one node; none before the ledger."""
    sliceable = group in _sliceable_groups(devices)
    sick = unhealthy_cards(devices, group)
    cards = []
    for entry in _entries(as_mapping(devices.get("status")).get("groups"), "status.groups"):
        if accelerator_key(str(entry.get("manufacturer")), str(entry.get("id"))) != group:
            continue
        for n, row in enumerate(_entries(entry.get("accelerators"), f"status.groups[{group}].accelerators")):
            where = f"status.groups[{group}].accelerators[{n}]"
            remaining = _int(row.get("remaining", 0), f"{where}.remaining")
            card_id = str(row.get("id", n))
            mode = _int(row.get("mode", 0), f"{where}.mode")
            index = _int(row.get("index", n), f"{where}.index")
            cards.append((card_id, CardState(remaining, mode, sliceable, card_id not in sick, index)))
    return cards


def pool_cards(devices: Mapping[str, Any], group: str) -> list[CardState]:
    """The ledger rows of the pool's cards (group key `<mfr>-<id>`) on one node; none before the ledger."""
    return [card for _, card in pool_card_rows(devices, group)]


def unhealthy_cards(devices: Mapping[str, Any], group: str | None = None) -> set[str]:
    """IDs of the pool's cards (every group's when `group` is None) the device manager reports unhealthy
    (spec.groups[].accelerators[].status)."""
    found = set()
    for entry in as_mappings(as_mapping(devices.get("spec")).get("groups")):
        if group is None or accelerator_key(str(entry.get("manufacturer")), str(entry.get("id"))) == group:
            for acc in as_mappings(entry.get("accelerators")):
                if as_mapping(acc.get("status")).get("unhealthy") is True:
                    found.add(str(acc.get("id")))
    return found


NodeMost = tuple[int, int, int]
"""What one request could get of one node: (free cards, shares, the freest sliceable card's percent)."""


def node_most(node: Iterable[CardState]) -> NodeMost:
    """One node's part of the views' onceMaxRequest (their maximum over the nodes is the pool's)."""
    free = shares = percent = 0
    for card in node:
        free += card.free
        if card.serves(Mode.SHARED):
            shares += card.room // SHARED_UNITS
        if card.serves(Mode.SLICED):
            percent = max(percent, card.room // MEMORY_PERCENT_UNITS)
    return free, shares, percent


def accelerator_views(nodes: Iterable[Sequence[CardState]]) -> AcceleratorViews:
    """The exclusive, shared and sliced views of a pool, given each node's cards."""
    cards = sliceable = free = shares = percent = 0
    most_free = most_shares = most_percent = 0
    for node in nodes:
        node_free = node_shares = 0
        for card in node:
            node_free += card.free
            if card.serves(Mode.SHARED):
                node_shares += card.room // SHARED_UNITS
            if card.serves(Mode.SLICED):
                card_percent = card.room // MEMORY_PERCENT_UNITS
                percent += card_percent
                most_percent = max(most_percent, card_percent)
        cards += len(node)
        sliceable += sum(card.sliceable for card in node)
        free, shares = free + node_free, shares + node_shares
        most_free, most_shares = max(most_free, node_free), max(most_shares, node_shares)
    return AcceleratorViews(
        View(Quantity(cards), Quantity(free), Quantity(most_free)),
        View(Quantity(cards * SHARES_PER_CARD), Quantity(shares), Quantity(most_shares)),
        View(Quantity(sliceable * PERCENT_PER_CARD), Quantity(percent), Quantity(most_percent)),
    )


def _cpu_amounts(flavors: object, field: str) -> Iterable[tuple[str, Quantity | None]]:
    """(flavor name, the quantity `field` of its cpu resource, or None) for each flavor entry."""
    for flavor in as_mappings(flavors):
        cpu = [r for r in as_mappings(flavor.get("resources")) if r.get("name") == CPU]
        yield str(flavor.get("name", "")), quantity_of(cpu[0].get(field, "0")) if cpu else None


def _reserved_cpu(cluster_queue: Mapping[str, Any], overcommit: bool) -> Quantity:
    reserved = Quantity(0)
    for _, total in _cpu_amounts(as_mapping(cluster_queue.get("status")).get("flavorsReservation"), "total"):
        if total is not None and overcommit:
            total = Quantity(total.milli_value() // GENERAL_CPU_OVERCOMMIT_MILLI)
        reserved += total or 0
    return reserved


def cpu_view(cluster_queue: Mapping[str, Any], overcommit: bool) -> View:
    """The CPU view of a CPU-only type from its ClusterQueue's cpu quota and reservations (cores)."""
    capacity, once_max = Quantity(0), Quantity(0)
    for group in as_mappings(as_mapping(cluster_queue.get("spec")).get("resourceGroups")):
        for name, nominal in _cpu_amounts(group.get("flavors"), "nominalQuota"):
            capacity += nominal or 0
            once_max = max(once_max, Quantity(flavor_count(name)))
    remaining = max(capacity - _reserved_cpu(cluster_queue, overcommit), Quantity(0))
    return View(capacity, remaining, min(once_max, remaining))
