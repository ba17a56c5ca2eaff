"""Cards promised to Workloads the check passed but the ledger does not show yet: the promise rule; pure.

Kueue's quota cannot see cards, and the Devices ledger lags an admission by the whole start of the Pod
(ungated, scheduled, allocated by the device plugin, recorded by the device manager). Two workloads checked
in the same second would both see the last free card in the ledger. So:

The promise rule. When the check turns a workload Ready, the cards its placement planned are promised to
it: every later decision sees the ledger minus the promised units. A promised card is released when the
ledger shows that card consumed (its remaining dropped by at least the promised units since the promise),
when the workload no longer holds its admission (finished, evicted, deleted: `drop`), or after `ttl` seconds
(a Pod that never starts must not hold cards forever). Decisions are made one at a time (a decision is
synchronous code, see controllers.node_devices_admission_check), so a promise is in the book before the
next decision reads it.

Substitutes. The plan is ours, not the scheduler's nor the kubelet's: the scheduler may bind the Pod to
another node of the flavor, and the device plugin prefers the lowest card index where the plan took the
tightest card by ID. The Pod's cards then show up consumed in the ledger while the planned ones stay
promised, and a node would look fuller than it is, by the Pod's cards, until the workload ends or the ttl
(found on the sandbox: a running 1-card Pod kept a second, free card out of every decision for 5 minutes).
So the book remembers the remaining it last saw of every card; a card no promise covers whose remaining
dropped since is taken as a promised Pod's card placed elsewhere, and releases as many still-unconsumed
promised cards of the same mode and at most those units, on the same node first, then on the other nodes
of the same decision, oldest promise first. This rests on the premise above (every card consumer of a pool
comes through the check); a Pod that bypasses Kueue can release a promise early, which costs at worst a
Pod that waits unschedulable, as it would without the check.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from gpustack_operator.rules.admission.placement import Ledger, Placement
from gpustack_operator.rules.cards import CardState, Need

__all__ = ["DEFAULT_TTL", "Promises"]

DEFAULT_TTL: Final = 300.0
"""Seconds a promise is held at most: a Pod normally starts (and shows in the ledger) well within that."""

CardRef = tuple[str, str]
"""(node, card ID)."""


@dataclass
class _Promise:
    at: float
    cards: dict[CardRef, tuple[Need, int]] = field(default_factory=dict)
    """Card -> (what is promised, the card's remaining when promised)."""


class Promises:
    """The promise book of one check controller (see the module docstring)."""

    def __init__(self, ttl: float = DEFAULT_TTL) -> None:
        self.ttl = ttl
        self._book: dict[str, _Promise] = {}
        self._last: dict[CardRef, int] = {}
        """Card -> the remaining the book last saw (to notice a Pod's card placed off the plan)."""

    def __contains__(self, workload: str) -> bool:
        return workload in self._book

    def __len__(self) -> int:
        return len(self._book)

    def hold(self, workload: str, placement: Placement, ledger: Ledger, now: float) -> None:
        """Promise the placement's cards to the workload (replacing any promise it had)."""
        promise = _Promise(now)
        self._remember(ledger)
        for node, cards in placement.items():
            for cid, need in cards.items():
                promise.cards[(node, cid)] = (need, ledger[node][cid].remaining)
        self._book[workload] = promise

    def copy(self) -> Promises:
        """A copy of the book (`view` answers a what-if without one)."""
        twin = Promises(self.ttl)
        twin._book = {w: _Promise(p.at, dict(p.cards)) for w, p in self._book.items()}
        twin._last = dict(self._last)
        return twin

    def drop(self, workload: str) -> None:
        """The workload no longer holds an admission: its promise goes."""
        self._book.pop(workload, None)

    def against(self, ledger: Ledger, now: float, *, skip: str = "") -> dict[str, Mapping[str, CardState]]:
        """The ledger less every other workload's promise; releases what the ledger shows consumed.

        The nodes no promise touches are the ledger's own mappings (nothing here changes them)."""
        expired, released = self._settle(ledger, now)
        self._remember(ledger)
        for workload in expired:
            del self._book[workload]
        for workload, ref in released:
            del self._book[workload].cards[ref]
        for workload in [w for w, p in self._book.items() if not p.cards]:
            del self._book[workload]
        return self._apply(ledger, skip, frozenset(), frozenset())

    def view(self, ledger: Ledger, now: float) -> dict[str, Mapping[str, CardState]]:
        """What `against` would return now, without changing the book (a what-if's read-only overlay: the
        releases it would make are only left out of the sum, the cards last seen are not updated)."""
        expired, released = self._settle(ledger, now)
        return self._apply(ledger, "", expired, released)

    def _settle(self, ledger: Ledger, now: float) -> tuple[frozenset[str], frozenset[tuple[str, CardRef]]]:
        """The promises past the ttl, and the (workload, card) promises the ledger shows consumed, directly
        or through a substitute (see the module docstring); the book is left as it is."""
        covered = {ref for promise in self._book.values() for ref in promise.cards}
        drops = self._drops(ledger, covered)
        expired = frozenset(w for w, promise in self._book.items() if now - promise.at >= self.ttl)
        released: set[tuple[str, CardRef]] = set()
        for workload, promise in self._book.items():
            if workload in expired:
                continue
            for ref, (need, before) in promise.cards.items():
                card = (ledger.get(ref[0]) or {}).get(ref[1])
                if card is not None and card.remaining <= before - need.units:
                    released.add((workload, ref))
        for ref, (drop, mode) in drops.items():
            self._substitute(ref[0], drop, mode, ledger, expired, released)
        return expired, frozenset(released)

    def _apply(
        self,
        ledger: Ledger,
        skip: str,
        expired: frozenset[str],
        released: frozenset[tuple[str, CardRef]],
    ) -> dict[str, Mapping[str, CardState]]:
        """The ledger less the promised cards of every workload but `skip`, the expired and the released
        left out; a node's cards are copied when a promise first applies to it."""
        seen: dict[str, Mapping[str, CardState]] = dict(ledger)
        changed: dict[str, dict[str, CardState]] = {}
        for workload, promise in self._book.items():
            if workload == skip or workload in expired:
                continue
            for (node, cid), (need, _) in promise.cards.items():
                if (workload, (node, cid)) in released or cid not in seen.get(node, {}):
                    continue
                cards = changed.get(node)
                if cards is None:
                    cards = changed[node] = dict(seen[node])
                    seen[node] = cards
                cards[cid] = cards[cid].take(need)
        return seen

    def _remember(self, ledger: Ledger) -> None:
        for node, cards in ledger.items():
            for cid, card in cards.items():
                self._last[(node, cid)] = card.remaining

    def _drops(self, ledger: Ledger, covered: set[CardRef]) -> dict[CardRef, tuple[int, int]]:
        """Cards no promise covers whose remaining dropped since last seen: (units dropped, mode now)."""
        drops = {}
        last = self._last
        for node, cards in ledger.items():
            for cid, card in cards.items():
                before = last.get((node, cid))
                if before is not None and card.remaining < before and (node, cid) not in covered:
                    drops[(node, cid)] = (before - card.remaining, card.mode)
        return drops

    def _substitute(
        self,
        node: str,
        drop: int,
        mode: int,
        ledger: Ledger,
        expired: frozenset[str],
        released: set[tuple[str, CardRef]],
    ) -> None:
        """Add to `released` the promised, unconsumed cards the drop on an uncovered card of `node` stands
        in for."""
        candidates = sorted(
            (ref[0] != node, promise.at, ref, workload)
            for workload, promise in self._book.items()
            if workload not in expired
            for ref, (need, _) in promise.cards.items()
            if ref[0] in ledger and need.mode == mode and (workload, ref) not in released
        )
        for _, _, ref, workload in candidates:
            need = self._book[workload].cards[ref][0]
            if need.units <= drop:
                released.add((workload, ref))
                drop -= need.units

    def promised(self) -> Mapping[str, frozenset[CardRef]]:
        """Workload -> the cards still promised to it (for logs and tests)."""
        return {w: frozenset(p.cards) for w, p in self._book.items()}
