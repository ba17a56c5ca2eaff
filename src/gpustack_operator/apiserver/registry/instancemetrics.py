"""`instances/metrics` (contract §2.1): what an Instance uses now and which accelerators it holds.

Why this module exists: `kubectl top pod` shows CPU and memory but not the cards, and the Instance's
status shows the cards but not the usage; a user asking "what is my Instance using" wants both. The answer
(`InstanceMetrics`, below) joins the Instance Pod's container usage from `metrics.k8s.io` (metrics-server's
PodMetrics: `timestamp`, `window`, `containers[].usage`) with what the Instance holds (`status.nodeName`
and `status.allocations`: each card's UUID and mode, the slice's units). Accelerator utilisation is not
there: no metrics API serves it per card yet. When the cluster serves no `metrics.k8s.io`, the answer is a
503 saying so (a usage-less answer would read as zero usage); metrics.k8s.io's own refusals (no sample for
a Pod that just started, its server down) pass through. An Instance without a Pod is a 409 (instancepod.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiohttp import web

from gpustack_operator.api.json import JSONObj, as_list, as_mapping, as_str
from gpustack_operator.api.keys import V1, WORKER_GROUP
from gpustack_operator.apiserver.discovery import Reader
from gpustack_operator.apiserver.registry.instancepod import InstanceAndPod
from gpustack_operator.apiserver.status import StatusError
from gpustack_operator.kube import errors
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import POD_METRICS

__all__ = ["KIND", "METRICS", "InstanceMetrics", "instance_metrics", "not_served"]

KIND = "InstanceMetrics"
_STRING = {"type": "string"}
_OBJECT = {"type": "object"}
METRICS = Reader(
    "metrics",
    "The Instance Pod's container usage from metrics.k8s.io and the accelerators the Instance holds.",
    {
        "type": "object",
        "description": f"{KIND}: usage from metrics.k8s.io, cards from the Instance's status.",
        "properties": {
            "apiVersion": _STRING,
            "kind": _STRING,
            "metadata": _OBJECT,
            "timestamp": {**_STRING, "description": "When the usage was sampled."},
            "window": {**_STRING, "description": "Over how long the usage was measured."},
            "containers": {
                "type": "array",
                "description": "Each container's usage (cpu, memory), as PodMetrics gives it.",
                "items": {"type": "object", "properties": {"name": _STRING, "usage": _OBJECT}},
            },
            "nodeName": {**_STRING, "description": "The node the Instance runs on."},
            "allocations": {
                "type": "array",
                "description": "The accelerators it holds: the Instance's status.allocations.",
                "items": _OBJECT,
            },
        },
    },
)


def instance_metrics(instance: Mapping[str, Any], pod_metrics: Mapping[str, Any]) -> JSONObj:
    """The InstanceMetrics of `instance` from its Pod's `pod_metrics` (a metrics.k8s.io PodMetrics)."""
    meta, status = as_mapping(instance.get("metadata")), as_mapping(instance.get("status"))
    containers = [
        {"name": as_str(c.get("name")), "usage": dict(as_mapping(c.get("usage")))}
        for c in map(as_mapping, as_list(pod_metrics.get("containers")))
    ]
    return {
        "apiVersion": f"{WORKER_GROUP}/{V1}",
        "kind": KIND,
        "metadata": {"name": as_str(meta.get("name")), "namespace": as_str(meta.get("namespace"))},
        "timestamp": as_str(pod_metrics.get("timestamp")),
        "window": as_str(pod_metrics.get("window")),
        "containers": containers,
        "nodeName": as_str(status.get("nodeName")),
        "allocations": as_list(status.get("allocations")),
    }


def not_served() -> StatusError:
    return StatusError(
        503,
        "ServiceUnavailable",
        "the metrics.k8s.io API is not served in this cluster (install metrics-server), so there is no "
        "usage to show; the accelerators the Instance holds are in its status.allocations",
    )


class InstanceMetrics:
    """The `metrics` handler."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.instances = InstanceAndPod(client)

    async def get(self, request: web.Request) -> web.Response:
        instance, pod = await self.instances.both(request)
        meta = pod["metadata"]
        try:
            sample = await self.client.request(
                "GET", POD_METRICS.path(meta["name"], meta["namespace"]), retries=0
            )
        except errors.NotFound:
            if not await self._served():
                raise not_served() from None
            raise
        return web.json_response(instance_metrics(instance, sample))

    async def _served(self) -> bool:
        """Whether kube-apiserver serves metrics.k8s.io at all (its discovery answers)."""
        try:
            await self.client.request("GET", f"/apis/{POD_METRICS.api_version}", retries=0)
        except errors.NotFound:
            return False
        return True
