"""The detect loop re-reports only on change, survives detection failures, tells listeners, heals cards
after enough healthy checks, and waits on the injected clock."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpustack_operator.api.types.devices import DevicesGroup
from gpustack_operator.device_manager.health import HealthGate
from gpustack_operator.device_manager.model import Card, DetectionError, Metrics
from gpustack_operator.device_manager.monitor import DetectLoop, format_metrics
from gpustack_operator.device_manager.simulated import SimulatedBackend
from gpustack_operator.runtime import FakeClock
from tests.unit.runtime.helpers import eventually

INVENTORY = Path(__file__).parents[3] / "src/gpustack_operator/sandbox/inventory.yaml"


class RecordingReporter:
    """Stands in for Reporter: remembers each report."""

    def __init__(self) -> None:
        self.client: Any = None
        self.node = "a10-0"
        self.reports: list[list[DevicesGroup]] = []

    async def report(self, groups: Sequence[DevicesGroup]) -> bool:
        self.reports.append(list(groups))
        return True


class FlakyBackend:
    name = "flaky"

    def __init__(self, inner: SimulatedBackend) -> None:
        self.inner = inner
        self.failing = False

    def detect(self) -> list[Card]:
        if self.failing:
            raise DetectionError("library went away")
        return self.inner.detect()


def loop(backend: Any, reporter: RecordingReporter, **kwargs: Any) -> DetectLoop:
    return DetectLoop(backend, reporter, rebuild_ledger=False, **kwargs)


async def test_unchanged_cards_are_reported_once_and_a_fault_is_reported_again() -> None:
    backend = SimulatedBackend(INVENTORY, "a10-0")
    reporter = RecordingReporter()
    heard: list[int] = []
    detect = loop(backend, reporter, listeners=[lambda groups: heard.append(len(groups))])
    for _ in range(5):
        await detect.step()
    assert len(reporter.reports) == 1
    backend.mark_unhealthy(backend.detect()[2].uuid)
    assert await detect.step()
    assert len(reporter.reports) == 2
    assert reporter.reports[-1][0]["accelerators"][2]["status"] == {"unhealthy": True}
    assert heard == [1, 1]


async def test_periodic_resync_rechecks_the_objects() -> None:
    reporter = RecordingReporter()
    detect = loop(SimulatedBackend(INVENTORY, "a10-0"), reporter, resync_every=3)
    for _ in range(6):
        await detect.step()
    assert len(reporter.reports) == 3


async def test_a_failed_detection_keeps_the_last_report() -> None:
    backend = FlakyBackend(SimulatedBackend(INVENTORY, "a10-0"))
    reporter = RecordingReporter()
    detect = loop(backend, reporter)
    await detect.step()
    backend.failing = True
    assert not await detect.step()
    assert detect.groups is not None
    assert len(detect.groups[0]["accelerators"]) == 4
    assert len(reporter.reports) == 1


async def test_each_report_kicks_the_ledger_writer_instead_of_writing_the_ledger_itself() -> None:
    backend = SimulatedBackend(INVENTORY, "a10-0")
    reporter = RecordingReporter()  # no client: writing the ledger here would fail
    kicks: list[int] = []
    detect = loop(backend, reporter, resync_every=3, after_report=lambda: kicks.append(len(reporter.reports)))
    for _ in range(4):
        await detect.step()
    backend.mark_unhealthy(backend.detect()[0].uuid)
    await detect.step()
    assert kicks == [1, 2, 3], "first report, the periodic resync, the new health - each then the ledger"


def health_of(report: list[DevicesGroup]) -> list[bool]:
    return [not acc["status"]["unhealthy"] for acc in report[0]["accelerators"]]


async def test_a_cleared_fault_is_reported_healthy_after_the_recovery_checks_on_the_loops_clock() -> None:
    backend = SimulatedBackend(INVENTORY, "a10-0")
    reporter = RecordingReporter()
    clock = FakeClock()
    detect = loop(backend, reporter, period=15.0, health=HealthGate(2), clock=clock)
    task = asyncio.ensure_future(detect.run())
    try:
        await eventually(lambda: len(reporter.reports) == 1 and clock.pending == 1)
        sick = backend.detect()[1].uuid
        backend.mark_unhealthy(sick)
        await asyncio.sleep(0.05)
        assert len(reporter.reports) == 1, "nothing is read again until the clock moves a period"
        clock.advance(15.0)
        await eventually(lambda: len(reporter.reports) == 2 and clock.pending == 1)
        assert health_of(reporter.reports[-1]) == [True, False, True, True]

        backend.clear_faults()
        clock.advance(15.0)  # first healthy reading: still on probation, nothing new to report
        await eventually(lambda: detect.steps == 3 and clock.pending == 1)
        assert len(reporter.reports) == 2
        clock.advance(15.0)  # second in a row: healed
        await eventually(lambda: len(reporter.reports) == 3)
        assert health_of(reporter.reports[-1]) == [True, True, True, True]
    finally:
        task.cancel()


def test_metrics_table_shows_unknown_values_as_dashes() -> None:
    table = format_metrics(
        [Metrics("ascend", "npu-0", 0, False), Metrics("nvidia", "GPU-x", 1, True, 100, 5, 7, 50)]
    )
    header, ascend, nvidia = table.splitlines()
    assert header.split()[:3] == ["MANUFACTURER", "IDX", "UUID"]
    assert ascend.split() == ["ascend", "0", "npu-0", "UNHEALTHY", "-/-", "-", "-"]
    assert nvidia.split() == ["nvidia", "1", "GPU-x", "healthy", "5/100", "7%", "50C"]
