"""When a v1 InstanceType read is answered from the informer cache and when it goes to the API server.

The cache is a real kube.store.Store behind a stand-in for the informer's three attributes; an answer of
None is "ask the API server", which the proxy then does exactly as before the cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from gpustack_operator.apiserver.negotiation import Representation
from gpustack_operator.apiserver.registry import instancetypes
from gpustack_operator.apiserver.registry.generic.cachedreads import CachedReads
from gpustack_operator.kube.resources import INSTANCE_TYPES
from gpustack_operator.kube.store import Store

JSON, TABLE, PARTIAL = Representation.JSON, Representation.TABLE, Representation.PARTIAL


def instance_type(name: str, version: int, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": INSTANCE_TYPES.api_version,
        "kind": "InstanceType",
        "metadata": {"name": name, "resourceVersion": str(version), "labels": labels},
    }


@dataclass
class Informer:
    """What CachedReads reads of kube.informer.Informer."""

    resource_version: str = "100"
    synced: bool = True
    store: Store = field(default_factory=Store)

    def has_synced(self) -> bool:
        return self.synced


@pytest.fixture
def informer() -> Informer:
    cache = Informer()
    for obj in (
        instance_type("b", 90, tier="gold"),
        instance_type("a", 95),
        instance_type("c", 99, tier="x"),
    ):
        cache.store.put(obj["metadata"]["name"], obj)
    return cache


def names(doc: dict[str, Any] | None) -> list[str]:
    assert doc is not None
    return [item["metadata"]["name"] for item in doc["items"]]


def test_a_plain_list_is_the_cache_sorted_by_name_at_the_informers_version(informer: Informer) -> None:
    reads = CachedReads(INSTANCE_TYPES, informer)
    doc = reads.list({})
    assert doc is not None
    assert names(doc) == ["a", "b", "c"]
    assert doc["metadata"] == {"resourceVersion": "100"}
    assert (doc["apiVersion"], doc["kind"]) == ("worker.gpustack.ai/v1alpha1", "InstanceTypeList")
    assert (reads.served, reads.passed) == (1, 0)


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"resourceVersion": "0"}, ["a", "b", "c"]),
        ({"resourceVersion": "100"}, ["a", "b", "c"]),
        ({"resourceVersion": "42", "resourceVersionMatch": "NotOlderThan"}, ["a", "b", "c"]),
        ({"labelSelector": "tier=gold"}, ["b"]),
        ({"labelSelector": "!tier"}, ["a"]),
        ({"fieldSelector": "metadata.name!=b"}, ["a", "c"]),
        ({"limit": "3"}, ["a", "b", "c"]),
        ({"limit": "1", "labelSelector": "tier in (gold)"}, ["b"]),
        ({"limit": "500", "timeoutSeconds": "30", "allowWatchBookmarks": "true"}, ["a", "b", "c"]),
    ],
)
def test_lists_the_cache_answers_exactly(
    informer: Informer, params: dict[str, str], expected: list[str]
) -> None:
    assert names(CachedReads(INSTANCE_TYPES, informer).list(params)) == expected


@pytest.mark.parametrize(
    "params",
    [
        {"resourceVersion": "101"},  # the cache has not seen it yet
        {"resourceVersion": "101", "resourceVersionMatch": "NotOlderThan"},
        {"resourceVersion": "100", "resourceVersionMatch": "Exact"},
        {"resourceVersionMatch": "NotOlderThan"},  # kube refuses it: its 422, not our list
        {"continue": "token"},
        {"limit": "2"},  # more than the limit match: a continue token would be needed
        {"limit": "x"},
        {"labelSelector": "tier>1"},
        {"fieldSelector": "spec.os=linux"},
        {"sendInitialEvents": "true"},
        {"somethingNew": "1"},
    ],
)
def test_lists_left_to_the_api_server(informer: Informer, params: dict[str, str]) -> None:
    reads = CachedReads(INSTANCE_TYPES, informer)
    assert reads.list(params) is None
    assert (reads.served, reads.passed) == (0, 1)


def test_no_cache_an_unsynced_one_or_one_that_lost_its_version_answers_nothing(informer: Informer) -> None:
    assert CachedReads(INSTANCE_TYPES, None).list({}) is None
    informer.synced = False
    assert CachedReads(INSTANCE_TYPES, informer).list({}) is None
    informer.synced, informer.resource_version = True, ""  # after a 410, until the relist
    assert CachedReads(INSTANCE_TYPES, informer).list({}) is None


def test_a_write_through_the_proxy_sends_reads_to_the_api_until_the_cache_has_it(informer: Informer) -> None:
    reads = CachedReads(INSTANCE_TYPES, informer)
    reads.wrote(instance_type("d", 105))
    assert reads.list({}) is None
    assert reads.get("a", {}, TABLE) is None
    reads.wrote({"kind": "Status", "status": "Success"})  # no version: nothing changes
    informer.resource_version = "105"
    informer.store.put("d", instance_type("d", 105))
    assert names(reads.list({})) == ["a", "b", "c", "d"]
    reads.wrote(instance_type("a", 103))  # older than the floor: it stays
    reads.wrote({"kind": "InstanceTypeList", "metadata": {"resourceVersion": "900"}, "items": []})
    assert reads.floor == 105  # a deletecollection's list version is no InstanceType event


def test_get_answers_tables_and_metadata_from_the_cache_and_misses_from_the_api(informer: Informer) -> None:
    reads = CachedReads(INSTANCE_TYPES, informer)
    assert reads.get("b", {}, TABLE) == instance_type("b", 90, tier="gold")
    assert reads.get("b", {"resourceVersion": "0"}, PARTIAL) is not None
    assert reads.get("b", {"resourceVersion": "100"}, TABLE) is not None
    assert reads.get("new", {}, TABLE) is None  # created a moment ago: never a false 404
    assert reads.get("b", {"resourceVersion": "200"}, TABLE) is None
    assert reads.get("b", {"somethingNew": "1"}, TABLE) is None


def test_get_as_plain_json_comes_from_the_cache_only_with_its_managed_fields(informer: Informer) -> None:
    """kubectl apply --server-side reads managedFields through GET: a slimmed cached copy (no
    managedFields) sends the GET to the API server; one the informer kept whole answers it."""
    reads = CachedReads(INSTANCE_TYPES, informer)
    assert reads.get("b", {}, JSON) is None
    kept = instance_type("d", 98)
    kept["metadata"]["managedFields"] = [{"manager": "kubectl", "operation": "Apply"}]
    informer.store.put("d", kept)
    assert reads.get("d", {}, JSON) == kept
    assert reads.get("d", {"resourceVersion": "200"}, JSON) is None  # the version rules still hold


class API:
    """The CRD as the proxy's client sees it: answers every GET with what the cache holds, and counts."""

    def __init__(self, informer: Informer) -> None:
        self.informer = informer
        self.calls: list[tuple[str, str]] = []

    async def request(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        self.calls.append((method, path))
        objects = sorted(self.informer.store.list(), key=lambda o: str(o["metadata"]["name"]))
        if path.endswith("/instancetypes"):
            return {
                "apiVersion": INSTANCE_TYPES.api_version,
                "kind": "InstanceTypeList",
                "metadata": {"resourceVersion": self.informer.resource_version},
                "items": objects,
            }
        return next(o for o in objects if path.endswith("/" + o["metadata"]["name"]))


@pytest.mark.parametrize(
    ("path", "accept"),
    [
        ("", "application/json"),
        ("", "application/json;as=Table;v=v1;g=meta.k8s.io"),
        ("", "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"),
        ("/b", "application/json;as=Table;v=v1;g=meta.k8s.io"),
        ("/b", "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"),
    ],
)
async def test_the_proxy_renders_a_cached_read_as_it_renders_the_crds_answer(
    informer: Informer, path: str, accept: str
) -> None:
    api = API(informer)
    proxy = instancetypes.proxy(api, informer)  # type: ignore[arg-type]
    app = web.Application()
    proxy.add_routes(app.router)
    async with TestClient(TestServer(app)) as http:
        url = "/apis/worker.gpustack.ai/v1/instancetypes" + path
        cached = await (await http.get(url, headers={"Accept": accept})).json()
        assert api.calls == []
        proxied = await (await http.get(url + "?benchProxied=1", headers={"Accept": accept})).json()
        assert len(api.calls) == 1
    assert cached == proxied
    if accept == "application/json":
        assert [i["apiVersion"] for i in cached["items"]] == ["worker.gpustack.ai/v1"] * 3
