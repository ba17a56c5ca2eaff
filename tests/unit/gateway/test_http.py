"""The gateway's API refuses bad input with a message, reports every cluster's state, and a watch that
the client leaves is unsubscribed (no watcher or task left behind)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from aiohttp.test_utils import TestClient, TestServer

from gpustack_operator.gateway.events import Event, Hub
from gpustack_operator.gateway.fleet import Fleet
from gpustack_operator.gateway.options import GatewayOptions
from gpustack_operator.gateway.server import build_app
from gpustack_operator.kube.client import Client
from tests.helpers import eventually


async def unreachable(cluster: str, token: str | None) -> Client:
    raise OSError(f"no route to {cluster}")


@pytest_asyncio.fixture
async def api() -> AsyncIterator[tuple[TestClient[Any, Any], Fleet]]:
    fleet = Fleet(GatewayOptions(), Hub(), connect_to=unreachable)
    client = TestClient(TestServer(build_app(fleet)))
    await client.start_server()
    try:
        yield client, fleet
    finally:
        await fleet.close()
        await client.close()


@pytest.mark.parametrize(
    ("method", "path", "body", "message"),
    [
        pytest.param("POST", "/workers", None, "cluster is required", id="no cluster"),
        pytest.param(
            "POST",
            "/workers?cluster=a&colour=red",
            None,
            "unknown query parameter(s): colour",
            id="unknown query parameter",
        ),
        pytest.param("POST", "/workers", "{not json", "body is not JSON", id="malformed body"),
        pytest.param("POST", "/workers", "[1]", "body must be a JSON object", id="body not an object"),
        pytest.param(
            "POST", "/workers", '{"clusters": "a"}', "clusters must be a list", id="clusters not a list"
        ),
        pytest.param(
            "POST",
            "/workers",
            '{"clusters": ["a"], "tokn": "x"}',
            "unknown body field(s): tokn",
            id="unknown body field",
        ),
        pytest.param(
            "POST",
            "/workers?cluster=a&gvk=apps/v1/Deployment",
            None,
            "gvk 'apps/v1/Deployment'",
            id="a gvk the gateway does not follow",
        ),
        pytest.param(
            "POST", "/workers?cluster=a&force=maybe", None, "force must be true or false", id="bad bool"
        ),
        pytest.param("DELETE", "/workers", None, "cluster is required", id="delete without cluster"),
        pytest.param(
            "GET", "/instances?aggregated=true", None, "only for instancetypes", id="aggregated instances"
        ),
        pytest.param(
            "GET", "/instancetypes?limit=5", None, "unknown query parameter(s): limit", id="list param"
        ),
    ],
)
async def test_bad_input_is_a_400_with_a_message(
    api: tuple[TestClient[Any, Any], Fleet], method: str, path: str, body: str | None, message: str
) -> None:
    client, fleet = api
    resp = await client.request(method, path, data=body)
    assert resp.status == 400
    assert message in (await resp.json())["message"]
    assert fleet.clusters == {}, "bad input changed something"


async def test_a_dead_cluster_is_reported_in_every_answer_never_silently_missing(
    api: tuple[TestClient[Any, Any], Fleet],
) -> None:
    client, _ = api
    resp = await client.post("/workers", data=json.dumps({"clusters": ["dead"], "token": "t"}))
    assert resp.status == 200

    async def unavailable() -> dict[str, Any] | None:
        answer: dict[str, Any] = await (await client.get("/instancetypes?cluster=dead&cluster=other")).json()
        return answer if answer["clusters"][0]["state"] == "Unavailable" else None

    answer = await eventually(unavailable, timeout=10, what="the dead cluster reported")
    assert "no route to dead" in answer["clusters"][0]["message"]
    assert answer["clusters"][1]["state"] == "NotSubscribed"
    assert answer["items"] == []
    ready = await client.get("/readyz?verbose")
    assert "[!]clusters-not-synced: dead Unavailable" in await ready.text()


async def test_a_client_leaving_a_watch_leaves_no_watcher_behind(
    api: tuple[TestClient[Any, Any], Fleet],
) -> None:
    client, fleet = api
    resp = await client.get("/instances?cluster=a&watch=true")
    first = json.loads(await resp.content.readline())
    assert (first["type"], first["cluster"], first["object"]["state"]) == ("STATUS", "a", "NotSubscribed")
    fleet.hub.publish("Instance", Event(type="ADDED", cluster="a", object={"metadata": {"name": "i"}}))
    fleet.hub.publish("Instance", Event(type="ADDED", cluster="b", object={"metadata": {"name": "j"}}))
    fleet.hub.publish("Instance", Event(type="DELETED", cluster="a", object=None))
    assert json.loads(await resp.content.readline())["object"] == {"metadata": {"name": "i"}}
    assert json.loads(await resp.content.readline()) == {"type": "DELETED", "cluster": "a", "object": None}
    assert fleet.hub.watchers() == 1
    resp.close()
    await eventually(lambda: fleet.hub.watchers() == 0, timeout=5, what="the watcher unsubscribed")
