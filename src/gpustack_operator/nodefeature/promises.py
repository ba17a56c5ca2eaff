"""Cards promised to Workloads the check passed but the ledger does not show yet: the promise rule; pure.

Kueue's quota cannot see cards, and the Devices ledger lags an admission by the whole start of the Pod
(ungated, scheduled, allocated by the device plugin, recorded by the device manager). Two workloads checked
in the same second would both see the last free card in the ledger. So:

The promise rule. When the check turns a workload Ready, the cards its placement planned are promised to
it: every later decision sees the ledger minus the promised units. A promised card is released when the
ledger shows that card consumed (its remaining dropped by at least the promised units since the promise;
if the kubelet picks another card of the node, that card shows up in the ledger while the planned one is
still held, so the node's total held stays right until the Pod's own card releases its twin's promise), when
the workload no longer holds its admission (finished, evicted, deleted: `drop`), or after `ttl` seconds
(a Pod that never starts must not hold cards forever). Decisions are made one at a time (the controller runs
one worker), so a promise is in the book before the next decision reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from gpustack_operator.nodefeature.carddemand import CardNeed
from gpustack_operator.nodefeature.placement import Ledger, Placement, take
from gpustack_operator.nodefeature.views import Card

__all__ = ["DEFAULT_TTL", "Promises"]

DEFAULT_TTL: Final = 300.0
"""Seconds a promise is held at most: a Pod normally starts (and shows in the ledger) well within that."""

CardRef = tuple[str, str]
"""(node, card ID)."""


@dataclass
class _Promise:
    at: float
    cards: dict[CardRef, tuple[CardNeed, int]] = field(default_factory=dict)
    """Card -> (what is promised, the card's remaining when promised)."""


class Promises:
    """The promise book of one check controller (see the module docstring)."""

    def __init__(self, ttl: float = DEFAULT_TTL) -> None:
        self.ttl = ttl
        self._book: dict[str, _Promise] = {}

    def __contains__(self, workload: str) -> bool:
        return workload in self._book

    def __len__(self) -> int:
        return len(self._book)

    def hold(self, workload: str, placement: Placement, ledger: Ledger, now: float) -> None:
        """Promise the placement's cards to the workload (replacing any promise it had)."""
        promise = _Promise(now)
        for node, cards in placement.items():
            for cid, need in cards.items():
                promise.cards[(node, cid)] = (need, ledger[node][cid].remaining)
        self._book[workload] = promise

    def drop(self, workload: str) -> None:
        """The workload no longer holds an admission: its promise goes."""
        self._book.pop(workload, None)

    def against(self, ledger: Ledger, now: float, *, skip: str = "") -> dict[str, dict[str, Card]]:
        """The ledger less every other workload's promise; releases what the ledger shows consumed."""
        seen = {node: dict(cards) for node, cards in ledger.items()}
        for workload, promise in list(self._book.items()):
            if now - promise.at >= self.ttl:
                del self._book[workload]
                continue
            for ref, (need, before) in list(promise.cards.items()):
                card = (ledger.get(ref[0]) or {}).get(ref[1])
                if card is not None and card.remaining <= before - need.units:
                    del promise.cards[ref]
                elif card is not None and workload != skip:
                    seen[ref[0]][ref[1]] = take(seen[ref[0]][ref[1]], need)
            if not promise.cards:
                del self._book[workload]
        return seen

    def promised(self) -> Mapping[str, frozenset[CardRef]]:
        """Workload -> the cards still promised to it (for logs and tests)."""
        return {w: frozenset(p.cards) for w, p in self._book.items()}
