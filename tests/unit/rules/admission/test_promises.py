"""The promise rule: cards planned for a Ready workload are held until the ledger shows them, or it goes."""

from __future__ import annotations

import random

from gpustack_operator.rules.admission.placement import Ask, place
from gpustack_operator.rules.admission.promises import Promises
from gpustack_operator.rules.cards import CardState, Mode, Need

D = 1_600_000
FREE, HELD = CardState(D, 0, True), CardState(0, 1, True)
EX = Need(Mode.EXCLUSIVE, D)
FOUR = [Ask(1, (EX,) * 4, ("a",))]


def ledger(*cards: CardState) -> dict[str, dict[str, CardState]]:
    return {"a": {f"c{n}": card for n, card in enumerate(cards)}}


def promised_first(book: Promises, now: float = 0.0) -> dict[str, dict[str, CardState]]:
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


def test_the_kubelet_may_pick_other_cards_and_the_planned_ones_are_released() -> None:
    book = Promises()
    seen = {"a": {f"c{n}": FREE for n in range(6)}}
    placement = place([Ask(1, (EX,) * 2, ("a",))], seen)
    assert placement == {"a": {"c0": EX, "c1": EX}}
    book.hold("w1", placement, seen, 0)
    # the Pod got c4, c5 instead: they stand in for c0, c1, so the 4 cards really free are free
    moved = {"a": {**seen["a"], "c4": HELD, "c5": HELD}}
    assert place([Ask(1, (EX,) * 4, ("a",))], book.against(moved, 1, skip="w2")) is not None
    assert "w1" not in book
    assert place([Ask(1, (EX,) * 5, ("a",))], book.against(moved, 2, skip="w2")) is None


def test_a_pod_bound_to_another_node_of_the_flavor_releases_the_planned_node() -> None:
    book = Promises()
    seen = {"a": {f"c{n}": FREE for n in range(4)}, "b": {f"c{n}": FREE for n in range(4)}}
    placement = place(FOUR, seen)
    assert placement is not None
    assert set(placement) == {"a"}
    book.hold("w1", placement, seen, 0)
    assert place([Ask(2, (EX,) * 4, ("a", "b"))], book.against(seen, 1, skip="w2")) is None
    # the scheduler bound the Pod to b: a is free again, and b is full
    moved = {"a": seen["a"], "b": {f"c{n}": HELD for n in range(4)}}
    assert place(FOUR, book.against(moved, 2, skip="w2")) == placement
    assert len(book) == 0


def test_a_promised_card_consumed_by_its_own_pod_releases_no_other_promise() -> None:
    book = Promises()
    seen = {"a": {f"c{n}": FREE for n in range(3)}}
    one = [Ask(1, (EX,), ("a",))]
    first = place(one, book.against(seen, 0, skip="w1"))
    assert first == {"a": {"c0": EX}}
    book.hold("w1", first, seen, 0)
    second = place(one, book.against(seen, 0, skip="w2"))
    assert second == {"a": {"c1": EX}}
    book.hold("w2", second, seen, 0)
    # w1's Pod takes its own card c0: only w1's promise goes, w2 keeps c1
    taken = {"a": {**seen["a"], "c0": HELD}}
    assert place([Ask(1, (EX,) * 2, ("a",))], book.against(taken, 1, skip="w3")) is None
    assert "w2" in book
    assert "w1" not in book


def test_a_share_taken_elsewhere_does_not_release_an_exclusive_promise() -> None:
    book = Promises()
    seen = promised_first(book)
    seen = {"a": {**seen["a"], "c9": FREE}}
    book.against(seen, 0.5, skip="w2")
    shared = {"a": {**seen["a"], "c9": CardState(D - 160_000, 2, True)}}
    assert place([Ask(1, (EX,), ("a",))], book.against(shared, 1, skip="w2")) is None
    assert "w1" in book


def test_a_promise_ends_when_the_workload_goes_or_after_the_ttl() -> None:
    book = Promises(ttl=60)
    seen = promised_first(book)
    book.drop("w1")
    assert place(FOUR, book.against(seen, 1, skip="w2")) is not None
    promised_first(book, now=100)
    assert place(FOUR, book.against(seen, 159, skip="w2")) is None
    assert place(FOUR, book.against(seen, 160, skip="w2")) is not None
    assert len(book) == 0


def test_a_view_is_what_the_book_would_answer_and_changes_nothing() -> None:
    """`view` (the fit subresource's read-only overlay) equals `against` on a copy of the book, over seeded
    histories of promises, consumption on and off the plan, frees and expiry; the book is left as it was."""
    rng = random.Random(27)
    modes = (EX, Need(Mode.SHARED, 160_000), Need(Mode.SLICED, 400_000))
    for _ in range(200):
        book = Promises(ttl=5.0)
        cards = {node: {f"{node}{n}": FREE for n in range(4)} for node in "abc"}
        for step in range(12):
            now = float(step)
            current = {node: dict(rows) for node, rows in cards.items()}
            before = book.promised()
            seen = book.view(current, now)
            assert seen == book.copy().against(current, now)
            assert book.promised() == before
            assert book.view(current, now) == seen
            if rng.random() < 0.5:
                need = rng.choice(modes)
                asks = [Ask(1, (need,) * rng.randint(1, 2), tuple(cards))]
                placement = place(asks, book.against(current, now, skip=f"w{step}"))
                if placement is not None:
                    book.hold(f"w{step}", placement, current, now)
            else:
                book.against(current, now)
            for rows in cards.values():  # Pods start on planned or other cards, or end
                for cid in list(rows):
                    roll = rng.random()
                    if roll < 0.15:
                        rows[cid] = HELD
                    elif roll < 0.25:
                        rows[cid] = CardState(D - 400_000, int(Mode.SLICED), True)
                    elif roll < 0.35:
                        rows[cid] = FREE
