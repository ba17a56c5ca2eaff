"""A test reconciler and a running manager, shared by the manager's integration tests.

`DerivedAnnotation` is the smallest honest reconciler: it reads a ConfigMap from the manager's shared cache,
derives an annotation from its data, and writes it with a merge patch that carries the resourceVersion it
read (so a stale cache conflicts instead of overwriting someone's newer write). It counts what it does, so
tests can tell "converged and quiet" from "converged while rewriting the same value in a loop".
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable

from gpustack_operator.api.json import JSONObj
from gpustack_operator.controllerkit.cache import Cache
from gpustack_operator.controllerkit.manager import Manager
from gpustack_operator.controllerkit.reconciler import DONE, Result, TerminalError
from gpustack_operator.controllerkit.spec import ControllerSpec
from gpustack_operator.controllerkit.watches import for_
from gpustack_operator.kube import errors, resources
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.events import EventRecorder
from gpustack_operator.kube.informer import InformerFactory
from gpustack_operator.runtime import Backoff, Supervisor
from tests.helpers import eventually

CM = resources.CONFIGMAPS
DERIVED = "test.gpustack.ai/derived"
MANAGED = "test.gpustack.ai/managed"
"""Only ConfigMaps with this label (="true") are the test reconciler's (not kube-root-ca.crt)."""
SELECTOR = f"{MANAGED}=true"


def derived(data: dict[str, str]) -> str:
    """What the annotation must say for `data`; replicas, when present, must be an integer."""
    if "replicas" in data:
        try:
            int(data["replicas"])
        except ValueError:
            raise TerminalError(
                f"data.replicas: {data['replicas']!r} is not an integer", reason="InvalidSpec"
            ) from None
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


class DerivedAnnotation:
    """Keeps `DERIVED` equal to `derived(data)` on every ConfigMap of one namespace."""

    def __init__(self, client: Client, cache: Cache) -> None:
        self.client = client
        self.cache = cache
        self.reconciles = 0
        self.writes = 0  # successful patches
        self.conflicts = 0
        self.before_write: Callable[[str], Awaitable[None]] | None = None  # a test's hook

    async def reconcile(self, key: str) -> Result:
        self.reconciles += 1
        cm = self.cache.get(CM, key)
        if cm is None:
            return DONE
        meta = cm["metadata"]
        want = derived(cm.get("data") or {})
        if (meta.get("annotations") or {}).get(DERIVED) == want:
            return DONE
        if self.before_write is not None:
            await self.before_write(key)
        patch = {"metadata": {"resourceVersion": meta["resourceVersion"], "annotations": {DERIVED: want}}}
        try:
            await self.client.patch(CM, meta["name"], patch, namespace=meta["namespace"])
        except errors.Conflict:
            self.conflicts += 1
            raise
        self.writes += 1
        return DONE


@contextlib.asynccontextmanager
async def running_manager(
    client: Client, namespace: str, *, concurrency: int = 4
) -> AsyncIterator[tuple[Manager, DerivedAnnotation]]:
    """A manager (no leader election) reconciling the namespace's ConfigMaps, stopped on exit."""
    manager = Manager(
        InformerFactory(client),
        recorder=EventRecorder(client, instance="integration-test", flush_interval=1.0),
    )
    reconciler = DerivedAnnotation(client, manager.cache)
    manager.add(
        ControllerSpec(
            "derived-annotation",
            reconciler,
            for_(CM, namespace=namespace, label_selector=SELECTOR),
            concurrency=concurrency,
            backoff=Backoff(base=0.05, cap=2.0),
        )
    )
    async with Supervisor("test manager") as sup:
        sup.spawn("manager", manager.run)

        async def started() -> bool:
            return manager.leading

        await eventually(started, what="manager synced and running")
        yield manager, reconciler


async def annotated(client: Client, namespace: str) -> dict[str, str | None]:
    """name -> the derived annotation, as the server has it."""
    return {
        cm["metadata"]["name"]: (cm["metadata"].get("annotations") or {}).get(DERIVED)
        for cm in await client.list(CM, namespace, label_selector=SELECTOR)
    }


def managed_cm(name: str, namespace: str, **data: str) -> JSONObj:
    """A ConfigMap the test reconciler looks after."""
    return {"metadata": {"name": name, "namespace": namespace, "labels": {MANAGED: "true"}}, "data": data}
