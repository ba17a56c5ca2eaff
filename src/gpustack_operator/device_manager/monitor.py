"""The detect loop: re-detect every period, publish when the cards change, keep the ledger in step.

Detection is level-based: each period the backend is read afresh (a card turning unhealthy or falling
off the bus shows up within one period; a recovered card comes back once the HealthGate has seen it
healthy for its number of checks in a row, see health.py), the cards are grouped, and
the NodeFeature/Devices are re-reported only when the groups differ from the last report; every
``resync_every`` periods the objects are re-checked anyway, so an object someone deleted or edited is
repaired. Listeners (the device plugin's inventories) hear each change. The ledger (Devices.status) must
follow a new spec: a loop alone in its process (`device-manager monitor --report`) rebuilds it itself,
while `serve`, where the LedgerWriter is the one writer of Devices.status, passes ``rebuild_ledger=False``
and an ``after_report`` that kicks it. The loop sleeps on an injectable Clock, so tests move its time.
`device-manager monitor` uses `format_metrics` to print readings.

Given ``awaited`` (`serve --manufacturer X` naming one manufacturer, unless `--no-fast-failed`), the loop
publishes nothing - no NodeFeature, no Devices, no news to the listeners, so no device-plugin servers -
until a detection has found a card of X at least once. That DaemonSet is scheduled by X's PCI vendor
label, so a node that answers with none of X's cards is one whose driver has not answered yet, and
reporting it empty would advertise a GPU node with no GPUs. Each such pass is logged as an error and
repeated the next period; the process never exits for it. Once X has answered, an empty detection (every
card gone) is published like any other.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence

from gpustack_operator.api.types.devices import DevicesGroup
from gpustack_operator.device_manager import ledger
from gpustack_operator.device_manager.grouping import group_cards
from gpustack_operator.device_manager.health import HealthGate
from gpustack_operator.device_manager.model import Backend, DetectionError, Metrics
from gpustack_operator.device_manager.reporting import Reporter
from gpustack_operator.kube.errors import KubeError
from gpustack_operator.rules.environ import DEFAULT_ENVIRON, Environ
from gpustack_operator.runtime import Clock, MonotonicClock

log = logging.getLogger(__name__)

GroupsListener = Callable[[Sequence[DevicesGroup]], None]


class DetectLoop:
    """Detects with ``backend`` and, given a reporter, publishes and rebuilds the ledger of its node."""

    def __init__(
        self,
        backend: Backend,
        reporter: Reporter | None = None,
        *,
        period: float = 15.0,
        resync_every: int = 20,
        rebuild_ledger: bool = True,
        after_report: Callable[[], None] = lambda: None,
        listeners: Iterable[GroupsListener] = (),
        environ: Environ = DEFAULT_ENVIRON,
        health: HealthGate | None = None,
        clock: Clock | None = None,
        awaited: str | None = None,
    ) -> None:
        self.backend = backend
        self.reporter = reporter
        self.period = period
        self.resync_every = max(resync_every, 1)
        self.rebuild_ledger = rebuild_ledger
        self.after_report = after_report
        self.listeners = list(listeners)
        self.environ = environ
        self.health = health or HealthGate()
        self.clock: Clock = clock or MonotonicClock()
        self.groups: list[DevicesGroup] | None = None
        """The groups of the last successful detection (None before the first)."""
        self.awaited = awaited
        """The manufacturer whose cards must be seen once before anything is published (None: no hold)."""
        self._steps = 0
        self._unreported = True

    @property
    def steps(self) -> int:
        """How many periods' work has run (each one a detection, successful or not)."""
        return self._steps

    async def detect(self) -> list[DevicesGroup] | None:
        """Read the backend once (in a thread: vendor libraries block) and gate each card's health; None
        when it cannot be read (a failed read counts as no check: it neither heals nor faults a card)."""
        try:
            cards = await asyncio.to_thread(self.backend.detect)
        except DetectionError as exc:
            log.error("backend=%s detection failed, keeping the last report: %s", self.backend.name, exc)
            return None
        return group_cards(self.health.apply(cards), self.environ)

    async def step(self) -> bool:
        """One period's work; True when the groups changed."""
        groups = await self.detect()
        if groups is not None and self._held_back(groups):
            groups = None
        changed = groups is not None and groups != self.groups
        if groups is not None and changed:
            log.info(
                "backend=%s detected %d cards in %d groups", self.backend.name, _count(groups), len(groups)
            )
            self.groups = groups
            self._unreported = True
            for listener in self.listeners:
                listener(groups)
        self._steps += 1
        if self.reporter is None or self.groups is None:
            return changed
        try:
            if self._unreported or self._steps % self.resync_every == 0:
                await self.reporter.report(self.groups)
                self._unreported = False
                self.after_report()
            if self.rebuild_ledger:
                await ledger.sync_status(self.reporter.client, self.reporter.node)
        except KubeError as exc:
            log.warning("node=%s reporting failed, retrying next period: %s", self.reporter.node, exc)
        return changed

    def _held_back(self, groups: Sequence[DevicesGroup]) -> bool:
        """True while the awaited manufacturer has never shown a card (see the module docstring)."""
        if self.awaited is None:
            return False
        if any(g["manufacturer"] == self.awaited and g.get("accelerators") for g in groups):
            log.info("manufacturer=%s answered; publishing its cards", self.awaited)
            self.awaited = None
            return False
        log.error(
            "manufacturer=%s is expected (--manufacturer) but not detected: not reporting a node with no "
            "accelerators, detecting again in %gs (is its driver loaded? --no-fast-failed reports it empty)",
            self.awaited,
            self.period,
        )
        return True

    async def run(self) -> None:
        """Step every ``period`` seconds until cancelled."""
        while True:
            await self.step()
            await self.clock.sleep(self.period)


def _count(groups: Sequence[DevicesGroup]) -> int:
    return sum(len(group.get("accelerators") or []) for group in groups)


def _value(number: int, unit: str = "") -> str:
    return "-" if number < 0 else f"{number}{unit}"


def format_metrics(readings: Sequence[Metrics]) -> str:
    """A table, one card per line: manufacturer, index, UUID, health, VRAM used/total, utilisation, °C."""
    lines = [
        f"{'MANUFACTURER':<12} {'IDX':>3} {'UUID':<44} {'HEALTH':<9} {'VRAM MiB':>15} {'UTIL':>5} {'TEMP':>5}"
    ]
    for r in sorted(readings, key=lambda r: (r.manufacturer, r.index)):
        vram = f"{_value(r.memory_used_mib)}/{_value(r.memory_total_mib)}"
        lines.append(
            f"{r.manufacturer:<12} {r.index:>3} {r.uuid:<44} {'healthy' if r.healthy else 'UNHEALTHY':<9} "
            f"{vram:>15} {_value(r.utilization_percent, '%'):>5} {_value(r.temperature_c, 'C'):>5}"
        )
    return "\n".join(lines)
