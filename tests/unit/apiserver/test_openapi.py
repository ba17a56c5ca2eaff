"""The OpenAPI v2 and v3 kube-apiserver aggregates and `kubectl explain`/validation read (guide §2)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest_asyncio
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from gpustack_operator.apiserver.catalog import CATALOG
from gpustack_operator.apiserver.openapi import OpenAPI, group_version_document
from gpustack_operator.apiserver.registry.instancetypes import SCHEMA, SERVED
from gpustack_operator.apiserver.status import error_middleware
from gpustack_operator.apiserver.swagger import swagger_document, swagger_schema

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


# ---- /openapi/v2: the Swagger 2.0 document the aggregator merges (guide §2.1, §2.2) ----------------

WORKER_SERVED = CATALOG.served
V2 = swagger_document(WORKER_SERVED, CATALOG.schemas)
V3_ONLY = {"anyOf", "oneOf", "not", "nullable", "writeOnly", "deprecated"}
METHODS = {"get", "put", "post", "patch", "delete"}


def _walk(node: object) -> Iterator[dict[str, object]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def _operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if method in METHODS:
                yield path, method, op


def test_v2_is_swagger_with_every_path_of_every_group_version_we_serve() -> None:
    assert V2["swagger"] == "2.0"
    paths = V2["paths"]
    for resource in WORKER_SERVED:  # each APIService keeps the paths under its own group version
        assert any(p.startswith(f"/apis/{resource.api_version}/") for p in paths), resource.plural
    base = "/apis/worker.gpustack.ai/v1/instancetypes"
    assert set(paths[base]) == {"get", "post", "delete"}
    assert set(paths[base + "/{name}"]) == {"get", "put", "patch", "delete", "parameters"}
    assert set(paths[base + "/{name}/status"]) == {"get", "put", "patch", "parameters"}
    assert set(paths["/apis/worker.gpustack.ai/v1/instancetypeflavors"]) == {"get"}


def test_v2_namespaced_settings_have_namespace_paths_and_a_cross_namespace_list() -> None:
    paths = V2["paths"]
    assert set(paths["/apis/gpustack.ai/v1/settings"]) == {"get"}  # list across namespaces only
    item = paths["/apis/gpustack.ai/v1/namespaces/{namespace}/settings/{name}"]
    assert [p["name"] for p in item["parameters"]] == ["namespace", "name"]
    assert set(item) - {"parameters"} == {"get", "put", "patch"}  # no create or delete: Settings have none
    assert item["get"]["x-kubernetes-group-version-kind"] == {
        "group": "gpustack.ai",
        "version": "v1",
        "kind": "Setting",
    }


def test_v2_patch_consumes_no_strategic_merge_and_lets_the_server_validate() -> None:
    patch = V2["paths"]["/apis/worker.gpustack.ai/v1/instancetypes/{name}"]["patch"]
    assert patch["consumes"] == [
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/apply-patch+yaml",
    ]
    names = [p["name"] for p in patch["parameters"]]
    assert {"fieldValidation", "dryRun", "fieldManager", "force", "body"} <= set(names)
    body = next(p for p in patch["parameters"] if p["in"] == "body")
    assert body["required"] is True


def test_every_v2_operation_carries_its_action_and_gvk_and_a_unique_id() -> None:
    ids = []
    for path, method, op in _operations(V2):
        assert op["x-kubernetes-action"] in {
            "get",
            "list",
            "post",
            "put",
            "patch",
            "delete",
            "deletecollection",
        }
        group, version = path.split("/")[2:4]
        assert op["x-kubernetes-group-version-kind"]["group"] == group, (path, method)
        assert op["x-kubernetes-group-version-kind"]["version"] == version, (path, method)
        assert all(r["description"] for r in op["responses"].values())  # Swagger 2.0 requires it
        ids.append(op["operationId"])
    assert len(ids) == len(set(ids))


def test_v2_definitions_carry_list_valued_gvk_and_the_crd_field_docs() -> None:
    kind = V2["definitions"][KIND]
    assert kind["x-kubernetes-group-version-kind"] == [
        {"group": "worker.gpustack.ai", "version": "v1", "kind": "InstanceType"}
    ]
    assert kind["description"] == SCHEMA["description"]
    assert kind["properties"]["spec"]["description"] == SCHEMA["properties"]["spec"]["description"]
    assert (
        V2["definitions"][KIND + "List"]["x-kubernetes-group-version-kind"][0]["kind"] == "InstanceTypeList"
    )
    setting = V2["definitions"]["ai.gpustack.v1.Setting"]["x-kubernetes-group-version-kind"]
    assert setting == [{"group": "gpustack.ai", "version": "v1", "kind": "Setting"}]
    assert not any(name.startswith("io.k8s.") for name in V2["definitions"])  # nothing the merge renames


def test_every_v2_reference_resolves_inside_the_document() -> None:
    refs = [node["$ref"] for node in _walk(V2) if "$ref" in node]
    assert refs
    for ref in refs:
        assert isinstance(ref, str)
        assert ref.startswith("#/definitions/"), ref
        assert ref.removeprefix("#/definitions/") in V2["definitions"], ref


def test_v2_schemas_hold_no_v3_only_keywords_and_quantities_stay_int_or_string() -> None:
    for node in _walk(V2["definitions"]):
        assert not (V3_ONLY & set(node)), node
    status = V2["definitions"][KIND]["properties"]["status"]["properties"]
    capacity = status["accelerator"]["properties"]["capacity"]  # a Quantity: anyOf [integer, string] in v3
    assert capacity["x-kubernetes-int-or-string"] is True
    assert "type" not in capacity  # untyped: both 4 and "4Gi" are valid
    assert capacity["description"] == "The total."


def test_a_nullable_v3_node_becomes_an_untyped_v2_node() -> None:
    v3 = {
        "type": "object",
        "properties": {
            "hint": {"type": "string", "nullable": True, "description": "may be null"},
            "tags": {"type": "array", "items": {"oneOf": [{"type": "string"}], "type": "string"}},
        },
    }
    v2 = swagger_schema(v3)
    assert v2["properties"]["hint"] == {"description": "may be null"}
    assert v2["properties"]["tags"] == {"type": "array", "items": {"type": "string"}}
    assert v3["properties"]["hint"]["nullable"] is True  # the input is left alone


def test_v2_and_v3_describe_the_same_operations() -> None:
    v3_ops = {}
    for gv in sorted({r.api_version for r in WORKER_SERVED}):
        doc = group_version_document(gv, WORKER_SERVED, CATALOG.schemas)
        v3_ops.update({(p, m): op for p, m, op in _operations(doc)})
    v2_ops = {(p, m): op for p, m, op in _operations(V2)}
    assert set(v2_ops) == set(v3_ops)
    for key, op in v2_ops.items():
        other = v3_ops[key]
        assert op["x-kubernetes-action"] == other["x-kubernetes-action"], key
        assert op["x-kubernetes-group-version-kind"] == other["x-kubernetes-group-version-kind"], key
        assert op.get("consumes", []) == list(other.get("requestBody", {}).get("content", {})), key


def test_a_resource_that_takes_only_merge_patch_advertises_only_that() -> None:
    merge_only = dataclasses.replace(SERVED, patch_types=("application/merge-patch+json",))
    v2 = swagger_document([merge_only], {"InstanceType": SCHEMA})
    v3 = group_version_document(GV, [merge_only], {"InstanceType": SCHEMA})
    path = "/apis/worker.gpustack.ai/v1/instancetypes/{name}"
    assert v2["paths"][path]["patch"]["consumes"] == ["application/merge-patch+json"]
    assert list(v3["paths"][path]["patch"]["requestBody"]["content"]) == ["application/merge-patch+json"]


@pytest_asyncio.fixture
async def served_v2() -> AsyncIterator[TestClient]:
    app = web.Application(middlewares=[error_middleware])
    OpenAPI.for_resources(WORKER_SERVED, CATALOG.schemas).add_routes(app.router)
    test_client = TestClient(TestServer(app))
    await test_client.start_server()
    yield test_client
    await test_client.close()


async def test_v2_is_served_as_the_aggregator_asks_and_revalidates_with_a_304(served_v2: TestClient) -> None:
    first = await served_v2.get("/openapi/v2", headers={"Accept": "application/json"})
    assert first.status == 200
    assert first.content_type == "application/json"
    assert await first.json() == V2
    etag = first.headers["Etag"]
    again = await served_v2.get("/openapi/v2", headers={"Accept": "application/json", "If-None-Match": etag})
    assert again.status == 304
    assert again.headers["Etag"] == etag
    assert await again.read() == b""
    stale = await served_v2.get("/openapi/v2", headers={"If-None-Match": '"OLD"'})
    assert stale.status == 200
    assert stale.headers["Etag"] == etag


async def test_v2_answers_json_when_json_is_acceptable_and_406_when_only_protobuf_is(
    served_v2: TestClient,
) -> None:
    protobuf = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
    both = await served_v2.get("/openapi/v2", headers={"Accept": f"{protobuf}, application/json"})
    assert both.status == 200
    assert (await both.json())["swagger"] == "2.0"
    only = await served_v2.get("/openapi/v2", headers={"Accept": protobuf})
    assert only.status == 406
    assert (await only.json())["reason"] == "NotAcceptable"


async def test_without_a_swagger_document_v2_is_not_served(client: TestClient) -> None:
    assert (await client.get("/openapi/v2")).status == 404
