"""One subscribed cluster: its connection, its informers, and the state every answer reports.

Each cluster runs under a Supervisor of its own, with its own client (timeout, qps, burst) and backoff, so
a slow or dead cluster delays nothing but itself. Its life: connect, wait until the APIService
`v1.worker.gpustack.ai` is Available, discover which v1 kinds it serves, run one informer per kind
(publishing `{type, cluster, object}` on the hub; each lists again every `--resync-period` and publishes
only what that list finds changed), and once they have synced check every
`probe_interval` that the cluster still answers; a failed check marks it Unavailable (its cached objects
are then left out of lists and the aggregate) until one succeeds. The informers reconnect on their own and
resume from their last resourceVersion, so a restarted cluster resumes without duplicates.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Awaitable, Callable, Collection
from typing import Any

from gpustack_operator.api.json import JSONObj
from gpustack_operator.kube import errors
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.conditions import conditions
from gpustack_operator.kube.informer import Informer
from gpustack_operator.kube.resources import APISERVICES, Resource
from gpustack_operator.runtime import Attempts, Backoff, Supervisor

from .events import Event, Hub
from .kinds import APISERVICE, GROUP_VERSION, KINDS, resource_from_discovery

__all__ = ["ClusterState", "ClusterWatch", "Connector"]

log = logging.getLogger(__name__)

Connector = Callable[[str, "str | None"], Awaitable[Client]]
"""(cluster, token) -> a Client that reaches that cluster's kube-apiserver."""

RETRY = Backoff(base=1.0, cap=30.0, jitter=0.2)
"""Between attempts to connect, find the APIService Available, and discover the served kinds."""


class ClusterState(enum.StrEnum):
    CONNECTING = "Connecting"
    WAITING = "WaitingForAPIService"
    SYNCING = "Syncing"
    SYNCED = "Synced"
    UNAVAILABLE = "Unavailable"


class _Publisher:
    """An informer's events, as `{type, cluster, object}` on the kind's topic."""

    def __init__(self, hub: Hub, cluster: str, kind: str) -> None:
        self.hub, self.cluster, self.kind = hub, cluster, kind

    def on_add(self, obj: JSONObj) -> None:
        self.hub.publish(self.kind, Event(type="ADDED", cluster=self.cluster, object=obj))

    def on_update(self, old: JSONObj, new: JSONObj) -> None:
        self.hub.publish(self.kind, Event(type="MODIFIED", cluster=self.cluster, object=new))

    def on_delete(self, obj: JSONObj) -> None:
        self.hub.publish(self.kind, Event(type="DELETED", cluster=self.cluster, object=obj))


class ClusterWatch:
    """See the module doc; `start()` then `stop()`; `state`/`message` say where it stands."""

    def __init__(
        self,
        name: str,
        connector: Connector,
        hub: Hub,
        *,
        kinds: Collection[str] = (),
        token: str | None = None,
        timeout: float = 30.0,
        probe_interval: float = 5.0,
        relist_period: float | None = None,
        backoff: Backoff = RETRY,
    ) -> None:
        self.name = name
        self.kinds = frozenset(kinds or KINDS)
        """The kinds to follow (those the cluster serves among them)."""
        self.token = token
        self.state = ClusterState.CONNECTING
        self.message = ""
        self.informers: dict[str, Informer] = {}
        self._connector = connector
        self._hub = hub
        self._timeout = timeout
        self._probe_interval = probe_interval
        self._relist_period = relist_period
        self._backoff = backoff
        self._client: Client | None = None
        self._sup = Supervisor(f"cluster:{name}", grace=5.0)

    # ---- what answers report ------------------------------------------------------------------------------
    @property
    def synced(self) -> bool:
        return self.state is ClusterState.SYNCED

    def status(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "state": str(self.state),
            "synced": self.synced,
            "message": self.message,
            "kinds": sorted(self.informers),
        }

    def objects(self, kind: str, namespace: str | None = None) -> list[JSONObj] | None:
        """The cached objects of `kind` (in `namespace`), or None when they cannot be answered for:
        the cluster is not synced, or it does not serve the kind."""
        informer = self.informers.get(kind)
        if not self.synced or informer is None:
            return None
        objs = informer.store.list()
        if namespace:
            objs = [o for o in objs if (o.get("metadata") or {}).get("namespace") == namespace]
        return objs

    # ---- life ----------------------------------------------------------------------------------------------
    def start(self) -> None:
        self._sup.spawn(f"cluster:{self.name}", self._run, restart="on-failure", backoff=self._backoff)

    async def stop(self) -> None:
        """Stop its tasks, close its client, and tell watchers to drop all of its objects."""
        await self._sup.stop()
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.close()
            self._client = None
        for kind in sorted(self.kinds):
            self._hub.publish(kind, Event(type="DELETED", cluster=self.name, object=None))

    def _set(self, state: ClusterState, message: str = "") -> None:
        if (state, message) == (self.state, self.message):
            return
        if state is ClusterState.UNAVAILABLE:
            log.warning("cluster %s: unavailable: %s", self.name, message)
        else:
            log.info("cluster %s: %s %s", self.name, state, message)
        self.state, self.message = state, message
        self._hub.publish_all(Event(type="STATUS", cluster=self.name, object=self.status()))

    async def _run(self) -> None:
        attempts = self._backoff.attempts()
        while True:
            try:
                await self._connect_and_follow(attempts)
            except (errors.KubeError, errors.KubeConfigError, OSError, TimeoutError) as err:
                self._set(ClusterState.UNAVAILABLE, str(err))
            await asyncio.sleep(attempts.next_delay())

    async def _connect_and_follow(self, attempts: Attempts) -> None:
        if self._client is None:
            self._client = await self._connector(self.name, self.token)
        client = self._client
        if not self.informers:
            await self._wait_apiservice(client)
            resources = await self._served(client)
            for res in resources:
                informer = Informer(client, res, relist_period=self._relist_period)
                informer.add_handler(_Publisher(self._hub, self.name, res.kind))
                self.informers[res.kind] = informer
                self._sup.spawn(f"informer:{self.name}:{res.plural}", informer.run, restart="on-failure")
            if not resources:
                log.warning("cluster %s serves none of %s", self.name, ", ".join(sorted(self.kinds)))
        if not all(i.has_synced() for i in self.informers.values()):
            self._set(ClusterState.SYNCING)
            await asyncio.gather(*(i.wait_synced() for i in self.informers.values()))
        while True:  # a failed probe raises, and _run marks the cluster Unavailable and comes back here
            await self._probe(client)
            self._set(ClusterState.SYNCED)
            attempts.reset()  # the next failure is retried soon again
            await asyncio.sleep(self._probe_interval)

    async def _wait_apiservice(self, client: Client) -> None:
        while True:
            apiservice = await client.get_or_none(APISERVICES, APISERVICE)
            available = conditions(apiservice or {}).get("Available") or {}
            if available.get("status") == "True":
                return
            why = available.get("message") or ("absent" if apiservice is None else "not Available yet")
            self._set(ClusterState.WAITING, f"APIService {APISERVICE}: {why}")
            await asyncio.sleep(self._probe_interval)

    async def _served(self, client: Client) -> list[Resource]:
        doc = await client.request("GET", f"/apis/{GROUP_VERSION}", timeout=self._timeout)
        found = (resource_from_discovery(entry) for entry in doc.get("resources") or ())
        return sorted((r for r in found if r is not None and r.kind in self.kinds), key=lambda r: r.kind)

    async def _probe(self, client: Client) -> None:
        await client.request("GET", f"/apis/{GROUP_VERSION}", timeout=self._timeout, retries=0)
