"""The Instance's `log`, `events` and `metrics` subresources: which parameters reach `pods/log`, which
Events are the Instance's and in what order, what the metrics answer holds, what an Instance without a Pod
answers, and how discovery and both OpenAPI documents describe them.

The metrics answer is also read through the real handler over the client's HTTP seam (a cluster with
metrics.k8s.io, which the sandbox does not serve); the other paths are proven through kube-apiserver in
tests/integration/test_worker_instance_subresources.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from gpustack_operator.apiserver.discovery import resource_list
from gpustack_operator.apiserver.openapi import group_version_document
from gpustack_operator.apiserver.registry import instances
from gpustack_operator.apiserver.registry.instanceevents import about_instance, last_seen
from gpustack_operator.apiserver.registry.instancelog import log_params
from gpustack_operator.apiserver.registry.instancemetrics import instance_metrics
from gpustack_operator.apiserver.registry.instancepod import no_pod
from gpustack_operator.apiserver.status import error_middleware
from gpustack_operator.apiserver.swagger import swagger_document
from gpustack_operator.kube.client import Client
from gpustack_operator.runtime import Backoff
from tests.unit.kube.fakes import RecordingClock
from tests.unit.kube.test_client_transport import FakeResponse, ScriptedHttp

GV = "worker.gpustack.ai/v1"
STORED = "worker.gpustack.ai/v1alpha1"
ITEM = "/apis/worker.gpustack.ai/v1/namespaces/{namespace}/instances/{name}"
INSTANCE: dict[str, Any] = {
    "apiVersion": "worker.gpustack.ai/v1alpha1",
    "kind": "Instance",
    "metadata": {
        "name": "nb",
        "namespace": "team",
        "uid": "inst-2",
        "creationTimestamp": "2026-12-01T10:00:00Z",
    },
    "status": {
        "phase": "Running",
        "nodeName": "h100-0",
        "allocations": [
            {"id": "nvidia-0", "manufacturer": "nvidia", "accelerators": [{"id": "GPU-a", "mode": 1}]}
        ],
    },
}


def test_log_reads_main_unless_told_and_passes_kubectl_logs_parameters_only() -> None:
    assert log_params({}) == {"container": "main"}
    assert log_params({"container": ""}) == {"container": "main"}
    query = {"container": "sshd", "follow": "true", "tailLines": "5", "timestamps": "1", "pretty": "x"}
    assert log_params(query) == {"container": "sshd", "follow": "true", "tailLines": "5", "timestamps": "1"}
    every = {"sinceSeconds": "9", "sinceTime": "t", "limitBytes": "10", "previous": "true"}
    assert log_params(every) == {**every, "container": "main"}


def _event(
    name: str, kind: str, when: str, *, api_version: str = "v1", uid: str = "", obj: str = "nb"
) -> dict[str, Any]:
    involved = {"kind": kind, "name": obj, "namespace": "team", "apiVersion": api_version}
    if uid:
        involved["uid"] = uid
    return {"metadata": {"name": name}, "involvedObject": involved, "lastTimestamp": when}


def test_events_are_the_instances_its_pods_and_its_services_oldest_first() -> None:
    events = [
        _event("pod-late", "Pod", "2026-12-01T10:05:00Z"),
        _event("inst", "Instance", "2026-12-01T10:01:00Z", api_version=STORED, uid="inst-2"),
        _event("svc", "Service", "2026-12-01T10:03:00Z"),
        _event("pod-early", "Pod", "2026-12-01T10:02:00Z"),
        # an earlier Instance of the same name, and its Pod before this Instance was created
        _event("old-inst", "Instance", "2026-12-01T09:01:00Z", api_version=STORED, uid="inst-1"),
        _event("old-pod", "Pod", "2026-12-01T09:02:00Z"),
        # other kinds and other objects of the same name are not the Instance's
        _event("pvc", "PersistentVolumeClaim", "2026-12-01T10:04:00Z"),
        _event("deploy", "Deployment", "2026-12-01T10:04:00Z", api_version="apps/v1"),
        _event("other", "Pod", "2026-12-01T10:04:00Z", obj="nb-2"),
    ]  # fmt: skip
    kept = [e["metadata"]["name"] for e in about_instance(events, INSTANCE)]
    assert kept == ["inst", "pod-early", "svc", "pod-late"]


def test_an_event_is_placed_by_when_it_last_happened() -> None:
    series = {
        "eventTime": "2026-12-01T10:00:00.500000Z",
        "series": {"lastObservedTime": "2026-12-01T11:00:00.1Z"},
    }
    assert last_seen(series).hour == 11
    assert last_seen({"eventTime": "2026-12-01T10:00:00.500000Z"}).microsecond == 500000
    assert last_seen({"firstTimestamp": "2026-12-01T10:00:00Z"}).minute == 0
    assert last_seen({}) < last_seen({"metadata": {"creationTimestamp": "2026-12-01T10:00:00Z"}})
    a_new_style_event = {"metadata": {"name": "e"}, "eventTime": "2026-12-01T10:00:00.000001Z"}
    a_new_style_event["involvedObject"] = {"kind": "Pod", "name": "nb", "apiVersion": "v1"}
    assert about_instance([a_new_style_event], INSTANCE) == [a_new_style_event]  # same second, later


def test_an_instance_without_a_pod_says_why_from_its_status() -> None:
    stopped = {**INSTANCE, "status": {"phase": "Pending", "phaseMessage": "waiting for admission in queue q"}}
    err = no_pod(stopped)
    assert (err.code, err.reason) == (409, "Conflict")
    assert err.message == 'Instance "nb" has no Pod: it is Pending (waiting for admission in queue q)'
    assert (
        no_pod({"metadata": {"name": "new"}}).message == 'Instance "new" has no Pod: it is not yet reconciled'
    )


POD_METRICS = {
    "kind": "PodMetrics",
    "apiVersion": "metrics.k8s.io/v1beta1",
    "metadata": {"name": "nb", "namespace": "team"},
    "timestamp": "2026-12-01T10:10:00Z",
    "window": "15.01s",
    "containers": [
        {"name": "main", "usage": {"cpu": "250m", "memory": "1Gi"}},
        {"name": "sshd", "usage": {"cpu": "1m", "memory": "3Mi"}},
    ],
}


def test_metrics_join_the_pods_usage_with_the_cards_the_instance_holds() -> None:
    doc = instance_metrics(INSTANCE, POD_METRICS)
    assert (doc["apiVersion"], doc["kind"]) == (GV, "InstanceMetrics")
    assert doc["metadata"] == {"name": "nb", "namespace": "team"}
    assert (doc["timestamp"], doc["window"], doc["nodeName"]) == ("2026-12-01T10:10:00Z", "15.01s", "h100-0")
    assert doc["containers"][0] == {"name": "main", "usage": {"cpu": "250m", "memory": "1Gi"}}
    assert doc["allocations"] == INSTANCE["status"]["allocations"]


POD = {
    "metadata": {
        "name": "nb",
        "namespace": "team",
        "ownerReferences": [{"uid": "inst-2", "controller": True}],
    }
}


@pytest_asyncio.fixture
async def served() -> AsyncIterator[tuple[TestClient[Any, Any], ScriptedHttp]]:
    http = ScriptedHttp()
    app = web.Application(middlewares=[error_middleware])
    kube = Client(http, 0, backoff=Backoff(base=0, cap=0), clock=RecordingClock())
    instances.InstanceRoutes(kube).add_routes(app.router)
    async with TestClient(TestServer(app)) as client:
        yield client, http


async def test_the_metrics_handler_reads_the_instance_its_pod_and_the_pods_metrics(
    served: tuple[TestClient[Any, Any], ScriptedHttp],
) -> None:
    client, http = served
    http.answers.extend([FakeResponse(200, INSTANCE), FakeResponse(200, POD), FakeResponse(200, POD_METRICS)])
    resp = await client.get(ITEM.format(namespace="team", name="nb") + "/metrics")
    assert resp.status == 200
    assert (await resp.json())["containers"][1]["usage"]["memory"] == "3Mi"
    assert [path for _, path, _ in http.calls] == [
        "/apis/worker.gpustack.ai/v1alpha1/namespaces/team/instances/nb",
        "/api/v1/namespaces/team/pods/nb",
        "/apis/metrics.k8s.io/v1beta1/namespaces/team/pods/nb",
    ]


async def test_a_pod_of_the_name_that_the_instance_does_not_control_is_not_its_pod(
    served: tuple[TestClient[Any, Any], ScriptedHttp],
) -> None:
    client, http = served
    stranger = {
        "metadata": {
            "name": "nb",
            "namespace": "team",
            "ownerReferences": [{"uid": "inst-1", "controller": True}],
        }
    }
    http.answers.extend([FakeResponse(200, INSTANCE), FakeResponse(200, stranger)])
    resp = await client.get(ITEM.format(namespace="team", name="nb") + "/log")
    assert resp.status == 409
    assert (await resp.json())["message"] == 'Instance "nb" has no Pod: it is Running'


def test_discovery_lists_the_subresources_with_get() -> None:
    entries = {e["name"]: e for e in resource_list(GV, [instances.SERVED])["resources"]}
    for sub in ("log", "events", "metrics", "status"):
        assert entries[f"instances/{sub}"]["namespaced"] is True
    assert entries["instances/log"]["verbs"] == ["get"]
    assert entries["instances/status"]["verbs"] == ["get", "patch", "update"]


def test_openapi_describes_each_subresources_answer_and_parameters() -> None:
    v3 = group_version_document(GV, [instances.SERVED], {"Instance": instances.SCHEMA})["paths"]
    log = v3[ITEM + "/log"]["get"]
    assert log["responses"]["200"]["content"] == {
        "text/plain": {"schema": {"type": "string", "description": "The container's log lines."}}
    }
    types = {p["name"]: p["schema"]["type"] for p in log["parameters"]}
    assert types["follow"] == "boolean"
    assert types["tailLines"] == "integer"
    assert types["container"] == "string"
    assert log["operationId"] == "readWorkerGpustackAiV1NamespacedInstanceLog"
    events = v3[ITEM + "/events"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert events["description"] == "A core/v1 EventList."
    swagger = swagger_document([instances.SERVED], {"Instance": instances.SCHEMA})["paths"]
    assert swagger[ITEM + "/log"]["get"]["produces"] == ["text/plain"]
    metrics = swagger[ITEM + "/metrics"]["get"]["responses"]["200"]["schema"]
    assert "allocations" in metrics["properties"]
