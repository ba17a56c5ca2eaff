"""The detect loop re-reports only on change, survives detection failures, tells listeners, heals cards
after enough healthy checks, holds back a node whose one awaited manufacturer has not answered yet, and
waits on the injected clock."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from gpustack_operator.api.types.devices import DevicesGroup
from gpustack_operator.device_manager.health import HealthGate
from gpustack_operator.device_manager.model import Card, DetectionError, Metrics
from gpustack_operator.device_manager.monitor import DetectLoop, format_metrics
from gpustack_operator.device_manager.simulated import SimulatedBackend
from gpustack_operator.runtime import FakeClock
from tests.helpers import eventually

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


class LateDriver:
    """A node whose NVIDIA driver has not answered yet: no cards until `load()`."""

    name = "late-driver"

    def __init__(self) -> None:
        self.cards: list[Card] = []

    def load(self) -> None:
        self.cards = [Card("nvidia", "NVIDIA A10", 23028, f"GPU-{i}", i, minor=i) for i in range(2)]

    def detect(self) -> list[Card]:
        return list(self.cards)


def cards_in(report: list[DevicesGroup]) -> list[str]:
    return [acc["id"] for group in report for acc in group.get("accelerators") or []]


async def test_a_node_whose_awaited_manufacturer_has_not_answered_publishes_nothing_and_keeps_detecting(
    caplog: pytest.LogCaptureFixture,
) -> None:
    backend, reporter, clock = LateDriver(), RecordingReporter(), FakeClock()
    heard: list[list[str]] = []
    detect = loop(
        backend,
        reporter,
        period=15.0,
        clock=clock,
        awaited="nvidia",
        listeners=[lambda groups: heard.append(cards_in(list(groups)))],
    )
    task = asyncio.ensure_future(detect.run())
    try:
        with caplog.at_level(logging.ERROR, logger="gpustack_operator.device_manager.monitor"):
            for passes in range(1, 5):
                if passes > 1:
                    clock.advance(15.0)
                await eventually(lambda: clock.pending == 1)  # detected, and asleep until the next period
                assert detect.steps == passes
        assert (reporter.reports, heard, detect.groups) == ([], [], None), "no Devices, no plugin servers"
        said = [r.getMessage() for r in caplog.records if "but not detected" in r.getMessage()]
        assert len(said) == 4, "an error for every held-back pass"
        assert "manufacturer=nvidia" in said[0]

        backend.load()
        clock.advance(15.0)
        await eventually(lambda: len(reporter.reports) == 1)
        assert cards_in(reporter.reports[0]) == ["GPU-0", "GPU-1"]
        assert heard == [["GPU-0", "GPU-1"]]

        backend.cards = []  # once it has answered, losing every card is news like any other
        clock.advance(15.0)
        await eventually(lambda: len(reporter.reports) == 2)
        assert reporter.reports[-1] == []
        assert heard[-1] == []
    finally:
        task.cancel()


async def test_without_an_awaited_manufacturer_the_empty_first_result_is_published() -> None:
    backend, reporter, clock = LateDriver(), RecordingReporter(), FakeClock()
    heard: list[int] = []
    detect = loop(backend, reporter, clock=clock, listeners=[lambda groups: heard.append(len(groups))])
    task = asyncio.ensure_future(detect.run())
    try:
        await eventually(lambda: len(reporter.reports) == 1 and clock.pending == 1)
        assert reporter.reports == [[]]
        assert heard == [0]
        backend.load()
        clock.advance(15.0)
        await eventually(lambda: len(reporter.reports) == 2)
        assert cards_in(reporter.reports[-1]) == ["GPU-0", "GPU-1"]
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
