"""An in-memory cluster for the scheduling-chain controllers: scripted informers and a server-like client.

`ChainClient` extends the recording client (tests.unit.controllers.writes) with the API server behaviour
these controllers depend on: a patch carrying a stale resourceVersion is refused with 409, a status patch
changes only status (and a main-resource patch leaves status alone), deleting an object with finalizers
only marks it, and it disappears once its last finalizer is removed. `World` runs the real manager with the
given controller factories over that, and offers builders for the objects a user or Kueue would write.
"""

from __future__ import annotations

import base64
import contextlib
import copy
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import SETTINGS_SECRET
from gpustack_operator.controllerkit.manager import Manager
from gpustack_operator.controllers.dependencies import ControllerFactory
from gpustack_operator.controllers.setup import setup_controllers
from gpustack_operator.kube import errors
from gpustack_operator.kube.client import FIELD_MANAGER, MERGE_PATCH
from gpustack_operator.kube.patches import merge_patch
from gpustack_operator.kube.resources import SECRETS, Resource
from gpustack_operator.kube.store import object_key
from gpustack_operator.settings.environment import Environment
from tests.helpers import eventually, yield_to_loop
from tests.unit.controllerkit.fakes import FakeInformer, FakeInformers, FakeRecorder, running

from .writes import RecordingClient

SYSTEM = "gpustack-system"
DELETED_AT = "2025-01-01T00:00:00Z"


_LIST_MAP_KEYS = ("name", "type")
"""The keys the list-maps of the status fields these controllers apply are keyed by."""


def apply_merge(current: Any, applied: Any) -> Any:
    """Server-side apply's merge, as far as these tests need: objects recursively, list-maps by key."""
    if isinstance(current, dict) and isinstance(applied, dict):
        return {**current, **{k: apply_merge(current.get(k), v) for k, v in applied.items()}}
    if isinstance(current, list) and isinstance(applied, list):
        key = next((k for k in _LIST_MAP_KEYS if all(isinstance(e, dict) and k in e for e in applied)), None)
        if key is not None and applied:
            mine = {e[key]: e for e in applied}
            kept = [apply_merge(e, mine.pop(e[key])) if e.get(key) in mine else e for e in current]
            return [*kept, *mine.values()]
    return copy.deepcopy(applied)


class ChainClient(RecordingClient):
    """The recording client, with preconditions, the status subresource and finalizers as on a server."""

    async def get_or_none(self, res: Resource, name: str, namespace: str | None = None) -> JSONObj | None:
        found = self._cached(res, self._key(res, name, namespace))
        return copy.deepcopy(found)

    async def patch(
        self,
        res: Resource,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        content_type: str = MERGE_PATCH,
        subresource: str | None = None,
        field_manager: str = FIELD_MANAGER,
    ) -> JSONObj:
        key = self._key(res, name, namespace)
        verb = "patch" if subresource is None else f"patch/{subresource}"
        self._record(verb, res, key, patch, field_manager)
        current = self._cached(res, key)
        if current is None:
            raise errors.NotFound(status=404, reason="NotFound", message=f"{key} not found")
        wanted = (patch.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and wanted != current["metadata"]["resourceVersion"]:
            raise errors.Conflict(status=409, reason="Conflict", message=f"{key} changed since {wanted}")
        if subresource == "status":
            patch = {"status": patch.get("status")}
        else:
            patch = {k: v for k, v in patch.items() if k != "status"}
        updated = self._echo(res, merge_patch(current, patch))
        if updated["metadata"].get("deletionTimestamp") and not updated["metadata"].get("finalizers"):
            self.informers.informer(res).delete(updated)  # type: ignore[union-attr]
        return updated

    async def apply(
        self,
        res: Resource,
        obj: JSONObj,
        *,
        field_manager: str = FIELD_MANAGER,
        force: bool = True,
        subresource: str | None = None,
    ) -> JSONObj:
        """A status apply: only status changes, list-maps merge by key, resourceVersion is a precondition."""
        if subresource != "status":
            return await super().apply(res, obj, field_manager=field_manager, force=force)
        key = object_key(obj)
        self._record("apply/status", res, key, obj, field_manager)
        current = self._cached(res, key)
        if current is None:
            raise errors.NotFound(status=404, reason="NotFound", message=f"{key} not found")
        wanted = obj["metadata"].get("resourceVersion")
        if wanted is not None and wanted != current["metadata"]["resourceVersion"]:
            raise errors.Conflict(status=409, reason="Conflict", message=f"{key} changed since {wanted}")
        updated = copy.deepcopy(current)
        updated["status"] = apply_merge(current.get("status") or {}, obj.get("status") or {})
        return self._echo(res, updated)

    async def delete(
        self,
        res: Resource,
        name: str,
        namespace: str | None = None,
        *,
        missing_ok: bool = True,
        propagation: str = "Background",
    ) -> None:
        key = self._key(res, name, namespace)
        current = self._cached(res, key)
        if current is None or not current["metadata"].get("finalizers"):
            await super().delete(res, name, namespace, missing_ok=missing_ok, propagation=propagation)
            return
        self._record("delete", res, key, None, None)
        marked = copy.deepcopy(current)
        marked["metadata"]["deletionTimestamp"] = DELETED_AT
        self._echo(res, marked)


@dataclass
class World:
    informers: FakeInformers
    client: ChainClient
    recorder: FakeRecorder
    manager: Manager | None = None
    """The running manager (its controllers, for a test that asks a reconciler directly)."""

    def informer(self, resource: Resource) -> FakeInformer:
        return self.informers.informer(resource)

    def get(self, resource: Resource, name: str) -> JSONObj | None:
        return self.informer(resource).store.get(name)

    def put(self, resource: Resource, obj: JSONObj) -> JSONObj:
        """Create or replace an object as someone else (a user, Kueue) writes it; returns what is stored."""
        stored = copy.deepcopy(obj)
        stored["metadata"]["resourceVersion"] = str(next(self.client._versions))
        stored["metadata"].setdefault("generation", 1)
        self.informer(resource).add(stored)
        return stored

    def update(self, resource: Resource, name: str, patch: JSONObj) -> JSONObj:
        """Merge `patch` into the stored object as another writer would."""
        current = self.get(resource, name)
        assert current is not None, f"{resource.kind} {name} does not exist"
        return self.put(resource, merge_patch(current, patch))

    def remove(self, resource: Resource, name: str) -> None:
        current = self.get(resource, name)
        if current is not None:
            self.informer(resource).delete(current)

    def set(self, **settings: str) -> None:
        """Write settings (keyword `drain_when_no_flavors` is `instance-type-drain-when-no-flavors`, ...)."""
        secrets = self.informers.informer(
            SECRETS, namespace=SYSTEM, field_selector=f"metadata.name={SETTINGS_SECRET}"
        )
        current = secrets.store.get(f"{SYSTEM}/{SETTINGS_SECRET}") or {"data": {}}
        data = dict(current["data"])
        for name, value in settings.items():
            data["instance-type-" + name.replace("_", "-")] = base64.b64encode(value.encode()).decode()
        version = str(next(self.client._versions))
        secrets.add(
            {
                "metadata": {"name": SETTINGS_SECRET, "namespace": SYSTEM, "resourceVersion": version},
                "data": data,
            }
        )

    def writes_since(self, start: int) -> list[tuple[str, str, str]]:
        return [(w.verb, w.kind, w.key) for w in self.client.writes[start:]]

    async def settle(self, until: Callable[[], bool] = lambda: True) -> None:
        """Wait for `until`, then until no write happens for a while (the controllers are at rest)."""
        await eventually(until)
        seen = -1
        while seen != len(self.client.writes):
            seen = len(self.client.writes)
            await yield_to_loop(300)


@contextlib.asynccontextmanager
async def world(*factories: ControllerFactory, **settings: str) -> AsyncIterator[World]:
    informers, recorder = FakeInformers(), FakeRecorder()
    w = World(informers, ChainClient(informers), recorder)
    manager = w.manager = Manager(informers, recorder=recorder)  # type: ignore[arg-type]
    environment = Environment(pod_namespace=SYSTEM)
    setup_controllers(manager, client=w.client, environment=environment, factories=factories)
    if settings:
        w.set(**settings)
    async with running(manager):
        await w.settle()
        yield w
