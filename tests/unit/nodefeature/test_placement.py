"""Placement of the per-card check: every Pod whole on one candidate node, capacity consumed as it goes."""

from __future__ import annotations

import pytest

from gpustack_operator.nodefeature.carddemand import CardNeed
from gpustack_operator.nodefeature.placement import Ask, place
from gpustack_operator.nodefeature.podslices import CardMode
from gpustack_operator.nodefeature.views import Card

D = 1_600_000
FREE = Card(D, 0, True)
EX, SH = CardNeed(CardMode.EXCLUSIVE, D), CardNeed(CardMode.SHARED, 160_000)


def half_sliced() -> Card:
    return Card(D // 2, 3, True)


def node(*cards: Card) -> dict[str, Card]:
    return {f"c{n}": card for n, card in enumerate(cards)}


def sliced(units: int) -> CardNeed:
    return CardNeed(CardMode.SLICED, units)


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
        ({"a": node(Card(D, 0, False))}, [Ask(1, (sliced(1),), ("a",))], False),  # not logically sliceable
        ({"a": node(Card(160_000, 2, True))}, [Ask(1, (SH,), ("a",))], True),  # the last share of a card
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
def test_place_decides_per_node(ledger: dict[str, dict[str, Card]], asks: list[Ask], fits: bool) -> None:
    assert (place(asks, ledger) is not None) is fits


def test_the_placement_names_the_cards_and_units_it_uses() -> None:
    ledger = {"a": node(FREE, Card(400_000, 3, True)), "b": node(*[FREE] * 5)}
    placement = place([Ask(1, (EX,) * 5, TWO), Ask(2, (sliced(200_000),), TWO)], ledger)
    assert placement == {
        "b": {f"c{n}": EX for n in range(5)},
        # slices pack onto the card already Sliced, the tightest that fits
        "a": {"c1": sliced(400_000)},
    }


def test_the_tightest_node_is_used_first() -> None:
    ledger = {"a": node(*[FREE] * 8), "b": node(*[FREE] * 2)}
    assert place([Ask(1, (EX,) * 2, TWO)], ledger) == {"b": {"c0": EX, "c1": EX}}
