"""Can every Pod of a Workload be placed whole on one node's cards? The per-card admission decision; pure.

The original check counted cards across the whole pool ("#cards with remaining >= demand >= count"), so 3
free cards on one node and 2 on another passed a 5-card Pod that no node can ever host. A Pod's cards all
come from one node (the kubelet allocates them), so here each Pod of each podSet is placed whole on one of
its candidate nodes (Pods of one podSet may use different nodes), consuming the cards it takes before the
next Pod is placed. A card accepts a need by the card model (rules.cards), the rule the InstanceType's views
and the device manager's Allocate use too: exclusive takes a free card; a share takes 160,000 units of a free
or Shared card; a slice takes its units of a free or Sliced card that is logically sliceable; one Pod never
takes two needs from one card.

Placement is a bin-packing heuristic (largest Pods first, each on the node it leaves tightest, each need on
the card it fits tightest, cards already in its mode first, as the device plugin's preference packs): a
"yes" always comes with a placement that exists, so Ready never promises the impossible; a "no" may
rarely miss a packing an exhaustive search would find, which costs a retry, never a stuck Pod.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from gpustack_operator.rules.cards import CardState, Need, best_card

__all__ = [
    "READY_MESSAGE",
    "RETRY_MESSAGE",
    "Ask",
    "Ledger",
    "Placement",
    "Plan",
    "Stuck",
    "attempt",
    "place",
    "plan",
]

READY_MESSAGE: Final = "the assigned flavor pool has enough free cards to place the request"
RETRY_MESSAGE: Final = (
    "no node in the assigned flavor pool currently has enough free cards; will retry as capacity frees"
)

Ledger = Mapping[str, Mapping[str, CardState]]
"""Node (Devices name) -> card ID -> its ledger row: the usable cards of the candidate nodes."""
Placement = dict[str, dict[str, Need]]
"""Node -> card ID -> what the placed Pods take from it (one mode per card, units summed)."""


@dataclass(frozen=True)
class Plan:
    """A placement, and the node of each Pod of each ask (`pods[i]`: ask i's Pods, in the asks' order)."""

    cards: Placement
    pods: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Stuck:
    """Where a placement stopped: Pod `pod` (0-based) of ask `ask` fits on no node left to it."""

    ask: int
    pod: int


@dataclass(frozen=True)
class Ask:
    """`count` Pods of one podSet, each needing `needs` on one of `nodes`."""

    count: int
    needs: tuple[Need, ...]
    nodes: tuple[str, ...]


def _fit(cards: Mapping[str, CardState], needs: Sequence[Need]) -> dict[str, Need] | None:
    """Cards of one node for every need of one Pod, tightest first; None when they do not fit.

    Largest need first, each on the card the card model picks (rules.cards.best_card: a card already held
    in the need's mode before a free one, then the least remaining, then the lowest index, as the device
    plugin's preference does), one need per card: for needs of one mode, acceptance is a threshold on
    remaining, so this finds a fit whenever one exists, and a node that cannot fit a Pod cannot fit it after
    more of its cards are taken either. Shares too: N shares are N cards with a share each (as the original
    check counted them, and as the device plugin allocates them), never two shares of one card.
    """
    chosen: dict[str, Need] = {}
    for need in sorted(needs, key=lambda n: -n.units):
        best = best_card(((cid, card) for cid, card in cards.items() if cid not in chosen), need)
        if best is None:
            return None
        chosen[best] = need
    return chosen


def place(asks: Sequence[Ask], ledger: Ledger) -> Placement | None:
    """Where every Pod of every ask goes (see the module docstring), or None when some Pod fits nowhere."""
    found = plan(asks, ledger)
    return None if found is None else found.cards


def plan(asks: Sequence[Ask], ledger: Ledger) -> Plan | None:
    """`place`, also saying which node each Pod went to (what the check pins a podSet to)."""
    found = attempt(asks, ledger)
    return found if isinstance(found, Plan) else None


def attempt(asks: Sequence[Ask], ledger: Ledger) -> Plan | Stuck:
    """`plan`, or which Pod of which ask found no node (what the fit subresource tells a user).

    The node a Pod leaves tightest is the fitting node with the least spare units now (a fit takes
    exactly the Pod's units wherever it lands), so an ask's nodes wait in a heap by (spare, name) and
    the first that fits is taken; a node that does not fit is dropped for the rest of the ask (see
    `_fit`), and the node just used goes back with its new spare. A node whose spare is below the Pod's
    units is never tried (a Pod's needs take distinct cards, each within its room), so a many-card Pod
    does not pop its way through every fuller node first; the node chosen is the same. Each Pod costs a
    few heap operations, not a pass over every node: a decision on 1,000 nodes stays in milliseconds
    (bench_admission_decision, bench_fit).
    """
    state: dict[str, Mapping[str, CardState]] = dict(ledger)  # a node's cards are copied when first changed
    changed: dict[str, dict[str, CardState]] = {}
    spare: dict[str, int] = {}
    placement: Placement = {}
    pods: list[list[str]] = [[] for _ in asks]
    for index, ask in sorted(enumerate(asks), key=lambda a: -sum(n.units for n in a[1].needs)):
        units = sum(n.units for n in ask.needs)
        heap = []
        for node in set(ask.nodes) & state.keys():
            if len(state[node]) >= len(ask.needs):
                if node not in spare:
                    spare[node] = sum(card.room for card in state[node].values())
                if spare[node] >= units:  # less room than the Pod's units: no fit there, now or later
                    heap.append((spare[node], node))
        heapq.heapify(heap)
        for pod in range(ask.count):
            while heap:
                _, node = heapq.heappop(heap)
                fit = _fit(state[node], ask.needs)
                if fit is not None:
                    break
            else:
                return Stuck(index, pod)
            cards = changed.get(node)
            if cards is None:
                cards = changed[node] = dict(state[node])
                state[node] = cards
            for cid, need in fit.items():
                cards[cid] = cards[cid].take(need)
                held = placement.setdefault(node, {}).get(cid)
                placement[node][cid] = need if held is None else replace(held, units=held.units + need.units)
            spare[node] -= units
            pods[index].append(node)
            if spare[node] >= units:
                heapq.heappush(heap, (spare[node], node))
    return Plan(placement, tuple(tuple(p) for p in pods))
