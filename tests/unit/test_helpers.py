"""The test suite's own waits: `consistently` fails at the first moment a condition stops holding."""

from __future__ import annotations

import time

import pytest

from tests.helpers import consistently


async def test_consistently_passes_when_the_condition_holds_for_the_whole_window() -> None:
    calls = 0

    def holds() -> bool:
        nonlocal calls
        calls += 1
        return True

    started = time.monotonic()
    await consistently(holds, duration=0.2, interval=0.05, what="always true")
    assert time.monotonic() - started >= 0.2
    assert calls >= 3


async def test_consistently_fails_at_once_when_the_condition_breaks_naming_it() -> None:
    answers = iter([True, True, False, True])
    started = time.monotonic()
    with pytest.raises(AssertionError, match=r"the flag broke after .*answer: False"):
        await consistently(lambda: next(answers), duration=5, interval=0.01, what="the flag")
    assert time.monotonic() - started < 1, "it does not wait out the window"


async def test_consistently_keeps_the_message_of_an_assertion_in_the_probe() -> None:
    async def probe() -> bool:
        assert 1 + 1 == 3, "arithmetic changed"
        return True

    with pytest.raises(AssertionError, match=r"no surprise broke after .*arithmetic changed"):
        await consistently(probe, duration=1, what="no surprise")
