"""The subscribed clusters: subscribe, unsubscribe, and how the gateway connects to each (contract §9).

`gpustack-api` mode reaches cluster <c> through the GPUStack server's proxy at
`http(s)://localhost:<port>/v2/clusters/<c>/proxy` with the subscription's token (https: certificate not
verified, as the proxy is local); `loopback` uses the local kubeconfig, its context named after the
cluster (without --kubeconfig, the in-cluster service account: every cluster is the local one).
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Any

from gpustack_operator.kube.client import Client, connect, connect_url

from .cluster import ClusterWatch, Connector
from .events import Hub
from .options import ConnectionMode, GatewayOptions

__all__ = ["Fleet", "connector"]

log = logging.getLogger(__name__)


def connector(options: GatewayOptions) -> Connector:
    """How to make the Client of cluster <c> in the options' connection mode."""

    async def loopback(cluster: str, token: str | None) -> Client:
        context = cluster if options.kubeconfig is not None else None
        return await connect(
            options.kubeconfig, context=context, qps=options.qps, burst=options.burst, timeout=options.timeout
        )

    async def gpustack_api(cluster: str, token: str | None) -> Client:
        return await connect_url(
            options.proxy_host(cluster),
            token=token,
            insecure=options.scheme == "https",
            qps=options.qps,
            burst=options.burst,
            timeout=options.timeout,
        )

    return loopback if options.mode is ConnectionMode.LOOPBACK else gpustack_api


class Fleet:
    """Clusters by name; each a ClusterWatch with its own tasks."""

    def __init__(self, options: GatewayOptions, hub: Hub, connect_to: Connector | None = None) -> None:
        self.options = options
        self.hub = hub
        self.clusters: dict[str, ClusterWatch] = {}
        self._connect = connect_to or connector(options)

    async def subscribe(
        self, name: str, *, token: str | None = None, force: bool = False, kinds: Collection[str] = ()
    ) -> bool:
        """Follow `name`; True when a watch was started (new, or restarted by `force`)."""
        current = self.clusters.get(name)
        if current is not None:
            if not force:
                return False
            await self.unsubscribe(name)
        watch = ClusterWatch(
            name,
            self._connect,
            self.hub,
            kinds=kinds,
            token=token,
            timeout=self.options.timeout,
            probe_interval=self.options.probe_interval,
            relist_period=self.options.resync,
        )
        self.clusters[name] = watch
        watch.start()
        log.info("subscribed cluster %s", name)
        return True

    async def unsubscribe(self, name: str) -> bool:
        """Stop following `name` (watchers are told to drop all of it); False when it was not followed."""
        watch = self.clusters.pop(name, None)
        if watch is None:
            return False
        await watch.stop()
        log.info("unsubscribed cluster %s", name)
        return True

    def status(self, name: str) -> dict[str, Any]:
        watch = self.clusters.get(name)
        if watch is None:
            return {"name": name, "state": "NotSubscribed", "synced": False, "message": "", "kinds": []}
        return watch.status()

    def names(self, requested: Collection[str]) -> list[str]:
        """The clusters an answer covers: those requested (subscribed or not), else every subscribed one."""
        return list(dict.fromkeys(requested)) if requested else sorted(self.clusters)

    async def close(self) -> None:
        for name in list(self.clusters):
            await self.unsubscribe(name)
