"""In-memory stand-ins for the manager's collaborators: informers fed by the test, an elector, a recorder.

The manager, its cache and the controllers are real; only their inputs are scripted. `FakeInformers` is an
`InformerSource` (controllerkit.cache), so the manager takes it as it takes the real factory; `FakeInformer`
has the real Store (indexes included) and calls handlers the way the informer does (synchronously, in
order), so a test says "this object changed" and then watches what gets reconciled or read. The real
informer, lease and events code are proven against the real control plane in tests/integration.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from gpustack_operator.api.json import JSONObj
from gpustack_operator.controllerkit.manager import Manager
from gpustack_operator.controllerkit.reconciler import DONE, Result, TerminalError
from gpustack_operator.controllerkit.watches import InformerKey
from gpustack_operator.kube.informer import EventHandler
from gpustack_operator.kube.resources import Resource
from gpustack_operator.kube.store import IndexFunc, Store, object_key
from gpustack_operator.runtime import Supervisor


def obj(
    name: str, namespace: str | None = "ns", *, generation: int = 1, rv: str = "1", **extra: Any
) -> JSONObj:
    meta: JSONObj = {"name": name, "generation": generation, "resourceVersion": rv, "uid": f"uid-{name}"}
    if namespace:
        meta["namespace"] = namespace
    meta.update(extra.pop("metadata", {}))
    return {"metadata": meta, **extra}


class FakeInformer:
    """One scripted informer: `add`/`delete` update the real Store (indexes included) and call handlers."""

    def __init__(self, key: InformerKey) -> None:
        self.resource, self.namespace, self.label_selector, self.field_selector = key
        self.name = self.resource.plural
        self.relists = 0
        self.store = Store()
        self.handlers: list[EventHandler] = []
        self.synced = asyncio.Event()

    def add_handler(self, handler: EventHandler) -> None:
        self.handlers.append(handler)

    def add_indexer(self, name: str, fn: IndexFunc) -> None:
        self.store.add_index(name, fn)

    def add(self, o: JSONObj) -> None:
        old = self.store.put(object_key(o), o)
        for h in self.handlers:
            h.on_add(o) if old is None else h.on_update(old, o)

    def delete(self, o: JSONObj) -> None:
        self.store.pop(object_key(o))
        for h in self.handlers:
            h.on_delete(o)


class FakeInformers:
    """An InformerSource whose informers the test fills; `start` marks them synced at once.

    Like the real factory it shares one informer per (kind, namespace, selectors); a test feeds the one a
    controller watches by asking for it with the same arguments.
    """

    def __init__(self) -> None:
        self.by_key: dict[InformerKey, FakeInformer] = {}

    @property
    def informers(self) -> list[FakeInformer]:
        return list(self.by_key.values())

    def informer(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> FakeInformer:
        key = (resource, namespace or None, label_selector or None, field_selector or None)
        return self.by_key.setdefault(key, FakeInformer(key))

    def start(self, supervisor: Supervisor) -> None:
        for informer in self.by_key.values():
            informer.synced.set()

    async def wait_for_sync(self) -> None:
        for informer in self.by_key.values():
            await informer.synced.wait()


@dataclass
class FakeElector:
    """Leads when the test says so (`grant()`), loses when it says so (`revoke()`)."""

    @dataclass(frozen=True)
    class Config:
        name: str = "worker.gpustack.ai"

    config: Config = field(default_factory=Config)
    is_leader: bool = False
    released: int = 0
    _granted: asyncio.Event = field(default_factory=asyncio.Event)
    _lost: asyncio.Event = field(default_factory=asyncio.Event)

    def grant(self) -> None:
        self._lost.clear()
        self._granted.set()

    def revoke(self) -> None:
        self._granted.clear()
        self._lost.set()

    async def acquire(self) -> None:
        await self._granted.wait()
        self.is_leader = True

    async def hold(self) -> None:
        await self._lost.wait()
        self.is_leader = False

    async def release(self) -> None:
        self.released += 1
        self.is_leader = False


@dataclass
class FakeRecorder:
    events: list[tuple[JSONObj, str, str, str]] = field(default_factory=list)

    def event(
        self, regarding: JSONObj, type_: str, reason: str, note: str, *, action: str = "Reconcile"
    ) -> None:
        self.events.append((regarding, type_, reason, note))

    async def run(self) -> None:
        await asyncio.Event().wait()


class ScriptedReconciler:
    """Records every call; `outcomes[key]` is a list of what successive calls do (raise or return)."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.outcomes: dict[str, list[Any]] = {}
        self.running: set[str] = set()
        self.overlaps: list[str] = []
        self.gate: asyncio.Event | None = None  # when set by a test, reconciles wait for it
        self.finished: list[str] = []

    async def reconcile(self, key: str) -> Result:
        if key in self.running:
            self.overlaps.append(key)
        self.running.add(key)
        self.calls.append(key)
        try:
            if self.gate is not None:
                await self.gate.wait()
            await asyncio.sleep(0)
            script = self.outcomes.get(key)
            outcome = script.pop(0) if script else DONE
            if isinstance(outcome, BaseException):
                raise outcome
            self.finished.append(key)
            return outcome
        finally:
            self.running.discard(key)


@contextlib.asynccontextmanager
async def running(manager: Manager) -> AsyncIterator[Supervisor]:
    """The manager running in a supervisor for the duration of the block, stopped gracefully after it."""
    async with Supervisor("test") as sup:
        sup.spawn("manager", manager.run)
        yield sup


__all__ = [
    "FakeElector",
    "FakeInformer",
    "FakeInformers",
    "FakeRecorder",
    "ScriptedReconciler",
    "TerminalError",
    "obj",
    "running",
]
