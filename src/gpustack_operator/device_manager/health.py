"""Cards that heal: a fault is reported at once, a recovery only once it has held for a few checks in a row.

A detector reads each card's health afresh every period (NVML's volatile uncorrected ECC count, a card the
library can no longer read, a card gone from the bus). Taken raw, a card whose fault comes and goes would
flap between healthy and unhealthy every period, and each flip moves the kubelet's allocatable, the
ledger's Devices spec and every InstanceType view of its pool. So the detect loop passes each detection
through a `HealthGate`: a card that reads unhealthy, or that was seen before and is missing now, goes on
probation and is reported unhealthy until it has read healthy in ``recovery_checks`` consecutive
detections; then it is reported healthy again, without restarting anything. A card never seen before (a
driver that finished loading after start) is taken as it reads, so a node's first report is not held
back. Only healthy readings in a row count: one unhealthy reading, or an absence, starts the count again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import replace
from typing import Final

from gpustack_operator.device_manager.model import Card

log = logging.getLogger(__name__)

DEFAULT_RECOVERY_CHECKS: Final = 3
"""Consecutive healthy detections before a faulted card is reported healthy (45 s at the default 15 s)."""


class HealthGate:
    """Holds a faulted card unhealthy until it has read healthy ``recovery_checks`` detections in a row."""

    def __init__(self, recovery_checks: int = DEFAULT_RECOVERY_CHECKS) -> None:
        if recovery_checks < 1:
            raise ValueError(f"recovery_checks must be at least 1, got {recovery_checks}")
        self.recovery_checks = recovery_checks
        self._seen: set[str] = set()
        self._probation: dict[str, int] = {}
        """Card UUID -> healthy readings in a row since its last fault."""

    @property
    def on_probation(self) -> set[str]:
        """UUIDs of the cards reported unhealthy by the gate (faulted, or not yet healthy long enough)."""
        return set(self._probation)

    def apply(self, cards: Iterable[Card]) -> list[Card]:
        """The cards with health as it should be reported; call once per detection."""
        cards = list(cards)
        present = {card.uuid for card in cards}
        for uuid in sorted(self._seen - present):
            if self._probation.get(uuid) != 0:
                log.warning("card=%s is no longer detected; it must read healthy again to count", uuid)
            self._probation[uuid] = 0
        reported = [self._judge(card) for card in cards]
        self._seen |= present
        return reported

    def _judge(self, card: Card) -> Card:
        streak = self._probation.get(card.uuid)
        if not card.healthy:
            if streak != 0:
                log.warning("card=%s manufacturer=%s index=%d reads unhealthy", card.uuid, card.manufacturer,
                            card.index)  # fmt: skip
            self._probation[card.uuid] = 0
            return card
        if streak is None:
            return card
        streak += 1
        if streak >= self.recovery_checks:
            del self._probation[card.uuid]
            log.info("card=%s healthy again after %d checks in a row", card.uuid, streak)
            return card
        self._probation[card.uuid] = streak
        return replace(card, healthy=False)
