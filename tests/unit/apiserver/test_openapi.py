"""The OpenAPI v3 kube-apiserver aggregates and `kubectl explain`/validation read (guide §2.3, §2.4)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from gpustack_operator.apiserver.openapi import OpenAPI, group_version_document
from gpustack_operator.apiserver.registry.instancetypes import SCHEMA, SERVED

GV = "worker.gpustack.ai/v1"
KIND = "ai.gpustack.worker.v1.InstanceType"
DOC = group_version_document(GV, [SERVED], {"InstanceType": SCHEMA})


def test_kind_schema_is_the_crds_with_a_list_valued_gvk() -> None:
    kind = DOC["components"]["schemas"][KIND]
    assert kind["x-kubernetes-group-version-kind"] == [
        {"group": "worker.gpustack.ai", "version": "v1", "kind": "InstanceType"}
    ]
    assert kind["properties"]["spec"] == SCHEMA["properties"]["spec"]
    assert DOC["components"]["schemas"][KIND + "List"]["x-kubernetes-group-version-kind"][0]["kind"] == (
        "InstanceTypeList"
    )


def test_patch_operation_lets_the_server_validate_and_does_not_offer_strategic_merge() -> None:
    patch = DOC["paths"]["/apis/worker.gpustack.ai/v1/instancetypes/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {
        "group": "worker.gpustack.ai",
        "version": "v1",
        "kind": "InstanceType",
    }
    assert "fieldValidation" in [p["name"] for p in patch["parameters"]]
    assert set(patch["requestBody"]["content"]) == {
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/apply-patch+yaml",
    }
    status = DOC["paths"]["/apis/worker.gpustack.ai/v1/instancetypes/{name}/status"]
    assert set(status) == {"get", "put", "patch", "parameters"}


def test_every_reference_resolves_inside_the_document() -> None:
    text = str(DOC)
    refs = {part.split("'")[0] for part in text.split("#/components/schemas/")[1:]}
    assert refs <= set(DOC["components"]["schemas"])


@pytest_asyncio.fixture
async def client() -> AsyncIterator[TestClient]:
    app = web.Application()
    OpenAPI({GV: DOC}).add_routes(app.router)
    test_client = TestClient(TestServer(app))
    await test_client.start_server()
    yield test_client
    await test_client.close()


async def test_root_lists_only_our_group_version_and_its_hash_serves_immutably(client: TestClient) -> None:
    root = await (await client.get("/openapi/v3")).json()
    assert list(root["paths"]) == ["apis/worker.gpustack.ai/v1"]
    url = root["paths"]["apis/worker.gpustack.ai/v1"]["serverRelativeURL"]
    fresh = await client.get(url)
    assert fresh.status == 200
    assert fresh.headers["Cache-Control"] == "public, immutable"
    assert (await fresh.json())["paths"]
    again = await client.get(url, headers={"If-None-Match": fresh.headers["Etag"]})
    assert again.status == 304


async def test_a_stale_hash_gets_the_current_document_never_a_redirect(client: TestClient) -> None:
    resp = await client.get("/openapi/v3/apis/worker.gpustack.ai/v1?hash=OLD", allow_redirects=False)
    assert resp.status == 200
    assert "Cache-Control" not in resp.headers
