"""`instances/log` (contract §2.1): the log of the Instance Pod's main container, as `kubectl logs` reads it.

Why this module exists: a user who owns an Instance thinks of its log, not of the Pod the worker made for
it. The request's kubectl-logs parameters (`container`, default `main`; `follow`, `tailLines`,
`sinceSeconds`, `sinceTime`, `timestamps`, `limitBytes`, `previous`) go to kube-apiserver's `pods/log` of
the Instance's Pod, which validates them and reads the kubelet; its answer is streamed back chunk by chunk
as `text/plain`, never buffered, so `follow=true` tails the log. kube-apiserver's refusals (a container
still waiting to start, an unknown container, a bad parameter) come back as its Status; an Instance
without a Pod is a 409 saying why (instancepod.py). Once the log has started, an upstream failure can only
end the stream.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from aiohttp import web

from gpustack_operator.apiserver.discovery import Reader
from gpustack_operator.apiserver.registry.instancepod import InstanceAndPod
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.errors import KubeError
from gpustack_operator.kube.resources import PODS
from gpustack_operator.rules.instance.pod import MAIN

__all__ = ["LOG", "PARAMETERS", "InstanceLog", "log_params"]

log = logging.getLogger(__name__)

PARAMETERS = (
    "container",
    "follow",
    "previous",
    "sinceSeconds",
    "sinceTime",
    "timestamps",
    "tailLines",
    "limitBytes",
)
"""The query parameters passed on to `pods/log` (kubectl logs' own); any other is ignored, as kube does."""
LOG = Reader(
    "log",
    "The log of the Instance Pod's container (main unless `container` names another), as pods/log.",
    {"type": "string", "description": "The container's log lines."},
    produces="text/plain",
    query=PARAMETERS,
)
READ_SECONDS = 60.0
"""Longest silence tolerated while a finished log is read."""
FOLLOW_SECONDS = 24 * 3600.0
"""Longest silence a followed log may keep before the stream is ended (a client re-follows)."""


def log_params(query: Mapping[str, str]) -> dict[str, str]:
    """The `pods/log` parameters of a request's query: the first value of each known one, and the main
    container when none (or an empty one) is named."""
    params = {name: query[name] for name in PARAMETERS if name in query}
    if not params.get("container"):
        params["container"] = MAIN
    return params


def _true(value: str | None) -> bool:
    return (value or "").lower() in ("1", "t", "true")


class InstanceLog:
    """The `log` handler."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.instances = InstanceAndPod(client)

    async def get(self, request: web.Request) -> web.StreamResponse:
        _, pod = await self.instances.both(request)
        meta = pod["metadata"]
        params = log_params(request.query)
        seconds = FOLLOW_SECONDS if _true(params.get("follow")) else READ_SECONDS
        path = PODS.path(meta["name"], meta["namespace"], "log")
        async with self.client.stream_bytes(path, params=params, read_timeout=seconds) as chunks:
            resp = web.StreamResponse(headers={"Content-Type": "text/plain; charset=utf-8"})
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            try:
                async for chunk in chunks:
                    await resp.write(chunk)
            except KubeError as e:  # the headers are out: end the stream
                log.info("Log of %s/%s ended upstream: %s", meta["namespace"], meta["name"], e)
            except ConnectionResetError:
                log.debug("Log of %s/%s ended by the client", meta["namespace"], meta["name"])
        return resp
