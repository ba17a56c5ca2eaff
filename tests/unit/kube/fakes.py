"""A scripted stand-in for kube-apiserver's list and watch answers, for the informer's pure logic.

`ScriptedApi` is a Client whose two transport seams (`request` and `stream`) play back what a test queued:
list pages (or errors) and watch sessions. A watch session is a list of steps: an event dict is sent as
one JSON line, an exception is raised mid-stream (a dropped connection, say), HANG keeps the stream open
until the informer is cancelled, and Elapse moves the test clock. When a session runs out the stream ends
cleanly, as it does when the server's timeoutSeconds expires. Everything above the transport
(pagination, line parsing, error mapping, relisting, diffing) is the real code. The real server's
behaviour is proven in tests/integration.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gpustack_operator.api.json import JSONObj
from gpustack_operator.kube import errors
from gpustack_operator.kube.client import Client
from gpustack_operator.runtime import Backoff

HANG = object()


@dataclass(frozen=True)
class Elapse:
    """A watch step: this many seconds pass on the test clock (a long-quiet watch)."""

    seconds: float


NO_WAIT = Backoff(base=0.0, cap=0.0)


def cm(name: str, rv: str, namespace: str = "ns", **data: str) -> JSONObj:
    """A ConfigMap as the server returns it (with managedFields, which the informer must drop)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "resourceVersion": rv,
            "managedFields": [{"manager": "test", "operation": "Update"}],
        },
        "data": dict(data),
    }


def page(*items: JSONObj, rv: str, cont: str | None = None) -> JSONObj:
    meta: JSONObj = {"resourceVersion": rv}
    if cont:
        meta["continue"] = cont
    return {"kind": "ConfigMapList", "metadata": meta, "items": list(items)}


def event(kind: str, obj: JSONObj) -> JSONObj:
    return {"type": kind, "object": obj}


def bookmark(rv: str) -> JSONObj:
    return event("BOOKMARK", {"kind": "ConfigMap", "metadata": {"resourceVersion": rv}})


def expired(rv: str = "1") -> JSONObj:
    """The ERROR event a watch gets when its version was compacted."""
    status = {"kind": "Status", "status": "Failure", "reason": "Expired", "code": 410}
    return event("ERROR", status | {"message": f"too old resource version: {rv}"})


def gone() -> errors.Gone:
    return errors.Gone(status=410, reason="Expired", message="too old resource version")


def dropped() -> errors.Unavailable:
    return errors.Unavailable(status=0, reason="ConnectionError", message="Server disconnected")


class ScriptedApi(Client):
    """Plays back queued list pages and watch sessions; records every request it got."""

    def __init__(self, clock: RecordingClock | None = None) -> None:
        super().__init__(api=None, retries=0)
        self.clock = clock
        self.pages: deque[JSONObj | Exception] = deque()
        self.watches: deque[list[Any] | Exception] = deque()
        self.lists: list[Mapping[str, str]] = []
        self.watch_params: list[Mapping[str, str]] = []
        self.watch_finished = 0

    async def request(self, method: str, path: str, **kw: Any) -> JSONObj:
        self.lists.append(dict(kw.get("params") or {}))
        await asyncio.sleep(0)
        answer = self.pages.popleft()
        if isinstance(answer, Exception):
            raise answer
        return json.loads(json.dumps(answer))  # a fresh copy, as from the wire

    @contextlib.asynccontextmanager
    async def stream(
        self, path: str, *, params: Mapping[str, str], read_timeout: float
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        self.watch_params.append(dict(params))
        await asyncio.sleep(0)
        session = self.watches.popleft() if self.watches else [HANG]
        if isinstance(session, Exception):
            raise session
        try:
            yield self._play(session)
        finally:
            self.watch_finished += 1

    async def _play(self, session: list[Any]) -> AsyncIterator[bytes]:
        for step in session:
            await asyncio.sleep(0)
            if step is HANG:
                await asyncio.Event().wait()
            elif isinstance(step, Elapse):
                assert self.clock is not None, "Elapse needs ScriptedApi(clock=...)"
                self.clock.advance(step.seconds)
            elif isinstance(step, Exception):
                raise step
            else:
                yield json.dumps(step).encode()


class Recorder:
    """An EventHandler that keeps a log of calls and the view a reconciler would build from them."""

    def __init__(self, fail_on: Callable[[JSONObj], bool] = lambda _: False) -> None:
        self.calls: list[tuple[str, str, str]] = []
        self.view: dict[str, str] = {}
        self._fail_on = fail_on

    def _record(self, what: str, obj: JSONObj) -> None:
        meta = obj["metadata"]
        self.calls.append((what, meta["name"], meta["resourceVersion"]))
        if self._fail_on(obj):
            raise RuntimeError(f"handler refuses {meta['name']}")

    def on_add(self, obj: JSONObj) -> None:
        self.view[obj["metadata"]["name"]] = obj["metadata"]["resourceVersion"]
        self._record("add", obj)

    def on_update(self, old: JSONObj, new: JSONObj) -> None:
        self.view[new["metadata"]["name"]] = new["metadata"]["resourceVersion"]
        self._record("update", new)

    def on_delete(self, obj: JSONObj) -> None:
        self.view.pop(obj["metadata"]["name"], None)
        self._record("delete", obj)


class RecordingClock:
    """A clock whose sleeps return at once but are remembered, so tests can see the backoff used."""

    def __init__(self) -> None:
        self.sleeps: list[float] = []
        self._now = 0.0

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self._now += seconds
        await asyncio.sleep(0)

    def call_at(self, when: float, callback: Callable[[], None]) -> Any:
        raise NotImplementedError

    def advance(self, seconds: float) -> None:
        self._now += seconds
