"""The event recorder: what an Event looks like, and repeats folded into one Event's series."""

from __future__ import annotations

from typing import Any

from gpustack_operator.api.json import JSONObj
from gpustack_operator.kube import errors, resources
from gpustack_operator.kube.events import EventRecorder, object_reference
from gpustack_operator.kube.resources import Resource
from gpustack_operator.runtime import FakeClock


class EventsApi:
    def __init__(self) -> None:
        self.events: dict[tuple[str, str], JSONObj] = {}
        self.writes = 0
        self.fail_creates = False

    async def create(
        self, res: Resource, obj: JSONObj, namespace: str | None = None, dry_run: bool = False
    ) -> JSONObj:
        assert res == resources.EVENTS
        self.writes += 1
        if self.fail_creates:
            raise errors.Forbidden(status=403, reason="Forbidden", message="no")
        self.events[(namespace or "", obj["metadata"]["name"])] = obj
        return obj

    async def patch(
        self, res: Resource, name: str, patch: Any, *, namespace: str | None = None, **_: Any
    ) -> JSONObj:
        self.writes += 1
        event = self.events.get((namespace or "", name))
        if event is None:
            raise errors.NotFound(status=404, reason="NotFound", message="gone")
        event.update(patch)
        return event


CM = object_reference(
    resources.CONFIGMAPS,
    {"metadata": {"name": "bad", "namespace": "team", "uid": "u1", "resourceVersion": "7"}},
)
NODE = object_reference(resources.NODES, {"metadata": {"name": "gpu-0", "uid": "u2"}})


def recorder(api: EventsApi, clock: FakeClock, **kw: Any) -> EventRecorder:
    return EventRecorder(api, instance="worker-0_abc", clock=clock, **kw)


async def test_an_event_names_its_object_reason_note_and_reporter() -> None:
    api = EventsApi()
    rec = recorder(api, FakeClock())
    rec.event(CM, "Warning", "InvalidSpec", "data.replicas: 'three' is not an integer")
    await rec.drain()
    [((namespace, name), event)] = api.events.items()
    assert namespace == "team"
    assert name.startswith("bad.")
    assert event["regarding"] == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "bad",
        "namespace": "team",
        "uid": "u1",
        "resourceVersion": "7",
    }
    assert (event["type"], event["reason"], event["action"]) == ("Warning", "InvalidSpec", "Reconcile")
    assert event["note"] == "data.replicas: 'three' is not an integer"
    assert event["reportingController"] == "gpustack.ai/worker"
    assert event["reportingInstance"] == "worker-0_abc"
    assert event["eventTime"].endswith("Z")
    assert "series" not in event


async def test_an_event_about_a_cluster_scoped_object_goes_to_the_default_namespace() -> None:
    api = EventsApi()
    rec = recorder(api, FakeClock())
    rec.event(NODE, "Normal", "Labelled", "added 3 labels")
    await rec.drain()
    assert [ns for ns, _ in api.events] == ["default"]


async def test_repeats_within_the_window_bump_one_events_series_count() -> None:
    api, clock = EventsApi(), FakeClock()
    rec = recorder(api, clock, flush_interval=10.0)
    for _ in range(50):
        rec.event(CM, "Warning", "InvalidSpec", "same note")
        await rec.drain()
        clock.advance(1.0)
    await rec.flush(force=True)
    [event] = api.events.values()
    assert event["series"]["count"] == 50
    assert api.writes <= 1 + 50 // 10 + 1, "series updates are batched, not one write per repeat"


async def test_a_new_resource_version_of_the_same_object_is_still_the_same_event() -> None:
    api = EventsApi()
    rec = recorder(api, FakeClock(), flush_interval=0.0)
    rec.event(CM, "Warning", "InvalidSpec", "same note")
    rec.event(CM | {"resourceVersion": "8"}, "Warning", "InvalidSpec", "same note")
    await rec.drain()
    [event] = api.events.values()
    assert event["series"]["count"] == 2


async def test_a_different_note_or_reason_is_a_different_event() -> None:
    api = EventsApi()
    rec = recorder(api, FakeClock())
    rec.event(CM, "Warning", "InvalidSpec", "note one")
    rec.event(CM, "Warning", "InvalidSpec", "note two")
    rec.event(CM, "Warning", "Conflict", "note one")
    await rec.drain()
    assert len(api.events) == 3


async def test_after_the_window_a_repeat_starts_a_new_event() -> None:
    api, clock = EventsApi(), FakeClock()
    rec = recorder(api, clock, window=600.0)
    rec.event(CM, "Warning", "InvalidSpec", "note")
    await rec.drain()
    clock.advance(601.0)
    rec.event(CM, "Warning", "InvalidSpec", "note")
    await rec.drain()
    assert len(api.events) == 2


async def test_an_event_expired_by_the_server_is_created_again() -> None:
    api, clock = EventsApi(), FakeClock()
    rec = recorder(api, clock, flush_interval=0.0)
    rec.event(CM, "Warning", "InvalidSpec", "note")
    await rec.drain()
    api.events.clear()  # the apiserver's event TTL ran out
    rec.event(CM, "Warning", "InvalidSpec", "note")
    await rec.drain()
    assert len(api.events) == 1


async def test_a_long_note_is_clipped_to_what_the_api_accepts() -> None:
    api = EventsApi()
    rec = recorder(api, FakeClock())
    rec.event(CM, "Warning", "InvalidSpec", "é" * 2000)
    await rec.drain()
    [event] = api.events.values()
    assert len(event["note"].encode()) <= 1024
    assert event["note"].endswith("...")


async def test_recording_never_raises_and_a_full_queue_drops_events() -> None:
    api = EventsApi()
    api.fail_creates = True
    rec = recorder(api, FakeClock(), max_queued=2)
    for n in range(5):
        rec.event(CM, "Warning", "InvalidSpec", f"note {n}")
    await rec.drain()
    assert api.writes == 2
