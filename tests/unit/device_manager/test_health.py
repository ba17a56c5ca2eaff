"""Cards that heal: a fault shows at once, a recovery only after enough healthy readings in a row."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpustack_operator.device_manager.health import DEFAULT_RECOVERY_CHECKS, HealthGate
from gpustack_operator.device_manager.model import Card

CARD = Card("nvidia", "NVIDIA A10", 23028, "GPU-a", 0)
OTHER = Card("nvidia", "NVIDIA A10", 23028, "GPU-b", 1)
H, U, GONE = "healthy", "unhealthy", "gone"


def reading(state: str) -> list[Card]:
    """One detection of CARD (and OTHER, always healthy) as the detector reads them."""
    return [OTHER] if state == GONE else [replace(CARD, healthy=state == H), OTHER]


def reported(gate: HealthGate, states: list[str]) -> list[str]:
    """What the gate reports for CARD after each detection ("gone" while it is not detected)."""
    out = []
    for state in states:
        cards = {c.uuid: c for c in gate.apply(reading(state))}
        assert cards[OTHER.uuid].healthy, "a card that never faulted is never held back"
        out.append(GONE if CARD.uuid not in cards else H if cards[CARD.uuid].healthy else U)
    return out


@pytest.mark.parametrize(
    ("checks", "readings", "expected"),
    [
        pytest.param(
            3, [H, U, H, H, H, H], [H, U, U, U, H, H], id="a fault shows at once, heals after 3 in a row"
        ),
        pytest.param(
            3, [U, H, H, U, H, H, H], [U, U, U, U, U, U, H], id="a relapse mid-recovery starts again"
        ),
        pytest.param(3, [H, GONE, H, H, H], [H, GONE, U, U, H], id="a card lost and back must prove itself"),
        pytest.param(2, [GONE, GONE, H], [GONE, GONE, H], id="a card first seen late is taken as it reads"),
        pytest.param(1, [H, U, H, U, H], [H, U, H, U, H], id="one check heals at the first healthy reading"),
        pytest.param(
            2, [U, U, U, H, H], [U, U, U, U, H], id="a lasting fault stays reported until it clears"
        ),
    ],
)
def test_reported_health_follows_the_readings_with_recovery_held_back(
    checks: int, readings: list[str], expected: list[str]
) -> None:
    assert reported(HealthGate(checks), readings) == expected


def test_the_gate_names_the_cards_it_holds_unhealthy() -> None:
    gate = HealthGate(2)
    gate.apply(reading(U))
    assert gate.on_probation == {CARD.uuid}
    gate.apply(reading(H))
    assert gate.on_probation == {CARD.uuid}
    gate.apply(reading(H))
    assert gate.on_probation == set()


def test_the_default_waits_a_few_checks_and_zero_checks_is_refused() -> None:
    assert HealthGate().recovery_checks == DEFAULT_RECOVERY_CHECKS == 3
    with pytest.raises(ValueError, match="at least 1"):
        HealthGate(0)
