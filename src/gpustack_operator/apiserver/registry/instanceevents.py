"""`instances/events` (contract §2.1): what happened to an Instance, its Pod and its Service, oldest first.

Why this module exists: an Instance's story is spread over three objects' Events (the worker's `Stopped`
and missing-Secret warnings on the Instance; Kueue, the scheduler and the kubelet on its Pod; the
Service's node-port allocation), and `kubectl events --for` follows only one. The answer is a core/v1
`EventList`, the shape `kubectl get events -o json` prints: Events in the Instance's namespace about an
object of its name (one list with the `involvedObject.name` field selector), keeping those about this very
Instance (its UID; one deleted and created again under the same name does not inherit the old one's) and
those about a Pod or Service of its name since the Instance was created (so earlier Pods of this Instance,
before a stop and start, are included while kube keeps their Events, an hour by default), sorted by when
each last happened.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from gpustack_operator.api.json import JSONObj, as_mapping, as_str
from gpustack_operator.api.keys import KIND_INSTANCE, WORKER_GROUP
from gpustack_operator.apiserver.discovery import Reader
from gpustack_operator.apiserver.registry.instancepod import instance_of, target
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import CORE_EVENTS

__all__ = ["EVENTS", "InstanceEvents", "about_instance", "event_list", "last_seen"]

EVENTS = Reader(
    "events",
    "The Events about the Instance, its Pod and its Service, oldest first (a core/v1 EventList).",
    {"type": "object", "description": "A core/v1 EventList."},
)
_EARLIEST = datetime.min.replace(tzinfo=UTC)
_COMPANIONS = frozenset({"Pod", "Service"})


def _time(value: object) -> datetime | None:
    text = as_str(value)
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def last_seen(event: Mapping[str, Any]) -> datetime:
    """When the Event last happened: a series' last observation, else `lastTimestamp`, `eventTime`,
    `firstTimestamp` or its creation (whichever the writer filled)."""
    candidates = (
        as_mapping(event.get("series")).get("lastObservedTime"),
        event.get("lastTimestamp"),
        event.get("eventTime"),
        event.get("firstTimestamp"),
        as_mapping(event.get("metadata")).get("creationTimestamp"),
    )
    for value in candidates:
        if (when := _time(value)) is not None:
            return when
    return _EARLIEST


def _about(event: Mapping[str, Any], instance: Mapping[str, Any]) -> bool:
    meta = as_mapping(instance.get("metadata"))
    involved = as_mapping(event.get("involvedObject"))
    if as_str(involved.get("name")) != as_str(meta.get("name")):
        return False
    kind, api_version = as_str(involved.get("kind")), as_str(involved.get("apiVersion"))
    if kind == KIND_INSTANCE and api_version.partition("/")[0] == WORKER_GROUP:
        uid = as_str(involved.get("uid"))
        return not uid or uid == as_str(meta.get("uid"))
    if kind in _COMPANIONS and api_version == "v1":
        created = _time(meta.get("creationTimestamp")) or _EARLIEST
        return last_seen(event) >= created
    return False


def about_instance(events: Sequence[JSONObj], instance: Mapping[str, Any]) -> list[JSONObj]:
    """The Events about `instance`, its Pods and its Service, oldest first (see the module's docstring)."""
    kept = [event for event in events if _about(event, instance)]
    return sorted(kept, key=lambda e: (last_seen(e), as_str(as_mapping(e.get("metadata")).get("name"))))


def event_list(items: list[JSONObj], resource_version: str) -> JSONObj:
    return {
        "kind": "EventList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": resource_version} if resource_version else {},
        "items": items,
    }


class InstanceEvents:
    """The `events` handler."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def get(self, request: web.Request) -> web.Response:
        namespace, name = target(request)
        instance = await instance_of(self.client, namespace, name)
        events, version = await self.client.list_all(
            CORE_EVENTS, namespace, field_selector=f"involvedObject.name={name}"
        )
        return web.json_response(event_list(about_instance(events, instance), version))
