"""In-cluster configuration and transport without kubernetes-asyncio: a Pod's service-account token and CA.

Why it exists: `device-manager serve` runs as a DaemonSet on every GPU node, and importing kubernetes-asyncio
costs about 40 MB resident per process (its package init imports every generated model class), all to read
two files and set one header, and its transport, aiohttp, another 14 MB; so requests go through kube.http1.
Inside a cluster the API server is `https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT`, trusted
through the mounted `ca.crt`, and we authenticate with the mounted token, which the kubelet rotates: it is
read again once a minute, as client-go does. kubernetes-asyncio stays the loader for kubeconfig files (exec
plugins, client certificates, contexts), imported only when one is given.

`InClusterTransport.call_api` takes the keywords of kubernetes-asyncio's `ApiClient.call_api` that
kube.client uses, so the Client sends through either one the same way.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from gpustack_operator.kube import errors, http1
from gpustack_operator.runtime import Clock, MonotonicClock

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
SERVICE_ACCOUNT_DIR_ENV = "GPUSTACK_SERVICE_ACCOUNT_DIR"
"""Where the token and CA are when not at the Pod mount: a process run as a ServiceAccount outside a Pod
(the chart's install test runs the worker so, with a TokenRequest token)."""
TOKEN_REFRESH_S = 60.0
"""Seconds a read token is used before the file is read again (bound tokens rotate; client-go: 1 min)."""
CONNECTION_LIMIT = 100
"""Connections open to the API server at once (watches hold one each), as kubernetes-asyncio allows."""


@dataclass(frozen=True)
class InClusterConfig:
    server: str
    """The API server's Service address (KUBERNETES_SERVICE_HOST)."""
    port: int
    token_file: Path
    ca_file: Path

    @property
    def host(self) -> str:
        """`https://server:port`, as kube.client names where it sends."""
        return (
            f"https://[{self.server}]:{self.port}"
            if ":" in self.server
            else f"https://{self.server}:{self.port}"
        )

    @classmethod
    def from_environ(
        cls, environ: Mapping[str, str] | None = None, directory: Path | None = None
    ) -> InClusterConfig:
        """The Pod's view of the API server (default: this process's environment and SERVICE_ACCOUNT_DIR);
        KubeConfigError naming what is missing, as outside a cluster."""
        environ = os.environ if environ is None else environ
        if directory is None:
            directory = Path(environ.get(SERVICE_ACCOUNT_DIR_ENV) or SERVICE_ACCOUNT_DIR)
        host = environ.get("KUBERNETES_SERVICE_HOST", "")
        port = environ.get("KUBERNETES_SERVICE_PORT", "")
        if not host or not port:
            raise _error("KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set")
        token_file, ca_file = directory / "token", directory / "ca.crt"
        for path in (token_file, ca_file):
            if not path.is_file() or path.stat().st_size == 0:
                raise _error(f"{path} is missing or empty")
        if not port.isdigit():
            raise _error(f"KUBERNETES_SERVICE_PORT={port!r} is not a port number")
        return cls(host, int(port), token_file, ca_file)


class InClusterTransport:
    """Sends requests to the API server with the service account's token over kube.http1 connections."""

    def __init__(self, config: InClusterConfig, *, clock: Clock | None = None) -> None:
        self.configuration = config
        self._clock: Clock = clock or MonotonicClock()
        self._ssl = ssl.create_default_context(cafile=str(config.ca_file))
        self._pool: http1.Pool | None = None
        self._token = ""
        self._token_read_at: float | None = None

    async def call_api(
        self,
        resource_path: str,
        method: str,
        *,
        query_params: Sequence[tuple[str, str]] = (),
        header_params: Mapping[str, str] | None = None,
        body: Any = None,
        _request_timeout: http1.Timeout = None,
        **_: Any,
    ) -> http1.Response:
        """Send one request; the response is the caller's to read and release (`async with`)."""
        headers = dict(header_params or {})
        headers["Authorization"] = f"Bearer {await self._bearer()}"
        target = resource_path + ("?" + urlencode(list(query_params)) if query_params else "")
        data = None if body is None else json.dumps(body).encode()
        return await self._open().request(method, target, headers, data, _request_timeout)

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    def _open(self) -> http1.Pool:
        if self._pool is None:
            config = self.configuration
            self._pool = http1.Pool(config.server, config.port, self._ssl, limit=CONNECTION_LIMIT)
        return self._pool

    async def _bearer(self) -> str:
        now = self._clock.now()
        if self._token_read_at is None or now - self._token_read_at >= TOKEN_REFRESH_S:
            try:
                text = await asyncio.to_thread(self.configuration.token_file.read_text, encoding="utf-8")
            except OSError as exc:
                if not self._token:
                    raise errors.Unavailable(status=0, reason="TokenUnreadable", message=str(exc)) from exc
                text = self._token  # keep the last token while the kubelet swaps the file
            self._token, self._token_read_at = text.strip(), now
        return self._token


def _error(what: str) -> errors.KubeConfigError:
    return errors.KubeConfigError(
        f"cannot use the in-cluster service account: {what} "
        "(outside a cluster, pass --kubeconfig or set KUBECONFIG)"
    )
