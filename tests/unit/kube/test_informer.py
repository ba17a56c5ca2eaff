"""Informer logic against a scripted server: list, watch, bookmarks, 410 relists, reconnects, handlers."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from gpustack_operator.kube import informer as informer_module
from gpustack_operator.kube import resources
from gpustack_operator.kube.informer import Informer, InformerFactory
from gpustack_operator.runtime import Backoff, Supervisor
from tests.helpers import eventually

from .fakes import (
    HANG,
    NO_WAIT,
    Elapse,
    Recorder,
    RecordingClock,
    ScriptedApi,
    bookmark,
    cm,
    dropped,
    event,
    expired,
    gone,
    page,
)

CM = resources.CONFIGMAPS


def make(api: ScriptedApi, **kw: Any) -> tuple[Informer, Recorder]:
    informer = Informer(api, CM, namespace="ns", backoff=kw.pop("backoff", NO_WAIT), **kw)
    recorder = Recorder()
    informer.add_handler(recorder)
    return informer, recorder


@asynccontextmanager
async def running(informer: Informer) -> AsyncIterator[None]:
    task = asyncio.ensure_future(informer.run())
    try:
        yield
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def store_view(informer: Informer) -> dict[str, str]:
    return {obj["metadata"]["name"]: obj["metadata"]["resourceVersion"] for obj in informer.store.list()}


async def test_first_sync_pages_through_the_list_then_watches_from_its_version_with_bookmarks() -> None:
    api = ScriptedApi()
    api.pages.extend([page(cm("a", "5"), rv="10", cont="tok"), page(cm("b", "7"), rv="10")])
    informer, recorder = make(api, page_size=1)
    async with running(informer):
        await asyncio.wait_for(informer.wait_synced(), 5)
        await eventually(lambda: len(api.watch_params) == 1)
    assert [p.get("continue") for p in api.lists] == [None, "tok"]
    assert all(p["limit"] == "1" for p in api.lists)
    assert api.watch_params[0]["resourceVersion"] == "10"
    assert api.watch_params[0]["allowWatchBookmarks"] == "true"
    assert recorder.calls == [("add", "a", "5"), ("add", "b", "7")]
    assert informer.has_synced()
    assert informer.relists == 0


async def test_watch_events_reach_store_and_handlers_without_managed_fields() -> None:
    api = ScriptedApi()
    api.pages.append(page(cm("a", "5"), rv="10"))
    api.watches.append(
        [
            event("ADDED", cm("b", "11")),
            event("MODIFIED", cm("a", "12", k="v")),
            event("DELETED", cm("b", "13")),
            HANG,
        ]
    )
    informer, recorder = make(api)
    async with running(informer):
        await eventually(lambda: informer.resource_version == "13")
    assert recorder.calls == [
        ("add", "a", "5"),
        ("add", "b", "11"),
        ("update", "a", "12"),
        ("delete", "b", "13"),
    ]
    assert store_view(informer) == {"a": "12"}
    assert informer.store.get("ns/a") == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "a", "namespace": "ns", "resourceVersion": "12"},
        "data": {"k": "v"},
    }
    assert informer.events == 3


async def test_bookmark_moves_the_resume_point_without_telling_handlers() -> None:
    api = ScriptedApi()
    api.pages.append(page(cm("a", "5"), rv="10"))
    api.watches.append([bookmark("40"), dropped()])
    informer, recorder = make(api)
    async with running(informer):
        await eventually(lambda: len(api.watch_params) == 2)
    assert [p["resourceVersion"] for p in api.watch_params] == ["10", "40"]
    assert recorder.calls == [("add", "a", "5")]
    assert (informer.bookmarks, informer.events, informer.relists) == (1, 0, 0)


@pytest.mark.parametrize(
    ("expiry", "want"),
    [
        pytest.param(
            gone(),
            [("delete", "c", "7"), ("update", "b", "20"), ("add", "e", "21")],
            id="watch-request-answered-410",
        ),
        pytest.param(
            [event("ADDED", cm("d", "11")), expired("11")],
            [
                ("add", "d", "11"),
                ("delete", "c", "7"),
                ("delete", "d", "11"),
                ("update", "b", "20"),
                ("add", "e", "21"),
            ],
            id="error-event-410-mid-stream",
        ),
    ],
)
async def test_expired_version_relists_and_reports_every_difference_including_deletes(
    expiry: Any, want: list[tuple[str, str, str]]
) -> None:
    api = ScriptedApi()
    api.pages.append(page(cm("a", "5"), cm("b", "6"), cm("c", "7"), rv="10"))
    api.watches.append(expiry)
    # While the watch was gone: b changed, c (and d) were deleted, e was created; a is untouched.
    api.pages.append(page(cm("a", "5"), cm("b", "20"), cm("e", "21"), rv="30"))
    informer, recorder = make(api)
    async with running(informer):
        await eventually(lambda: len(api.watch_params) == 2)
    assert api.watch_params[1]["resourceVersion"] == "30"
    assert recorder.calls[3:] == want
    assert recorder.view == store_view(informer) == {"a": "5", "b": "20", "e": "21"}
    assert informer.relists == 1


def with_uid(obj: dict[str, Any], uid: str) -> dict[str, Any]:
    obj["metadata"]["uid"] = uid
    return obj


class UidRecorder(Recorder):
    """Also remembers the UIDs of the objects it is told were deleted."""

    def __init__(self) -> None:
        super().__init__()
        self.deleted_uids: list[str] = []

    def on_delete(self, obj: dict[str, Any]) -> None:
        self.deleted_uids.append(obj["metadata"]["uid"])
        super().on_delete(obj)


async def test_an_object_recreated_under_its_key_during_the_gap_is_told_as_delete_then_add() -> None:
    api = ScriptedApi()
    api.pages.append(page(with_uid(cm("a", "5"), "uid-1"), with_uid(cm("b", "6"), "uid-2"), rv="10"))
    api.watches.append(gone())
    # While the watch was gone: a was deleted and created again (a new UID); b merely changed.
    api.pages.append(page(with_uid(cm("a", "20"), "uid-3"), with_uid(cm("b", "21"), "uid-2"), rv="30"))
    informer = Informer(api, CM, namespace="ns", backoff=NO_WAIT)
    recorder = UidRecorder()
    informer.add_handler(recorder)
    async with running(informer):
        await eventually(lambda: len(api.watch_params) == 2)
    assert recorder.calls[2:] == [("delete", "a", "5"), ("add", "a", "20"), ("update", "b", "21")]
    assert recorder.deleted_uids == ["uid-1"], "the delete carries the old object, so its holder lets it go"
    assert recorder.view == store_view(informer) == {"a": "20", "b": "21"}


async def test_dropped_connection_reconnects_with_backoff_from_the_last_version_without_relisting() -> None:
    clock = RecordingClock()
    api = ScriptedApi(clock)
    api.pages.append(page(rv="10"))
    api.watches.extend([[event("ADDED", cm("a", "11")), dropped()], dropped(), dropped()])
    informer, recorder = make(api, backoff=Backoff(base=1, cap=8), clock=clock)
    async with running(informer):
        await eventually(lambda: len(api.watch_params) == 4)
    assert [p["resourceVersion"] for p in api.watch_params] == ["10", "11", "11", "11"]
    assert clock.sleeps == [1, 2, 4]  # progress (the event) reset the backoff; failures grew it
    assert (informer.lists, informer.reconnects) == (1, 3)
    assert recorder.calls == [("add", "a", "11")]


@pytest.mark.parametrize(
    ("session", "want_sleeps"),
    [
        pytest.param([Elapse(300)], [], id="quiet-watch-that-timed-out-renews-at-once"),
        pytest.param([event("ADDED", cm("a", "11"))], [], id="busy-watch-renews-at-once"),
        pytest.param([], [0.5], id="watch-closed-at-once-backs-off"),
    ],
)
async def test_watch_end_renews_silently_unless_it_closed_at_once(
    session: list[object], want_sleeps: list[float]
) -> None:
    clock = RecordingClock()
    api = ScriptedApi(clock)
    api.pages.append(page(rv="10"))
    api.watches.append(session)
    informer, _ = make(api, backoff=Backoff(base=0.5, cap=8), clock=clock)
    async with running(informer):
        await eventually(lambda: len(api.watch_params) == 2)
    assert clock.sleeps == want_sleeps
    assert informer.relists == 0


async def test_failing_list_is_retried_and_an_expired_continue_token_restarts_the_list() -> None:
    clock = RecordingClock()
    api = ScriptedApi(clock)
    api.pages.extend(
        [dropped(), page(cm("a", "5"), rv="10", cont="tok"), gone(), page(cm("a", "5"), rv="12")]
    )
    informer, recorder = make(api, backoff=Backoff(base=1, cap=8), clock=clock)
    async with running(informer):
        await asyncio.wait_for(informer.wait_synced(), 5)
    assert [p.get("continue") for p in api.lists] == [None, None, "tok", None]
    assert clock.sleeps == [1, 2]
    assert recorder.calls == [("add", "a", "5")]
    assert informer.resource_version == "12"


async def test_a_raising_handler_is_logged_with_the_key_and_others_still_hear_everything(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api = ScriptedApi()
    api.pages.append(page(cm("bad", "5"), cm("good", "6"), rv="10"))
    api.watches.append([event("MODIFIED", cm("bad", "11")), event("ADDED", cm("new", "12")), HANG])
    informer = Informer(api, CM, namespace="ns", backoff=NO_WAIT)
    angry = Recorder(fail_on=lambda obj: obj["metadata"]["name"] == "bad")
    calm = Recorder()
    informer.add_handler(angry)
    informer.add_handler(calm)
    caplog.set_level(logging.ERROR, logger="gpustack_operator.kube.informer")
    async with running(informer):
        await eventually(lambda: informer.resource_version == "12")
    assert calm.view == angry.view == {"bad": "11", "good": "6", "new": "12"}
    assert informer.handler_errors == 2
    assert sum("ns/bad" in r.getMessage() for r in caplog.records) == 2


async def test_a_late_handler_gets_the_cache_replayed_and_a_late_index_covers_it() -> None:
    api = ScriptedApi()
    api.pages.append(page(cm("a", "5", zone="x"), cm("b", "6", zone="y"), rv="10"))
    api.watches.append([HANG])
    informer, _ = make(api)
    async with running(informer):
        await informer.wait_synced()
        late = Recorder()
        informer.add_handler(late)
        informer.add_indexer("zone", lambda obj: [obj["data"]["zone"]])
        assert sorted(late.calls) == [("add", "a", "5"), ("add", "b", "6")]
        assert [o["metadata"]["name"] for o in informer.store.by_index("zone", "y")] == ["b"]


async def test_factory_shares_one_informer_per_kind_and_selector_and_starts_each_once() -> None:
    api = ScriptedApi()
    api.pages.extend([page(cm("a", "5"), rv="10"), page(rv="10")])
    factory = InformerFactory(api, backoff=NO_WAIT)
    first = factory.informer(CM, namespace="ns")
    assert factory.informer(CM, namespace="ns") is first
    labelled = factory.informer(CM, namespace="ns", label_selector="app=x")
    assert labelled is not first
    async with Supervisor() as sup:
        factory.start(sup)
        factory.start(sup)
        assert sup.names == [
            "informer:configmaps[namespace=ns,labels=app=x]",
            "informer:configmaps[namespace=ns]",
        ]
        await asyncio.wait_for(factory.wait_for_sync(), 5)
    assert first.has_synced()
    assert labelled.has_synced()
    assert {p.get("labelSelector") for p in api.lists} == {None, "app=x"}


async def test_shared_string_table_stays_bounded_under_churn_of_unique_objects(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(informer_module, "INTERN_FLOOR", 50)
    api = ScriptedApi()
    api.pages.append(page(rv="10"))
    churn = [event(kind, cm(f"cm-{i}", str(11 + i))) for i in range(300) for kind in ("ADDED", "DELETED")]
    api.watches.append([*churn, HANG])
    informer, recorder = make(api)
    async with running(informer):
        await eventually(lambda: informer.events == 600)
    assert len(informer.store) == 0
    assert len(recorder.calls) == 600
    assert len(informer._interner) <= 50 + 20  # the floor plus one object's strings


async def test_a_server_that_expires_every_fresh_list_is_relisted_with_growing_backoff() -> None:
    clock = RecordingClock()
    api = ScriptedApi(clock)
    api.pages.extend([page(rv="10"), page(rv="20"), page(rv="30")])
    api.watches.extend([gone(), gone(), [HANG]])
    informer, _ = make(api, backoff=Backoff(base=1, cap=8), clock=clock)
    async with running(informer):
        await eventually(lambda: len(api.watch_params) == 3)
    assert [p["resourceVersion"] for p in api.watch_params] == ["10", "20", "30"]
    assert clock.sleeps == [1, 2]
    assert informer.relists == 2


async def test_one_informer_cannot_run_twice_at_once() -> None:
    api = ScriptedApi()
    api.pages.append(page(rv="10"))
    informer, _ = make(api)
    async with running(informer):
        await informer.wait_synced()
        with pytest.raises(RuntimeError, match="already running"):
            await informer.run()


async def test_a_relist_period_lists_again_when_due_and_tells_only_what_changed() -> None:
    clock = RecordingClock()
    api = ScriptedApi(clock)
    api.pages.extend([page(cm("a", "1"), cm("b", "2"), rv="10"), page(cm("a", "1"), cm("b", "5"), rv="20")])
    api.watches.append([Elapse(60)])  # a quiet watch, ended because the relist is due
    informer, recorder = make(api, clock=clock, relist_period=60)
    async with running(informer):
        await eventually(lambda: len(api.watch_params) == 2)
    assert [p["timeoutSeconds"] for p in api.watch_params] == ["60", "60"]
    assert [p["resourceVersion"] for p in api.watch_params] == ["10", "20"]
    assert (informer.lists, informer.relists) == (2, 1)
    assert recorder.calls == [("add", "a", "1"), ("add", "b", "2"), ("update", "b", "5")]
