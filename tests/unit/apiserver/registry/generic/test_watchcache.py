"""Client watches of v1 InstanceTypes served from the worker's informer instead of one upstream watch each.

The informer is the real kube.informer.Informer over a scripted API server (tests/unit/kube/fakes.py)
whose watch session is fed while it runs, so every change reaches the watch cache through the informer's
own list, watch, slimming and relist code. An `open` answer of None means "watch upstream", which the
proxy then does exactly as before.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from gpustack_operator.api.json import JSONObj
from gpustack_operator.apiserver.registry import instancetypes
from gpustack_operator.apiserver.registry.generic.watchcache import CachedWatch, WatchCache, watch_cache
from gpustack_operator.kube.informer import Informer
from gpustack_operator.kube.resources import INSTANCE_TYPES
from tests.helpers import eventually
from tests.unit.kube.fakes import NO_WAIT, ScriptedApi, bookmark, event, expired

FEED = object()
"""A watch session step: play what the test feeds through `LiveApi.send` until it sends END."""
END = object()


def it(name: str, rv: int, **labels: str) -> JSONObj:
    return {
        "apiVersion": INSTANCE_TYPES.api_version,
        "kind": "InstanceType",
        "metadata": {
            "name": name,
            "resourceVersion": str(rv),
            "labels": labels,
            "managedFields": [{"manager": "test"}],
        },
        "spec": {"entrance": name},
    }


def page(*items: JSONObj, rv: int) -> JSONObj:
    return {"kind": "InstanceTypeList", "metadata": {"resourceVersion": str(rv)}, "items": list(items)}


class LiveApi(ScriptedApi):
    """A ScriptedApi whose FEED steps play events the test sends while the informer watches."""

    def __init__(self) -> None:
        super().__init__()
        self.feed: asyncio.Queue[Any] = asyncio.Queue()

    def send(self, *steps: Any) -> None:
        for step in steps:
            self.feed.put_nowait(step)

    async def _play(self, session: list[Any]) -> AsyncIterator[bytes]:
        for step in session:
            if step is not FEED:
                async for line in super()._play([step]):
                    yield line
                continue
            while (fed := await self.feed.get()) is not END:
                if isinstance(fed, Exception):
                    raise fed
                yield json.dumps(fed).encode()


@asynccontextmanager
async def cached(
    *objects: JSONObj, rv: int = 10, **options: Any
) -> AsyncIterator[tuple[LiveApi, Informer, WatchCache]]:
    """A synced informer listing `objects` at `rv`, watching the test's feed, and its watch cache."""
    api = LiveApi()
    api.pages.append(page(*objects, rv=rv))
    api.watches.append([FEED])
    informer = Informer(api, INSTANCE_TYPES, backoff=NO_WAIT)
    cache = WatchCache(INSTANCE_TYPES, informer, **options)
    task = asyncio.ensure_future(informer.run())
    try:
        await asyncio.wait_for(informer.wait_synced(), 5)
        yield api, informer, cache
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def reached(informer: Informer, rv: int) -> None:
    await eventually(lambda: informer.resource_version == str(rv), timeout=5)


def opened(cache: WatchCache, **params: str) -> CachedWatch:
    stream = cache.open(params)
    assert stream is not None, f"{params} went upstream"
    return stream


async def take(stream: CachedWatch, count: int) -> list[tuple[str, str, str]]:
    """The next `count` events as (type, name, resourceVersion)."""
    out = []
    for _ in range(count):
        got = await asyncio.wait_for(anext(stream), 5)
        meta = got["object"]["metadata"]
        out.append((got["type"], str(meta.get("name", "")), str(meta["resourceVersion"])))
    return out


async def ended(stream: CachedWatch) -> bool:
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(anext(stream), 5)
    return True


async def test_a_watch_from_a_version_the_ring_covers_replays_what_came_after_then_goes_live() -> None:
    async with cached(it("a", 5), it("b", 7)) as (api, informer, cache):
        api.send(event("MODIFIED", it("a", 11)), event("ADDED", it("c", 12)), event("DELETED", it("b", 13)))
        await reached(informer, 13)
        stream = opened(cache, resourceVersion="11")
        assert await take(stream, 2) == [("ADDED", "c", "12"), ("DELETED", "b", "13")]
        api.send(event("MODIFIED", it("c", 14)))
        assert await take(stream, 1) == [("MODIFIED", "c", "14")]
        from_the_list = opened(cache, resourceVersion="10")
        assert await take(from_the_list, 4) == [
            ("MODIFIED", "a", "11"),
            ("ADDED", "c", "12"),
            ("DELETED", "b", "13"),
            ("MODIFIED", "c", "14"),
        ]


async def test_cached_events_are_the_upstream_events_without_managed_fields() -> None:
    async with cached() as (api, _, cache):
        stream = opened(cache, resourceVersion="10")
        api.send(event("ADDED", it("a", 11, tier="gold")))
        got = await asyncio.wait_for(anext(stream), 5)
    want = it("a", 11, tier="gold")
    del want["metadata"]["managedFields"]
    assert got == {"type": "ADDED", "object": want}


async def test_a_version_older_than_the_ring_gets_kubes_410_expired_and_the_end() -> None:
    async with cached(it("a", 5), capacity=2) as (api, informer, cache):
        api.send(*(event("MODIFIED", it("a", rv)) for rv in (11, 12, 13)))
        await reached(informer, 13)
        stream = opened(cache, resourceVersion="10")
        assert [e async for e in stream] == [
            {
                "type": "ERROR",
                "object": {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Failure",
                    "message": "too old resource version: 10 (11)",
                    "reason": "Expired",
                    "code": 410,
                },
            }
        ]
        assert await take(opened(cache, resourceVersion="11"), 2) == [
            ("MODIFIED", "a", "12"),
            ("MODIFIED", "a", "13"),
        ]
        assert cache.expired == 1


async def test_a_version_newer_than_the_informer_has_seen_is_watched_upstream() -> None:
    async with cached(it("a", 5)) as (api, informer, cache):
        assert cache.open({"resourceVersion": "11"}) is None
        api.send(event("MODIFIED", it("a", 11)))
        await reached(informer, 11)
        assert cache.open({"resourceVersion": "11"}) is not None
        assert (cache.served, cache.passed) == (1, 1)


async def test_version_0_or_none_sends_every_matching_object_as_added_by_name_then_live_changes() -> None:
    async with cached(it("b", 7, tier="gold"), it("a", 5), it("c", 9, tier="gold")) as (api, _, cache):
        everything = opened(cache, resourceVersion="0")
        gold = opened(cache, labelSelector="tier=gold")
        assert await take(everything, 3) == [("ADDED", "a", "5"), ("ADDED", "b", "7"), ("ADDED", "c", "9")]
        assert await take(gold, 2) == [("ADDED", "b", "7"), ("ADDED", "c", "9")]
        api.send(event("MODIFIED", it("b", 11, tier="gold")))
        assert await take(everything, 1) == await take(gold, 1) == [("MODIFIED", "b", "11")]


async def test_most_recent_waits_for_a_write_through_the_proxy_by_going_upstream() -> None:
    async with cached(it("a", 5)) as (api, informer, cache):
        assert cache.open({}, floor=11) is None  # the informer has not seen the write yet
        assert cache.open({"resourceVersion": "0"}, floor=11) is not None  # "any" version will do
        api.send(event("ADDED", it("b", 11)))
        await reached(informer, 11)
        assert await take(opened(cache), 2) == [("ADDED", "a", "5"), ("ADDED", "b", "11")]


async def test_selectors_turn_an_object_that_starts_or_stops_matching_into_added_and_deleted() -> None:
    async with cached(it("a", 5), it("b", 7, tier="gold")) as (api, _, cache):
        gold = opened(cache, resourceVersion="10", labelSelector="tier=gold")
        only_a = opened(cache, resourceVersion="10", fieldSelector="metadata.name=a")
        api.send(
            event("MODIFIED", it("a", 11, tier="gold")),  # starts matching
            event("MODIFIED", it("a", 12, tier="gold", more="x")),
            event("MODIFIED", it("a", 13)),  # stops matching
            event("DELETED", it("a", 14)),  # deleted while not matching
            event("DELETED", it("b", 15, tier="gold")),
        )
        assert await take(gold, 4) == [
            ("ADDED", "a", "11"),
            ("MODIFIED", "a", "12"),
            ("DELETED", "a", "13"),
            ("DELETED", "b", "15"),
        ]
        assert await take(only_a, 4) == [
            ("MODIFIED", "a", "11"),
            ("MODIFIED", "a", "12"),
            ("MODIFIED", "a", "13"),
            ("DELETED", "a", "14"),
        ]
        api.send(event("MODIFIED", it("a", 16, tier="gold")))
        assert await take(gold, 1) == [("ADDED", "a", "16")]


async def test_the_deleted_event_of_an_object_that_stopped_matching_shows_it_as_it_was_matching() -> None:
    async with cached(it("a", 5, tier="gold")) as (api, _, cache):
        gold = opened(cache, resourceVersion="10", labelSelector="tier=gold")
        api.send(event("MODIFIED", it("a", 11, tier="silver")))
        got = await asyncio.wait_for(anext(gold), 5)
    assert got["type"] == "DELETED"
    assert got["object"]["metadata"]["labels"] == {"tier": "gold"}
    assert got["object"]["metadata"]["resourceVersion"] == "11"


async def test_bookmarks_carry_the_informers_latest_version_only_when_asked_for() -> None:
    async with cached(it("a", 5), bookmark_every=0.05) as (api, _, cache):
        marked = opened(cache, resourceVersion="10", allowWatchBookmarks="true")
        plain = opened(cache, resourceVersion="10", timeoutSeconds="1")
        api.send(event("MODIFIED", it("a", 11)), bookmark("40"))
        assert await take(marked, 1) == [("MODIFIED", "a", "11")]
        got = await asyncio.wait_for(anext(marked), 5)
        while got["object"]["metadata"]["resourceVersion"] != "40":  # one may come before the upstream one
            got = await asyncio.wait_for(anext(marked), 5)
        assert got == {
            "type": "BOOKMARK",
            "object": {
                "apiVersion": "worker.gpustack.ai/v1alpha1",
                "kind": "InstanceType",
                "metadata": {"resourceVersion": "40"},
            },
        }
        start = asyncio.get_running_loop().time()
        assert [e["type"] async for e in plain] == ["MODIFIED"]  # then timeoutSeconds ends it
        assert 0.5 < asyncio.get_running_loop().time() - start < 3


async def test_an_informer_relist_ends_every_cached_stream_and_restarts_the_ring() -> None:
    async with cached(it("a", 5), it("b", 7)) as (api, informer, cache):
        streams = [opened(cache, resourceVersion="10"), opened(cache, labelSelector="x")]
        assert await take(streams[0], 0) == []
        api.pages.append(page(it("a", 20), rv=30))  # while the watch was gone: a changed, b went away
        api.watches.append([FEED])
        api.send(event("MODIFIED", it("b", 11)), expired("11"))
        for stream in streams:
            while True:  # a change before the 410 may come first; then the stream ends
                try:
                    await asyncio.wait_for(anext(stream), 5)
                except StopAsyncIteration:
                    break
        await reached(informer, 30)
        assert informer.relists == 1
        assert (await anext(opened(cache, resourceVersion="11")))["object"]["code"] == 410
        fresh = opened(cache, resourceVersion="30")
        api.send(event("ADDED", it("c", 31)))
        assert await take(fresh, 1) == [("ADDED", "c", "31")]


async def test_a_relist_that_changed_nothing_ends_cached_streams_at_once() -> None:
    async with cached(it("a", 5)) as (api, informer, cache):
        stream = opened(cache, resourceVersion="10", allowWatchBookmarks="1")
        waiting = asyncio.ensure_future(anext(stream))  # caught up: waits for the next change
        await asyncio.sleep(0.05)
        api.pages.append(page(it("a", 5), rv=30))
        api.watches.append([FEED])
        api.send(expired("10"))
        await eventually(lambda: informer.relists == 1, timeout=5)
        with pytest.raises(StopAsyncIteration):  # no change, bookmark (60 s) or timeout needed
            await asyncio.wait_for(waiting, 5)
        fresh = opened(cache, resourceVersion="30")
        api.send(event("ADDED", it("c", 31)))
        assert await take(fresh, 1) == [("ADDED", "c", "31")]


async def test_a_watcher_that_falls_behind_the_ring_is_ended_without_holding_up_others() -> None:
    async with cached(it("a", 5), capacity=3) as (api, informer, cache):
        slow = opened(cache, resourceVersion="10")
        quick = opened(cache, resourceVersion="10")
        seen: list[tuple[str, str, str]] = []
        for rv in range(11, 16):
            api.send(event("MODIFIED", it("a", rv)))
            seen += await take(quick, 1)
        await reached(informer, 15)
        assert [v for _, _, v in seen] == ["11", "12", "13", "14", "15"]
        assert await ended(slow)
        assert cache.overflowed == 1
        api.send(event("MODIFIED", it("a", 16)))
        assert await take(quick, 1) == [("MODIFIED", "a", "16")]


async def test_many_watchers_share_the_informers_one_upstream_watch() -> None:
    async with cached(it("a", 5)) as (api, _, cache):
        streams = [opened(cache, resourceVersion="10") for _ in range(30)]
        api.send(*(event("MODIFIED", it("a", rv)) for rv in (11, 12, 13)))
        got = await asyncio.gather(*(take(stream, 3) for stream in streams))
        assert all(events == got[0] for events in got)
        assert [v for _, _, v in got[0]] == ["11", "12", "13"]
        assert len(api.watch_params) == 1
        assert cache.served == 30


@pytest.mark.parametrize(
    "params",
    [
        {"sendInitialEvents": "true", "resourceVersionMatch": "NotOlderThan"},
        {"resourceVersion": "10", "resourceVersionMatch": "NotOlderThan"},
        {"labelSelector": "tier>1"},
        {"fieldSelector": "spec.entrance=a"},
        {"timeoutSeconds": "ten"},
        {"allowWatchBookmarks": "maybe"},
        {"limit": "5"},
        {"somethingNew": "1"},
    ],
)
async def test_watches_left_to_the_api_server(params: dict[str, str]) -> None:
    async with cached(it("a", 5)) as (_, _, cache):
        assert cache.open(params) is None
        assert cache.passed == 1


async def test_no_watch_is_cached_before_the_first_list_or_while_the_informer_lost_its_version() -> None:
    api = LiveApi()
    informer = Informer(api, INSTANCE_TYPES, backoff=NO_WAIT)
    cache = watch_cache(INSTANCE_TYPES, informer)
    assert cache is not None
    assert cache.open({}) is None  # not synced
    async with cached(it("a", 5)) as (_, informer, cache):
        informer.resource_version = ""  # as after a 410, until the relist
        assert cache.open({"resourceVersion": "0"}) is None
    assert watch_cache(INSTANCE_TYPES, None) is None


async def test_a_cache_made_over_a_synced_informer_starts_at_its_version_without_false_changes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with cached(it("a", 5), it("b", 7)) as (api, _, first):
        late = watch_cache(INSTANCE_TYPES, first.informer)  # the informer replays a and b to it as adds
        assert late is not None
        stream = late.open({"resourceVersion": "10"})
        assert stream is not None
        api.send(event("MODIFIED", it("a", 11)))
        assert await take(stream, 1) == [("MODIFIED", "a", "11")]
    assert not [r for r in caplog.records if r.name.endswith("watchcache")]


@pytest.mark.parametrize(
    "accept", ["application/json", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"]
)
async def test_the_proxy_renders_a_cached_watch_as_it_renders_the_crds_watch(accept: str) -> None:
    async with cached(it("a", 5)) as (api, informer, _):
        proxy = instancetypes.proxy(api, informer)
        app = web.Application()
        proxy.add_routes(app.router)
        url = "/apis/worker.gpustack.ai/v1/instancetypes?watch=1&resourceVersion=10"
        changed = it("a", 11, tier="gold")
        del changed["metadata"]["managedFields"]  # as the informer keeps it
        api.watches.append([event("MODIFIED", changed)])  # what the CRD's watch sends the proxied path
        async with TestClient(TestServer(app)) as http:
            async with http.get(url, headers={"Accept": accept}) as watching:
                api.send(event("MODIFIED", changed))
                served = json.loads(await asyncio.wait_for(watching.content.readline(), 5))
            async with http.get(url + "&benchProxied=1", headers={"Accept": accept}) as proxied:
                upstream = json.loads(await asyncio.wait_for(proxied.content.readline(), 5))
        assert proxy.watches is not None
        assert (proxy.watches.served, proxy.watches.passed) == (1, 1)
    assert served == upstream
    assert served["type"] == "MODIFIED"
    if accept == "application/json":
        assert served["object"]["apiVersion"] == "worker.gpustack.ai/v1"
    else:
        assert served["object"]["kind"] == "Table"
        assert served["object"]["columnDefinitions"]
