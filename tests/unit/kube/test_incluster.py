"""In-cluster configuration: what a Pod's service account gives the client, over real TLS on 127.0.0.1.

A small HTTPS server with a certificate from a test CA plays the API server and echoes each request, so
the token, TLS verification against the mounted CA, token rotation and the request encoding are all the
real code paths; only the answers are ours.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web

from gpustack_operator.certs import pki
from gpustack_operator.kube import errors, resources
from gpustack_operator.kube.client import MERGE_PATCH, Client, connect
from gpustack_operator.kube.incluster import TOKEN_REFRESH_S, InClusterConfig, InClusterTransport
from gpustack_operator.runtime import FakeClock

from .tls import mount, serving_context


async def echo(request: web.Request) -> web.Response:
    body = await request.read()
    seen = {
        "method": request.method,
        "path": request.path,
        "query": dict(request.query),
        "authorization": request.headers.get("Authorization"),
        "contentType": request.headers.get("Content-Type"),
        "body": json.loads(body) if body else None,
    }
    return web.json_response(seen)


@pytest_asyncio.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[int, pki.KeyPair]]:
    """An HTTPS echo server on 127.0.0.1 with a cert from its own CA; yields (port, CA)."""
    context, ca = serving_context(tmp_path)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", echo)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield port, ca
    finally:
        await runner.cleanup()


def environ(port: int) -> dict[str, str]:
    return {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(port)}


async def test_requests_carry_the_mounted_token_query_and_json_body(
    server: tuple[int, pki.KeyPair], tmp_path: Path
) -> None:
    port, ca = server
    config = InClusterConfig.from_environ(environ(port), mount(tmp_path / "sa", "first-token", ca))
    async with Client(InClusterTransport(config)) as kube:
        assert kube.host == f"https://127.0.0.1:{port}"
        seen = await kube.patch(resources.NODES, "n1", {"metadata": {"labels": {"a": "b"}}})
        listed = await kube.list_page(resources.PODS, "ns", label_selector="app=x", limit=5)
    assert seen == {
        "method": "PATCH",
        "path": "/api/v1/nodes/n1",
        "query": {"fieldManager": "gpustack-operator"},
        "authorization": "Bearer first-token",
        "contentType": MERGE_PATCH,
        "body": {"metadata": {"labels": {"a": "b"}}},
    }
    assert (listed["path"], listed["query"]) == (
        "/api/v1/namespaces/ns/pods",
        {"labelSelector": "app=x", "limit": "5"},
    )


async def test_a_rotated_token_is_used_once_the_refresh_period_has_passed(
    server: tuple[int, pki.KeyPair], tmp_path: Path
) -> None:
    port, ca = server
    directory = mount(tmp_path / "sa", "old", ca)
    clock = FakeClock()
    transport = InClusterTransport(InClusterConfig.from_environ(environ(port), directory), clock=clock)
    async with Client(transport) as kube:

        async def bearer() -> Any:
            return (await kube.get(resources.NAMESPACES, "default"))["authorization"]

        assert await bearer() == "Bearer old"
        (directory / "token").write_text("new")  # the kubelet rotated the projected token
        clock.advance(TOKEN_REFRESH_S - 1)
        assert await bearer() == "Bearer old"
        clock.advance(1)
        assert await bearer() == "Bearer new"


async def test_a_server_not_signed_by_the_mounted_ca_is_refused(
    server: tuple[int, pki.KeyPair], tmp_path: Path
) -> None:
    port, _ = server
    stranger = pki.new_ca("some-other-ca")
    config = InClusterConfig.from_environ(environ(port), mount(tmp_path / "sa", "token", stranger))
    async with Client(InClusterTransport(config), retries=0) as kube:
        with pytest.raises(errors.Unavailable, match="certificate verify failed"):
            await kube.get(resources.NAMESPACES, "default")


@pytest.mark.parametrize(
    ("env", "files", "complaint"),
    [
        pytest.param({}, {"token": "t", "ca.crt": "c"}, "KUBERNETES_SERVICE_HOST", id="outside-a-pod-no-env"),
        pytest.param(
            {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"},
            {"ca.crt": "c"},
            "token is missing or empty",
            id="no-token-mounted",
        ),
        pytest.param(
            {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"},
            {"token": "t", "ca.crt": ""},
            "ca.crt is missing or empty",
            id="empty-ca",
        ),
    ],
)
def test_missing_pieces_are_named_with_the_way_out(
    tmp_path: Path, env: dict[str, str], files: dict[str, str], complaint: str
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(errors.KubeConfigError, match=complaint) as caught:
        InClusterConfig.from_environ(env, tmp_path)
    assert "pass --kubeconfig or set KUBECONFIG" in str(caught.value)


def test_an_ipv6_service_address_is_bracketed(tmp_path: Path) -> None:
    for name in ("token", "ca.crt"):
        (tmp_path / name).write_text("x")
    env = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    assert InClusterConfig.from_environ(env, tmp_path).host == "https://[fd00::1]:443"


async def test_connect_without_a_kubeconfig_outside_a_cluster_says_what_to_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(errors.KubeConfigError, match="pass --kubeconfig"):
        await connect(None)


def test_connecting_in_cluster_imports_neither_kubernetes_asyncio_nor_aiohttp(tmp_path: Path) -> None:
    """The DaemonSet's memory budget: kubernetes-asyncio and aiohttp (~55 MB) serve kubeconfig files only."""
    directory = mount(tmp_path / "sa", "token", pki.new_ca("ca"))
    probe = (
        "import asyncio, sys\n"
        "from pathlib import Path\n"
        "import gpustack_operator.kube.incluster as incluster\n"
        "from gpustack_operator.kube.client import connect\n"
        "incluster.SERVICE_ACCOUNT_DIR = Path(sys.argv[1])\n"
        "async def main():\n"
        "    client = await connect(None)\n"
        "    await client.close()\n"
        "    return client.host\n"
        "print(asyncio.run(main()), {'kubernetes_asyncio', 'aiohttp'} & set(sys.modules))\n"
    )
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443", "PATH": "/usr/bin"}
    done = subprocess.run(
        [sys.executable, "-c", probe, str(directory)], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.split() == ["https://10.96.0.1:443", "set()"], done.stderr
