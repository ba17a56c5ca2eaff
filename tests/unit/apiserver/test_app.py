"""Every answer of the aggregated API is a Status a kubectl user can read: unknown paths, bugs, discovery."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from aiohttp import web

from gpustack_operator.apiserver import registration
from gpustack_operator.apiserver.registry.instancetypes import SERVED
from tests.unit.apiserver.tls_support import PKI, Server, make_pki, running_server

ADMIN = {"X-Remote-User": "admin", "X-Remote-Group": "system:masters"}


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> PKI:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _buggy(app: web.Application) -> None:
    async def boom(request: web.Request) -> web.Response:
        raise RuntimeError("secret internals")

    app.router.add_get("/apis/worker.gpustack.ai/v1/boom", boom)


@pytest_asyncio.fixture
async def server(keys: PKI) -> AsyncIterator[Server]:
    async with running_server(keys, extra_routes=_buggy) as srv:
        yield srv


@pytest.fixture
def proxy(keys: PKI) -> tuple[Path, Path]:
    return keys.client_cert(keys.proxy_ca, "front-proxy-client", stem="proxy")


async def test_discovery_lists_what_we_serve_as_the_aggregator_probe_reads_it(
    server: Server, proxy: tuple[Path, Path]
) -> None:
    async with (
        server.session(proxy) as s,
        s.get(server.url + "/apis/worker.gpustack.ai/v1", headers=ADMIN) as r,
    ):
        assert r.status == 200
        assert r.content_type == "application/json"
        body = await r.json()
    assert body == {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": "worker.gpustack.ai/v1",
        "resources": [
            {
                "name": "instancetypes",
                "singularName": "instancetype",
                "namespaced": False,
                "kind": "InstanceType",
                "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
                "shortNames": ["instype"],
                "categories": ["gpustack"],
            },
            {
                "name": "instancetypes/status",
                "singularName": "",
                "namespaced": False,
                "kind": "InstanceType",
                "verbs": ["get", "patch", "update"],
            },
            {
                "name": "instancetypes/fit",
                "singularName": "",
                "namespaced": False,
                "kind": "InstanceTypeFit",
                "verbs": ["create"],
            },
        ],
    }


@pytest.mark.parametrize(
    ("path", "code", "reason"),
    [
        pytest.param("/apis/worker.gpustack.ai/v1/nothing", 404, "NotFound", id="unknown resource"),
        pytest.param("/apis/gpustack.ai/v1", 404, "NotFound", id="group version we do not serve"),
        pytest.param("/apis/worker.gpustack.ai/v1/boom", 500, "InternalError", id="a bug"),
    ],
)
async def test_failures_are_status_objects_without_internals(
    server: Server, proxy: tuple[Path, Path], path: str, code: int, reason: str
) -> None:
    headers = {**ADMIN, "Audit-ID": "audit-1"}
    async with server.session(proxy) as s, s.get(server.url + path, headers=headers) as r:
        assert r.status == code
        assert r.headers["Audit-ID"] == "audit-1"
        body = await r.json()
    assert (body["kind"], body["status"], body["reason"], body["code"]) == ("Status", "Failure", reason, code)
    assert "secret internals" not in body["message"]
    assert "Traceback" not in body["message"]


def test_apiservice_prefers_v1_and_carries_the_ca_bundle() -> None:
    body = registration.apiservice(
        SERVED.group, SERVED.version, "gpustack-system", "gpustack-operator-worker", 443, b"PEM"
    )
    spec = body["spec"]
    assert body["metadata"]["name"] == "v1.worker.gpustack.ai"
    assert (spec["groupPriorityMinimum"], spec["versionPriority"]) == (100, 100)
    assert spec["caBundle"] == "UEVN"
    assert "insecureSkipTLSVerify" not in spec
    bare = registration.apiservice(SERVED.group, SERVED.version, "ns", "svc", 443, None)["spec"]
    assert bare["insecureSkipTLSVerify"] is True
    assert "caBundle" not in bare
