"""The manager and its controllers: what gets reconciled, when, how often, and what happens on failure."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import generate_latest

from gpustack_operator.controllerkit.manager import Manager
from gpustack_operator.controllerkit.predicates import generation_changed
from gpustack_operator.controllerkit.reconciler import Result, TerminalError
from gpustack_operator.controllerkit.spec import ControllerSpec
from gpustack_operator.controllerkit.watches import for_, mapped, owns
from gpustack_operator.kube import errors, resources
from gpustack_operator.runtime import Backoff, FakeClock, Supervisor
from tests.helpers import eventually, yield_to_loop

from .fakes import FakeElector, FakeInformers, FakeRecorder, ScriptedReconciler, obj, running

CM, SECRET, NS = resources.CONFIGMAPS, resources.SECRETS, resources.NAMESPACES


def build(
    *,
    concurrency: int = 1,
    elector: FakeElector | None = None,
    clock: FakeClock | None = None,
    **spec: object,
) -> tuple[Manager, FakeInformers, ScriptedReconciler, FakeRecorder]:
    informers, reconciler, recorder = FakeInformers(), ScriptedReconciler(), FakeRecorder()
    manager = Manager(informers, elector=elector, recorder=recorder, clock=clock)  # type: ignore[arg-type]
    spec.setdefault("primary", for_(CM))
    manager.add(ControllerSpec("configmaps", reconciler, concurrency=concurrency, **spec))  # type: ignore[arg-type]
    return manager, informers, reconciler, recorder


async def test_every_cached_object_is_reconciled_once_caches_have_synced() -> None:
    manager, informers, reconciler, _ = build()
    for name in ("a", "b", "c"):
        informers.informer(CM).add(obj(name))
    async with running(manager):
        await eventually(lambda: len(reconciler.calls) == 3)
        await yield_to_loop(20)
    assert sorted(reconciler.calls) == ["ns/a", "ns/b", "ns/c"]
    assert manager.synced


async def test_changes_while_a_key_is_reconciled_cost_one_more_reconcile_not_one_each() -> None:
    manager, informers, reconciler, _ = build()
    reconciler.gate = asyncio.Event()
    cms = informers.informer(CM)
    cms.add(obj("a"))
    async with running(manager):
        await eventually(lambda: reconciler.calls == ["ns/a"])
        for rv in range(2, 12):
            cms.add(obj("a", rv=str(rv)))
        reconciler.gate.set()
        await eventually(lambda: len(reconciler.finished) == 2)
        await yield_to_loop(20)
    assert reconciler.calls == ["ns/a", "ns/a"]


async def test_one_key_is_never_reconciled_by_two_workers_at_once() -> None:
    manager, informers, reconciler, _ = build(concurrency=4)
    cms = informers.informer(CM)
    async with running(manager):
        for rv in range(50):
            for name in ("a", "b"):
                cms.add(obj(name, rv=str(rv)))
            await asyncio.sleep(0)
        await eventually(lambda: not reconciler.running and len(reconciler.calls) >= 2)
    assert reconciler.overlaps == []
    assert reconciler.calls[-2:].count("ns/a") + reconciler.calls[-2:].count("ns/b") == 2


@pytest.mark.parametrize(
    ("change", "reconciles"),
    [
        pytest.param({"generation": 2, "rv": "2"}, 2, id="a spec change (new generation) is reconciled"),
        pytest.param({"generation": 1, "rv": "2"}, 1, id="a status-only write (same generation) is skipped"),
    ],
)
async def test_generation_predicate_filters_status_only_updates(
    change: dict[str, object], reconciles: int
) -> None:
    manager, informers, reconciler, _ = build(primary=for_(CM, generation_changed))
    cms = informers.informer(CM)
    cms.add(obj("a"))
    async with running(manager):
        await eventually(lambda: len(reconciler.calls) == 1)
        cms.add(obj("a", **change))  # type: ignore[arg-type]
        await yield_to_loop(50)
    assert len(reconciler.calls) == reconciles


async def test_a_change_to_an_owned_object_reconciles_its_controlling_owner() -> None:
    manager, informers, reconciler, _ = build(watches=(owns(SECRET, CM),))
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": "u", "controller": True}
    other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "not-controller", "uid": "v"}
    async with running(manager):
        informers.informer(SECRET).add(obj("child", metadata={"ownerReferences": [other, ref]}))
        informers.informer(SECRET).add(obj("orphan"))
        await eventually(lambda: reconciler.calls == ["ns/owner"])
        await yield_to_loop(20)
    assert reconciler.calls == ["ns/owner"]


async def test_a_mapped_watch_reconciles_the_keys_its_function_names() -> None:
    def queues_of(namespace: dict[str, object]) -> list[str]:
        return [f"{namespace['metadata']['name']}/queue"]  # type: ignore[index]

    manager, informers, reconciler, _ = build(watches=(mapped(NS, queues_of),))
    async with running(manager):
        informers.informer(NS).add(obj("team-a", namespace=None))
        await eventually(lambda: reconciler.calls == ["team-a/queue"])


async def test_a_deleted_object_is_reconciled_so_the_reconciler_can_clean_up() -> None:
    manager, informers, reconciler, _ = build()
    cms = informers.informer(CM)
    cms.add(obj("a"))
    async with running(manager):
        await eventually(lambda: len(reconciler.calls) == 1)
        cms.delete(obj("a"))
        await eventually(lambda: len(reconciler.calls) == 2)


async def test_a_failing_reconcile_is_retried_with_growing_backoff_until_it_succeeds() -> None:
    clock = FakeClock()
    backoff = Backoff(base=1.0, cap=100.0)
    manager, informers, reconciler, _ = build(clock=clock, backoff=backoff)
    reconciler.outcomes["ns/a"] = [RuntimeError("boom"), RuntimeError("boom"), Result()]
    informers.informer(CM).add(obj("a"))
    async with running(manager):
        await eventually(lambda: len(reconciler.calls) == 1)
        clock.advance(0.9)
        await yield_to_loop(20)
        assert len(reconciler.calls) == 1, "retried before its backoff"
        clock.advance(0.1)
        await eventually(lambda: len(reconciler.calls) == 2)
        clock.advance(1.9)
        await yield_to_loop(20)
        assert len(reconciler.calls) == 2, "the second retry waits twice as long"
        clock.advance(0.1)
        await eventually(lambda: reconciler.finished == ["ns/a"])
        queue = manager.controllers["configmaps"].queue
        assert queue is not None
        assert queue.num_requeues("ns/a") == 0, "success forgets the backoff"


async def test_conflicts_are_retried_like_other_errors() -> None:
    manager, informers, reconciler, _ = build(backoff=Backoff(base=0.0, cap=0.0))
    conflict = errors.Conflict(status=409, reason="Conflict", message="the object has been modified")
    reconciler.outcomes["ns/a"] = [conflict, conflict, Result()]
    informers.informer(CM).add(obj("a"))
    async with running(manager):
        await eventually(lambda: reconciler.finished == ["ns/a"])
    assert reconciler.calls == ["ns/a"] * 3


async def test_a_terminal_error_is_recorded_as_a_warning_event_and_not_retried(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    manager, informers, reconciler, recorder = build(clock=clock)
    reconciler.outcomes["ns/bad"] = [
        TerminalError("spec.replicas: 'three' is not an integer", reason="InvalidSpec")
    ]
    informers.informer(CM).add(obj("bad"))
    informers.informer(CM).add(obj("good"))
    async with running(manager):
        await eventually(lambda: len(reconciler.calls) == 2)
        clock.advance(10_000)
        await yield_to_loop(50)
    assert sorted(reconciler.calls) == ["ns/bad", "ns/good"]
    [(regarding, type_, reason, note)] = recorder.events
    assert (regarding["kind"], regarding["namespace"], regarding["name"]) == ("ConfigMap", "ns", "bad")
    assert (type_, reason) == ("Warning", "InvalidSpec")
    assert "'three' is not an integer" in note
    assert any("ns/bad" in r.getMessage() and r.levelname == "ERROR" for r in caplog.records)


async def test_requeue_after_reconciles_again_when_the_time_comes() -> None:
    clock = FakeClock()
    manager, informers, reconciler, _ = build(clock=clock)
    reconciler.outcomes["ns/a"] = [Result(requeue_after=30.0)]
    informers.informer(CM).add(obj("a"))
    async with running(manager):
        await eventually(lambda: len(reconciler.calls) == 1)
        clock.advance(29)
        await yield_to_loop(20)
        assert len(reconciler.calls) == 1
        clock.advance(1)
        await eventually(lambda: len(reconciler.calls) == 2)


async def test_stopping_lets_a_reconcile_in_flight_finish() -> None:
    manager, informers, reconciler, _ = build()
    reconciler.gate = asyncio.Event()
    informers.informer(CM).add(obj("a"))
    async with Supervisor("test") as sup:
        sup.spawn("manager", manager.run)
        await eventually(lambda: reconciler.running == {"ns/a"})
        stopping = asyncio.ensure_future(sup.stop())
        await yield_to_loop(20)
        assert not stopping.done(), "stop must wait for the reconcile in flight"
        reconciler.gate.set()
        assert await stopping == []
    assert reconciler.finished == ["ns/a"]


async def test_only_the_leader_reconciles_and_a_lost_lease_stops_reconciles_at_once() -> None:
    elector = FakeElector()
    manager, informers, reconciler, _ = build(elector=elector)
    reconciler.gate = asyncio.Event()
    informers.informer(CM).add(obj("a"))
    async with running(manager):
        await eventually(lambda: manager.synced)
        await yield_to_loop(50)
        assert reconciler.calls == [], "a standby must not reconcile"
        elector.grant()
        await eventually(lambda: reconciler.running == {"ns/a"})
        elector.revoke()
        await eventually(lambda: not reconciler.running)
        assert reconciler.finished == [], "a fenced reconcile is cancelled, not finished"
        informers.informer(CM).add(obj("b"))
        await yield_to_loop(50)
        assert reconciler.calls == ["ns/a"], "no reconciles while not leading"
        reconciler.gate.set()
        elector.grant()
        await eventually(lambda: sorted(reconciler.finished) == ["ns/a", "ns/b"])
    assert elector.released == 1, "shutting down while leading releases the lease"


async def test_metrics_count_reconciles_by_result_and_show_leadership() -> None:
    elector = FakeElector()
    manager, informers, reconciler, _ = build(elector=elector, backoff=Backoff(base=0.0, cap=0.0))
    reconciler.outcomes["ns/a"] = [RuntimeError("boom"), Result()]
    informers.informer(CM).add(obj("a"))
    elector.grant()
    async with running(manager):
        await eventually(lambda: reconciler.finished == ["ns/a"])
        text = generate_latest(manager.metrics.registry).decode()
    assert 'gpustack_controller_reconcile_total{controller="configmaps",result="success"} 1.0' in text
    assert 'gpustack_controller_reconcile_total{controller="configmaps",result="error"} 1.0' in text
    assert 'gpustack_controller_reconcile_errors_total{controller="configmaps"} 1.0' in text
    assert 'gpustack_workqueue_retries_total{name="configmaps"} 1.0' in text
    assert 'gpustack_leader_election_status{name="worker.gpustack.ai"} 1.0' in text
    assert 'gpustack_informer_relists_total{informer="configmaps"} 0.0' in text


def test_two_controllers_may_not_share_a_name() -> None:
    manager, _, reconciler, _ = build()
    with pytest.raises(ValueError, match="already registered"):
        manager.add(ControllerSpec("configmaps", reconciler, for_(CM)))


async def test_a_throttled_watch_reconciles_a_lone_change_at_once_and_a_burst_once_per_period() -> None:
    clock = FakeClock()
    fan_in = mapped(SECRET, lambda s: ["ns/pool"], throttle=1.0)
    manager, informers, reconciler, _ = build(clock=clock, primary=for_(CM, throttle=1.0), watches=(fan_in,))
    secrets, pools = informers.informer(SECRET), informers.informer(CM)
    async with running(manager):
        await eventually(lambda: reconciler.calls == [])
        secrets.add(obj("node-0"))
        await eventually(lambda: reconciler.calls == ["ns/pool"])  # a lone change: at once
        for n in range(1, 100):  # a burst within the period
            secrets.add(obj(f"node-{n}"))
            clock.advance(0.005)
        await yield_to_loop(50)
        assert reconciler.calls == ["ns/pool"], "the burst waits for the period to end"
        clock.advance(0.6)  # the period (1 s from the lone change) is over
        await eventually(lambda: reconciler.calls == ["ns/pool"] * 2)  # the burst: one reconcile
        await yield_to_loop(50)
        clock.advance(10)
        await yield_to_loop(50)
        assert reconciler.calls == ["ns/pool"] * 2

        # The primary: its creation and a spec change (generation) at once, status churn throttled.
        pools.add(obj("pool", rv="1"))
        await eventually(lambda: reconciler.calls == ["ns/pool"] * 3)
        pools.add(obj("pool", rv="2", status={"seen": 1}))
        await yield_to_loop(50)
        assert len(reconciler.calls) == 3, "a status change within the period waits"
        pools.add(obj("pool", rv="3", generation=2))
        await eventually(lambda: len(reconciler.calls) == 4)  # an admin's edit: at once
        clock.advance(1.0)
        await eventually(lambda: len(reconciler.calls) == 5)  # the held status change, once
