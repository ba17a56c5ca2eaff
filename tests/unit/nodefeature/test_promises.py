"""The promise rule: cards planned for a Ready workload are held until the ledger shows them, or it goes."""

from __future__ import annotations

from gpustack_operator.nodefeature.carddemand import CardNeed
from gpustack_operator.nodefeature.placement import Ask, place
from gpustack_operator.nodefeature.podslices import CardMode
from gpustack_operator.nodefeature.promises import Promises
from gpustack_operator.nodefeature.views import Card

D = 1_600_000
FREE, HELD = Card(D, 0, True), Card(0, 1, True)
EX = CardNeed(CardMode.EXCLUSIVE, D)
FOUR = [Ask(1, (EX,) * 4, ("a",))]


def ledger(*cards: Card) -> dict[str, dict[str, Card]]:
    return {"a": {f"c{n}": card for n, card in enumerate(cards)}}


def promised_first(book: Promises, now: float = 0.0) -> dict[str, dict[str, Card]]:
    """Workload w1 is checked Ready on 4 free cards; returns the ledger it was decided on."""
    seen = ledger(*[FREE] * 4)
    placement = place(FOUR, book.against(seen, now, skip="w1"))
    assert placement is not None
    book.hold("w1", placement, seen, now)
    return seen


def test_two_workloads_in_the_same_second_are_never_both_promised_the_cards() -> None:
    book = Promises()
    seen = promised_first(book)
    assert place(FOUR, book.against(seen, 0.5, skip="w2")) is None
    # its own promise does not count against a workload
    assert place(FOUR, book.against(seen, 0.5, skip="w1")) is not None


def test_a_promise_ends_when_the_ledger_shows_the_cards_consumed() -> None:
    book = Promises()
    promised_first(book)
    # the Pod took two cards so far: the other two stay promised
    partly = ledger(HELD, HELD, FREE, FREE)
    assert place([Ask(1, (EX,), ("a",))], book.against(partly, 1, skip="w2")) is None
    assert len(book) == 1
    book.against(ledger(*[HELD] * 4), 2)
    assert "w1" not in book


def test_the_kubelet_may_pick_other_cards_and_the_count_held_stays_right() -> None:
    book = Promises()
    seen = {"a": {f"c{n}": FREE for n in range(6)}}
    placement = place([Ask(1, (EX,) * 2, ("a",))], seen)
    assert placement == {"a": {"c0": EX, "c1": EX}}
    book.hold("w1", placement, seen, 0)
    # the Pod got c4, c5 instead: c0, c1 remain held, so 2 of the 4 free cards are left
    moved = {"a": {**seen["a"], "c4": HELD, "c5": HELD}}
    assert place([Ask(1, (EX,) * 2, ("a",))], book.against(moved, 1, skip="w2")) is not None
    assert place([Ask(1, (EX,) * 3, ("a",))], book.against(moved, 1, skip="w2")) is None


def test_a_promise_ends_when_the_workload_goes_or_after_the_ttl() -> None:
    book = Promises(ttl=60)
    seen = promised_first(book)
    book.drop("w1")
    assert place(FOUR, book.against(seen, 1, skip="w2")) is not None
    promised_first(book, now=100)
    assert place(FOUR, book.against(seen, 159, skip="w2")) is None
    assert place(FOUR, book.against(seen, 160, skip="w2")) is not None
    assert len(book) == 0
