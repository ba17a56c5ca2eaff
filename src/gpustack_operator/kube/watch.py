"""One watch request: the server's stream of changes after a resourceVersion, as typed events.

kubernetes-asyncio's Watch deserialises into model classes, retries 410 once on its own and hides where
one request ends and the next begins. The informer needs the opposite: plain dicts, every ERROR surfaced
as our error (410 as Gone, so it can relist), and a clean end of the iterator when the server closes the
watch at `timeoutSeconds`, so it can renew from the last resourceVersion it saw. Reconnecting and
relisting are the informer's job, not this module's.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator
from typing import Literal, TypedDict

from gpustack_operator.api.json import JSONObj
from gpustack_operator.kube import errors
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import Resource

__all__ = ["EventType", "WatchEvent", "error_from_status", "watch"]

log = logging.getLogger(__name__)

EventType = Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"]

READ_GRACE = 30.0
"""Seconds of silence beyond the server's own timeout after which the connection is taken as dead."""


class WatchEvent(TypedDict):
    type: EventType
    object: JSONObj


def error_from_status(status: JSONObj) -> errors.KubeError:
    """Our error for the Status object of a watch ERROR event (code 410 gives Gone)."""
    code = status.get("code")
    return errors.from_response(code if isinstance(code, int) and code else 500, json.dumps(status))


async def watch(
    client: Client,
    res: Resource,
    *,
    resource_version: str,
    namespace: str | None = None,
    label_selector: str | None = None,
    field_selector: str | None = None,
    timeout_seconds: int = 300,
    bookmarks: bool = True,
) -> AsyncGenerator[WatchEvent, None]:
    """Yield ADDED/MODIFIED/DELETED/BOOKMARK events after `resource_version` until the server ends the watch.

    Raises Gone when the version is too old (HTTP 410 or an ERROR event), Unavailable when the connection
    breaks, and the matching KubeError for any other ERROR event. Close it with `contextlib.aclosing`.
    """
    params = {
        "watch": "true",
        "resourceVersion": resource_version,
        "timeoutSeconds": str(timeout_seconds),
    }
    if bookmarks:
        params["allowWatchBookmarks"] = "true"
    if label_selector:
        params["labelSelector"] = label_selector
    if field_selector:
        params["fieldSelector"] = field_selector
    path = res.path(namespace=namespace)
    async with client.stream(path, params=params, read_timeout=timeout_seconds + READ_GRACE) as lines:
        async for line in lines:
            try:
                event = json.loads(line)
                kind, obj = event["type"], event["object"]
            except (ValueError, KeyError, TypeError) as exc:
                raise errors.Unavailable(
                    status=0, reason="BadWatchEvent", message=f"undecodable event on {path}"
                ) from exc
            if kind == "ERROR":
                raise error_from_status(obj if isinstance(obj, dict) else {})
            yield event
