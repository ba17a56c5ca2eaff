"""Backoff: delays double from the base, stop at the cap, and reset after a success."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpustack_operator.runtime.backoff import Attempts, Backoff, KeyedAttempts


@pytest.mark.parametrize(
    ("backoff", "want"),
    [
        pytest.param(Backoff(base=1, cap=8), [1, 2, 4, 8, 8, 8], id="doubles-then-stays-at-cap"),
        pytest.param(Backoff(base=0.5, cap=3, factor=3), [0.5, 1.5, 3, 3], id="custom-factor"),
        pytest.param(Backoff(base=2, cap=2), [2, 2, 2], id="base-equals-cap-is-constant"),
        pytest.param(Backoff(), [0.005, 0.01, 0.02, 0.04], id="defaults-start-at-5ms"),
    ],
)
def test_delays_double_and_cap(backoff: Backoff, want: list[float]) -> None:
    assert [backoff.delay(n) for n in range(len(want))] == pytest.approx(want)


def test_default_cap_is_1000_seconds_even_after_very_many_failures() -> None:
    backoff = Backoff()
    assert backoff.delay(40) == 1000.0
    assert backoff.delay(100_000) == 1000.0  # 2.0**100000 overflows a float; still the cap


@given(
    base=st.floats(min_value=0, max_value=100),
    extra=st.floats(min_value=0, max_value=1000),
    factor=st.floats(min_value=1, max_value=10),
    attempt=st.integers(min_value=0, max_value=5000),
)
def test_delay_never_exceeds_cap_and_never_shrinks(
    base: float, extra: float, factor: float, attempt: int
) -> None:
    backoff = Backoff(base=base, cap=base + extra, factor=factor)
    assert 0 <= backoff.delay(attempt) <= backoff.cap
    assert backoff.delay(attempt) <= backoff.delay(attempt + 1)


@given(jitter=st.floats(min_value=0, max_value=1), draw=st.floats(min_value=0, max_value=0.999999))
def test_jitter_only_shortens_within_its_fraction(jitter: float, draw: float) -> None:
    backoff = Backoff(base=1, cap=100, jitter=jitter, rng=lambda: draw)
    for attempt in range(10):
        plain = min(100.0, 2.0**attempt)
        assert plain * (1 - jitter) - 1e-9 <= backoff.delay(attempt) <= plain


def test_jitter_uses_the_injected_random_source() -> None:
    backoff = Backoff(base=4, cap=100, jitter=0.5, rng=lambda: 0.5)
    assert backoff.delay(0) == pytest.approx(3.0)  # 4 - 4 * 0.5 * 0.5
    assert backoff.delay(1) == pytest.approx(6.0)


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({"base": -1}, id="negative-base"),
        pytest.param({"base": 10, "cap": 1}, id="cap-below-base"),
        pytest.param({"factor": 0.5}, id="shrinking-factor"),
        pytest.param({"jitter": 1.5}, id="jitter-above-one"),
    ],
)
def test_nonsense_policies_are_rejected(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="backoff"):
        Backoff(**kwargs)


def test_attempts_grow_until_reset() -> None:
    attempts: Attempts = Backoff(base=1, cap=10).attempts()
    assert [attempts.next_delay() for _ in range(3)] == [1, 2, 4]
    attempts.reset()
    assert attempts.next_delay() == 1


def test_keyed_attempts_back_off_each_key_on_its_own_and_forget_resets() -> None:
    keyed: KeyedAttempts[str] = KeyedAttempts(Backoff(base=1, cap=10))
    assert [keyed.next_delay("broken") for _ in range(3)] == [1, 2, 4]
    assert keyed.next_delay("healthy") == 1, "another key's failures must not slow this one"
    assert keyed.failures("broken") == 3
    keyed.forget("broken")
    assert keyed.failures("broken") == 0
    assert keyed.next_delay("broken") == 1
    assert len(keyed) == 2
