"""A Client that records the writes a reconciler makes and plays them back into the scripted informers.

Controller unit tests assert what a user would see change in the cluster: which objects were created,
patched, applied or deleted, with which body and field manager, and that nothing is written once the
world matches (zero writes at rest). With `echo` the writes land in the `FakeInformers` the way the
API server's watch would deliver them (a new resourceVersion, a merge patch merged in, an apply merged
over the object), so the controller sees its own writes and settles, as it does against a real server.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass
from typing import Any

from gpustack_operator.api.json import JSONObj
from gpustack_operator.kube import errors
from gpustack_operator.kube.client import FIELD_MANAGER, MERGE_PATCH, Client
from gpustack_operator.kube.patches import merge_patch
from gpustack_operator.kube.resources import Resource
from gpustack_operator.kube.store import object_key
from tests.unit.controllerkit.fakes import FakeInformers


@dataclass(frozen=True)
class Write:
    verb: str
    """create, apply, patch or delete."""
    kind: str
    key: str
    body: JSONObj | None
    field_manager: str | None


class RecordingClient(Client):
    """Records create/apply/patch/delete; `echo` feeds them to the informers; `refuse` fails a verb once."""

    def __init__(self, informers: FakeInformers | None = None) -> None:
        super().__init__(api=None, retries=0)  # type: ignore[arg-type]  # never sends a request
        self.informers = informers
        self.writes: list[Write] = []
        self.refuse: dict[tuple[str, str], errors.KubeError] = {}
        """(verb, key) -> the error that write fails with, once."""
        self._versions = itertools.count(1000)

    def of(self, verb: str, kind: str | None = None) -> list[Write]:
        return [w for w in self.writes if w.verb == verb and (kind is None or w.kind == kind)]

    def _record(self, verb: str, res: Resource, key: str, body: JSONObj | None, manager: str | None) -> None:
        self.writes.append(Write(verb, res.kind, key, copy.deepcopy(body), manager))
        failure = self.refuse.pop((verb, key), None)
        if failure is not None:
            raise failure

    def _echo(self, res: Resource, obj: JSONObj) -> JSONObj:
        obj["metadata"]["resourceVersion"] = str(next(self._versions))
        obj["metadata"].setdefault("uid", f"uid-{obj['metadata']['name']}")
        if self.informers is not None:
            self.informers.informer(res).add(obj)
        return obj

    def _cached(self, res: Resource, key: str) -> JSONObj | None:
        return None if self.informers is None else self.informers.informer(res).store.get(key)

    @staticmethod
    def _key(res: Resource, name: str, namespace: str | None) -> str:
        return f"{namespace}/{name}" if res.namespaced and namespace else name

    async def create(
        self,
        res: Resource,
        obj: JSONObj,
        namespace: str | None = None,
        dry_run: bool = False,
        *,
        field_manager: str = FIELD_MANAGER,
    ) -> JSONObj:
        key = object_key(obj)
        self._record("create", res, key, obj, field_manager)
        if self._cached(res, key) is not None:
            raise errors.AlreadyExists(status=409, reason="AlreadyExists", message=f"{key} exists")
        return self._echo(res, copy.deepcopy(obj))

    async def apply(
        self,
        res: Resource,
        obj: JSONObj,
        *,
        field_manager: str = FIELD_MANAGER,
        force: bool = True,
        subresource: str | None = None,
    ) -> JSONObj:
        key = object_key(obj)
        self._record("apply", res, key, obj, field_manager)
        return self._echo(res, merge_patch(self._cached(res, key) or {}, obj))

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
        self._record("patch", res, key, patch, field_manager)
        current = self._cached(res, key)
        if current is None:
            raise errors.NotFound(status=404, reason="NotFound", message=f"{key} not found")
        return self._echo(res, merge_patch(current, patch))

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
        self._record("delete", res, key, None, None)
        current = self._cached(res, key)
        if current is not None and self.informers is not None:
            self.informers.informer(res).delete(current)
