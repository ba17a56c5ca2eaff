"""Placement of the per-card check: every Pod whole on one candidate node, capacity consumed as it goes."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from gpustack_operator.rules.admission.placement import Ask, Placement, place
from gpustack_operator.rules.cards import CardState, Mode, Need

D = 1_600_000
FREE = CardState(D, 0, True)
EX, SH = Need(Mode.EXCLUSIVE, D), Need(Mode.SHARED, 160_000)


def half_sliced() -> CardState:
    return CardState(D // 2, 3, True)


def node(*cards: CardState) -> dict[str, CardState]:
    return {f"c{n}": card for n, card in enumerate(cards)}


def sliced(units: int) -> Need:
    return Need(Mode.SLICED, units)


TWO = ("a", "b")


@pytest.mark.parametrize(
    ("ledger", "asks", "fits"),
    [
        # 3 free cards on one node and 2 on the other: the pool has 5, no node has them
        ({"a": node(*[FREE] * 3), "b": node(*[FREE] * 2)}, [Ask(1, (EX,) * 5, TWO)], False),
        ({"a": node(*[FREE] * 5), "b": node(*[FREE] * 2)}, [Ask(1, (EX,) * 5, TWO)], True),
        # every card half sliced: the credits add up, no card is free
        ({"a": node(*[half_sliced()] * 8)}, [Ask(1, (EX,), ("a",))], False),
        ({"a": node(*[half_sliced()] * 8)}, [Ask(1, (sliced(800_000),), ("a",))], True),
        ({"a": node(*[half_sliced()] * 8)}, [Ask(1, (sliced(800_001),), ("a",))], False),
        ({"a": node(*[half_sliced()] * 8)}, [Ask(1, (SH,), ("a",))], False),  # a Sliced card takes no share
        (
            {"a": node(CardState(D, 0, False))},
            [Ask(1, (sliced(1),), ("a",))],
            False,
        ),  # not logically sliceable
        ({"a": node(CardState(160_000, 2, True))}, [Ask(1, (SH,), ("a",))], True),  # the last share of a card
        # Pods of one podSet may use different nodes; capacity is consumed Pod by Pod
        ({"a": node(*[FREE] * 3), "b": node(*[FREE] * 2)}, [Ask(2, (EX,) * 2, TWO)], True),
        ({"a": node(*[FREE] * 3), "b": node(*[FREE] * 2)}, [Ask(3, (EX,) * 2, TWO)], False),
        # one Pod never takes two needs from one card, even with room for both
        ({"a": node(FREE)}, [Ask(1, (SH, SH), ("a",))], False),
        ({"a": node(FREE)}, [Ask(2, (SH,), ("a",))], True),
        # only the candidate nodes count
        ({"a": node(*[FREE] * 8), "b": node(FREE)}, [Ask(1, (EX,) * 2, ("b",))], False),
        # two podSets share the nodes' capacity
        ({"a": node(*[FREE] * 4)}, [Ask(1, (EX,) * 3, ("a",)), Ask(1, (EX,) * 2, ("a",))], False),
        ({"a": node(*[FREE] * 4)}, [Ask(1, (EX,) * 2, ("a",)), Ask(2, (EX,), ("a",))], True),
        ({}, [Ask(1, (EX,), ("a",))], False),
        ({}, [], True),
    ],
)
def test_place_decides_per_node(ledger: dict[str, dict[str, CardState]], asks: list[Ask], fits: bool) -> None:
    assert (place(asks, ledger) is not None) is fits


def test_the_placement_names_the_cards_and_units_it_uses() -> None:
    ledger = {"a": node(FREE, CardState(400_000, 3, True)), "b": node(*[FREE] * 5)}
    placement = place([Ask(1, (EX,) * 5, TWO), Ask(2, (sliced(200_000),), TWO)], ledger)
    assert placement == {
        "b": {f"c{n}": EX for n in range(5)},
        # slices pack onto the card already Sliced, the tightest that fits
        "a": {"c1": sliced(400_000)},
    }


def test_the_tightest_node_is_used_first() -> None:
    ledger = {"a": node(*[FREE] * 8), "b": node(*[FREE] * 2)}
    assert place([Ask(1, (EX,) * 2, TWO)], ledger) == {"b": {"c0": EX, "c1": EX}}


# ---- the heap search decides exactly as a pass over every node would -------------------------------------


def _reference_place(asks: list[Ask], ledger: dict[str, dict[str, CardState]]) -> Placement | None:
    """The plain statement of the rule: every Pod on the fitting node left with the least spare units."""
    state = {n: dict(cards) for n, cards in ledger.items()}
    placement: Placement = {}
    for ask in sorted(asks, key=lambda a: -sum(n.units for n in a.needs)):
        for _ in range(ask.count):
            options = []
            for n in sorted(set(ask.nodes) & state.keys()):
                fit = _reference_fit(state[n], ask.needs)
                if fit is not None:
                    left = sum(c.remaining for c in state[n].values()) - sum(x.units for x in fit.values())
                    options.append((left, n, fit))
            if not options:
                return None
            _, n, fit = min(options, key=lambda o: (o[0], o[1]))
            for cid, need in fit.items():
                state[n][cid] = state[n][cid].take(need)
                held = placement.setdefault(n, {}).get(cid)
                placement[n][cid] = need if held is None else replace(held, units=held.units + need.units)
    return placement


def _reference_fit(cards: dict[str, CardState], needs: tuple[Need, ...]) -> dict[str, Need] | None:
    chosen: dict[str, Need] = {}
    for need in sorted(needs, key=lambda n: -n.units):
        fitting = [
            (c.free, c.remaining, cid) for cid, c in cards.items() if cid not in chosen and c.can_take(need)
        ]
        if not fitting:
            return None
        chosen[min(fitting)[2]] = need
    return chosen


def _random_card(rng: random.Random) -> CardState:
    roll = rng.random()
    if roll < 0.5:
        return FREE
    if roll < 0.7:
        return CardState(0, 1, True)
    if roll < 0.85:
        return CardState(rng.choice([200_000, 400_000, 800_000, 1_200_000]), 3, rng.random() < 0.9)
    return CardState(D - 160_000 * rng.randrange(1, 10), 2, True)


def _random_ask(rng: random.Random, nodes: tuple[str, ...]) -> Ask:
    mode = rng.choice([Mode.EXCLUSIVE, Mode.SHARED, Mode.SLICED])
    units = {Mode.EXCLUSIVE: D, Mode.SHARED: 160_000}.get(mode) or rng.choice([100_000, 400_000, 800_000])
    needs = (Need(mode, units),) * rng.randrange(1, 6)
    return Ask(rng.randrange(1, 5), needs, tuple(rng.sample(nodes, rng.randrange(1, len(nodes) + 1))))


@pytest.mark.parametrize("seed", range(300))
def test_the_heap_search_places_exactly_as_a_pass_over_every_node(seed: int) -> None:
    rng = random.Random(seed)
    nodes = tuple(f"n{i}" for i in range(rng.randrange(1, 12)))
    ledger = {n: {f"c{i}": _random_card(rng) for i in range(rng.randrange(1, 9))} for n in nodes}
    asks = [_random_ask(rng, nodes) for _ in range(rng.randrange(1, 4))]
    assert place(asks, ledger) == _reference_place(asks, ledger)
