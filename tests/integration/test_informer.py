"""An informer misses nothing: not when etcd compacts its history, not when kube-apiserver restarts.

A reconciler trusts its informer's cache and its handler calls to be the cluster's state. These tests write
a burst of creates, updates and deletes while the informer's resourceVersion is compacted away and while
the apiserver goes down under its watch, then compare the cache (and what a handler built from the calls
it got) with a fresh list from the server, resourceVersions included.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable

from gpustack_operator.api.json import JSONObj
from gpustack_operator.kube import errors, resources
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.informer import Informer, InformerFactory
from gpustack_operator.runtime import Supervisor
from gpustack_operator.sandbox.cluster import Sandbox
from tests.helpers import compact_etcd, eventually

CM = resources.CONFIGMAPS
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


class Mirror:
    """A handler that rebuilds name -> resourceVersion from the calls alone, and notes impossible ones."""

    def __init__(self) -> None:
        self.view: dict[str, str] = {}
        self.deletes = 0
        self.anomalies: list[str] = []

    def on_add(self, obj: JSONObj) -> None:
        name, rv = obj["metadata"]["name"], obj["metadata"]["resourceVersion"]
        if name in self.view:
            self.anomalies.append(f"add of known {name}")
        self.view[name] = rv

    def on_update(self, old: JSONObj, new: JSONObj) -> None:
        name = new["metadata"]["name"]
        if name not in self.view:
            self.anomalies.append(f"update of unknown {name}")
        self.view[name] = new["metadata"]["resourceVersion"]

    def on_delete(self, obj: JSONObj) -> None:
        self.deletes += 1
        if self.view.pop(obj["metadata"]["name"], None) is None:
            self.anomalies.append(f"delete of unknown {obj['metadata']['name']}")


def cached(informer: Informer) -> dict[str, str]:
    return {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in informer.store.list()}


async def server_view(kube: Client, namespace: str) -> dict[str, str]:
    return {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in await kube.list(CM, namespace)}


async def converged(kube: Client, namespace: str, informer: Informer, mirror: Mirror) -> None:
    """Wait until cache and handler view both equal a fresh list; fail with the difference otherwise."""

    async def equal() -> bool:
        truth = await server_view(kube, namespace)
        assert cached(informer) == truth, (
            f"cache differs in {set(cached(informer).items()) ^ set(truth.items())}"
        )
        assert mirror.view == truth, (
            f"handler view differs in {set(mirror.view.items()) ^ set(truth.items())}"
        )
        return True

    await eventually(equal, timeout=180, interval=1.0, what="informer equals the server")
    assert mirror.anomalies == []


async def persist(op: Callable[[], Awaitable[object]], deadline: float = 240.0) -> None:
    """Run one write, riding out a restarting apiserver; a retried create that already landed is fine."""

    async def landed() -> bool:
        try:
            await op()
        except errors.AlreadyExists:
            return True
        except errors.Unavailable:
            return False
        return True

    await eventually(landed, timeout=deadline, interval=0.5, what="a write while the apiserver restarts")


async def restart_apiserver(sandbox: Sandbox, kube: Client) -> None:
    """Restart kube-apiserver, then wait until the cluster's own controllers have caught up again.

    Later tests in the session create a namespace and at once a queued Pod; Kueue's webhook refuses it
    until Kueue's namespace informer (in backoff after the restart) has reconnected.
    """
    await sandbox.restart("kube-apiserver")
    probe_ns = f"settle-{uuid.uuid4().hex[:6]}"
    await persist(lambda: kube.create(resources.NAMESPACES, {"metadata": {"name": probe_ns}}))
    pod = {
        "metadata": {"generateName": "probe-", "namespace": probe_ns, "labels": {QUEUE_LABEL: "probe"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }

    async def kueue_sees_new_namespace() -> bool:
        try:
            created = await kube.create(resources.PODS, pod, dry_run=True)
        except errors.KubeError:
            return False
        return bool(created["spec"].get("schedulingGates"))

    try:
        await eventually(kueue_sees_new_namespace, timeout=120, what="Kueue caught up after the restart")
    finally:
        await kube.delete(resources.NAMESPACES, probe_ns)


class Writer:
    """Creates, updates and deletes ConfigMaps named cm-<i>, at most `concurrency` requests at a time."""

    def __init__(self, kube: Client, namespace: str, concurrency: int = 16) -> None:
        self.kube, self.namespace = kube, namespace
        self.done = 0
        self._slots = asyncio.Semaphore(concurrency)
        self._progress = asyncio.Condition()

    async def _do(self, op: Callable[[], Awaitable[object]]) -> None:
        async with self._slots:
            await persist(op)
        async with self._progress:
            self.done += 1
            self._progress.notify_all()

    async def reached(self, writes: int) -> None:
        async with self._progress:
            await self._progress.wait_for(lambda: self.done >= writes)

    async def create(self, i: int) -> None:
        body = {"metadata": {"name": f"cm-{i}", "namespace": self.namespace}, "data": {"step": "0"}}
        await self._do(lambda: self.kube.create(CM, body))

    async def update(self, i: int, step: int) -> None:
        patch = {"data": {"step": str(step)}}
        await self._do(lambda: self.kube.patch(CM, f"cm-{i}", patch, namespace=self.namespace))

    async def delete(self, i: int) -> None:
        await self._do(lambda: self.kube.delete(CM, f"cm-{i}", self.namespace))

    async def life(self, i: int) -> None:
        """Four writes to one object, in order: create, two updates, then delete (even i) or update."""
        await self.create(i)
        await self.update(i, 1)
        await self.update(i, 2)
        await (self.delete(i) if i % 2 == 0 else self.update(i, 3))


async def test_informer_misses_nothing_across_compaction_and_apiserver_restart_during_2000_writes(
    sandbox: Sandbox, kube: Client, namespace: str
) -> None:
    assert sandbox.state is not None
    factory = InformerFactory(kube, watch_timeout=5)  # short watches: renewals happen during the burst too
    informer = factory.informer(CM, namespace=namespace)
    mirror = Mirror()
    informer.add_handler(mirror)
    writer = Writer(kube, namespace)
    async with Supervisor("test") as sup:
        factory.start(sup)
        await asyncio.wait_for(factory.wait_for_sync(), 60)
        burst = asyncio.gather(*(writer.life(i) for i in range(500)))
        try:
            await writer.reached(600)
            await compact_etcd(sandbox.state.ports["etcd"])  # while writes continue
            await writer.reached(1200)
            reconnects = informer.reconnects
            await restart_apiserver(sandbox, kube)  # under the open watch; writers retry meanwhile
            await burst
        finally:
            if not burst.done():
                burst.cancel()
                await asyncio.gather(burst, return_exceptions=True)
        assert writer.done == 2000
        await converged(kube, namespace, informer, mirror)
        assert informer.reconnects > reconnects  # the watch really broke and came back
        assert mirror.deletes == 250


async def test_informer_resuming_from_a_compacted_version_relists_and_reports_what_it_missed(
    sandbox: Sandbox, kube: Client, namespace: str
) -> None:
    assert sandbox.state is not None
    informer = Informer(kube, CM, namespace=namespace)
    mirror = Mirror()
    informer.add_handler(mirror)
    writer = Writer(kube, namespace)
    await asyncio.gather(*(writer.create(i) for i in range(150)))
    async with Supervisor("test") as sup:
        sup.spawn("informer", informer.run)
        await asyncio.wait_for(informer.wait_synced(), 60)
        await converged(kube, namespace, informer, mirror)
    # Offline: delete 50, update 50, create 50; then the history is compacted and the watch cache rebuilt,
    # so the version the informer resumes from is gone everywhere.
    await asyncio.gather(
        *(writer.delete(i) for i in range(50)),
        *(writer.update(i, 1) for i in range(50, 100)),
        *(writer.create(i) for i in range(150, 200)),
    )
    await compact_etcd(sandbox.state.ports["etcd"])
    await restart_apiserver(sandbox, kube)
    async with Supervisor("test") as sup:
        sup.spawn("informer", informer.run)
        await converged(kube, namespace, informer, mirror)
    assert informer.relists == 1
    assert mirror.deletes == 50
