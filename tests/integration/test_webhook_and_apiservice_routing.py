"""kube-apiserver reaches processes on 127.0.0.1 through ExternalName Services: the route our own webhooks
and aggregated API take. A small TLS server plays both roles here; its mutating hook answers through
apiserver.webhooks.review, so kube-apiserver applies the JSON patches our webhooks send (jsonpatch's: list
indices and `move` ops)."""

from __future__ import annotations

import base64
import copy
import json
import ssl
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web

from gpustack_operator.apiserver.webhooks.review import Verdict, answer, parse
from gpustack_operator.certs import pki
from gpustack_operator.kube import errors, resources
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.conditions import is_true
from gpustack_operator.sandbox.cluster import Sandbox
from gpustack_operator.sandbox.process import free_port
from tests.helpers import eventually

GROUP, VERSION = "sandbox-test.gpustack.ai", "v1alpha1"


@dataclass
class HookServer:
    port: int
    ca_pem: bytes
    seen_users: list[str] = field(default_factory=list)
    seen_client_cns: list[str] = field(default_factory=list)
    patches: list[list[dict[str, Any]]] = field(default_factory=list)


def _review_response(review: dict[str, Any]) -> dict[str, Any]:
    req = review["request"]
    labels = (req.get("object") or {}).get("metadata", {}).get("labels") or {}
    response: dict[str, Any] = {"uid": req["uid"], "allowed": labels.get("deny") != "true"}
    if not response["allowed"]:
        response["status"] = {"code": 403, "message": "denied by the sandbox test webhook: label deny=true"}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def _mutated(obj: dict[str, Any]) -> dict[str, Any]:
    """A label and a data key renamed with their values kept (jsonpatch moves them), a finalizer put first
    and the last one dropped (list indices)."""
    new = copy.deepcopy(obj)
    labels, data = new["metadata"]["labels"], new["data"]
    labels["to"] = labels.pop("from")
    data["new"] = data.pop("old")
    new["metadata"]["finalizers"] = ["example.com/a", *new["metadata"]["finalizers"][:-1]]
    return new


@pytest_asyncio.fixture(loop_scope="session")
async def server(sandbox: Sandbox, namespace: str) -> AsyncIterator[HookServer]:
    ca = pki.new_ca("sandbox-test-ca")
    leaf = pki.issue(ca, "test-hooks", hosts=pki.service_hosts("test-hooks", namespace), server=True)
    tls_dir = sandbox.run_dir / f"test-hooks-{namespace}"
    crt, key = leaf.write(tls_dir, "tls")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(str(crt), str(key))
    ctx.load_verify_locations(cafile=str(sandbox.certs.front_proxy_ca_crt))
    ctx.verify_mode = ssl.CERT_OPTIONAL
    state = HookServer(port=free_port(), ca_pem=ca.cert_pem)

    async def validate(request: web.Request) -> web.Response:
        return web.json_response(_review_response(await request.json()))

    async def mutate(request: web.Request) -> web.Response:
        review = parse(await request.read())
        mutated = _mutated(review.object or {})
        response = answer(review, Verdict.allow(mutated))
        state.patches.append(json.loads(base64.b64decode(response["response"]["patch"])))
        return web.json_response(response)

    async def discovery(request: web.Request) -> web.Response:
        return web.json_response(
            {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": f"{GROUP}/{VERSION}",
                "resources": [
                    {
                        "name": "widgets",
                        "singularName": "widget",
                        "namespaced": False,
                        "kind": "Widget",
                        "verbs": ["get", "list"],
                    }
                ],
            }
        )

    async def widgets(request: web.Request) -> web.Response:
        user = request.headers.get("X-Remote-User", "")
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        cn = dict(x[0] for x in peer["subject"]).get("commonName", "") if peer else ""
        state.seen_users.append(user)
        state.seen_client_cns.append(cn)
        return web.json_response(
            {
                "kind": "WidgetList",
                "apiVersion": f"{GROUP}/{VERSION}",
                "metadata": {},
                "items": [{"metadata": {"name": f"seen-by-{user}"}}],
            }
        )

    app = web.Application()
    app.router.add_post("/validate", validate)
    app.router.add_post("/mutate", mutate)
    app.router.add_get(f"/apis/{GROUP}/{VERSION}", discovery)
    app.router.add_get(f"/apis/{GROUP}/{VERSION}/widgets", widgets)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", state.port, ssl_context=ctx).start()
    try:
        yield state
    finally:
        await runner.cleanup()


@pytest_asyncio.fixture(loop_scope="session")
async def routed(kube: Client, namespace: str, server: HookServer) -> AsyncIterator[HookServer]:
    """ExternalName Service, webhook configuration and APIService pointing at the test server."""
    suffix = uuid.uuid4().hex[:6]
    hook_name, apiservice_name = f"sandbox-test-{suffix}", f"{VERSION}.{GROUP}"
    ca_bundle = base64.b64encode(server.ca_pem).decode()
    service = {"name": "test-hooks", "namespace": namespace, "port": server.port}
    await kube.create(
        resources.SERVICES,
        {
            "metadata": {"name": "test-hooks", "namespace": namespace},
            "spec": {"type": "ExternalName", "externalName": "localhost"},
        },
    )
    await kube.create(
        resources.VALIDATING_WEBHOOKS,
        {
            "metadata": {"name": hook_name},
            "webhooks": [
                {
                    "name": "deny.sandbox-test.gpustack.ai",
                    "admissionReviewVersions": ["v1"],
                    "sideEffects": "None",
                    "failurePolicy": "Fail",
                    "timeoutSeconds": 10,
                    "clientConfig": {"service": dict(service, path="/validate"), "caBundle": ca_bundle},
                    "rules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE"],
                            "resources": ["configmaps"],
                        }
                    ],
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                }
            ],
        },
    )
    await kube.create(
        resources.APISERVICES,
        {
            "metadata": {"name": apiservice_name},
            "spec": {
                "group": GROUP,
                "version": VERSION,
                "service": service,
                "caBundle": ca_bundle,
                "groupPriorityMinimum": 1000,
                "versionPriority": 15,
            },
        },
    )
    try:
        yield server
    finally:
        await kube.delete(resources.APISERVICES, apiservice_name)
        await kube.delete(resources.VALIDATING_WEBHOOKS, hook_name)


async def test_apiserver_calls_admission_webhook_on_localhost(
    kube: Client, namespace: str, routed: HookServer
) -> None:
    await kube.create(resources.CONFIGMAPS, {"metadata": {"name": "allowed", "namespace": namespace}})
    with pytest.raises(errors.KubeError) as refused:
        await kube.create(
            resources.CONFIGMAPS,
            {"metadata": {"name": "refused", "namespace": namespace, "labels": {"deny": "true"}}},
        )
    assert "denied by the sandbox test webhook" in str(refused.value)
    assert await kube.get_or_none(resources.CONFIGMAPS, "refused", namespace) is None


async def test_apiserver_proxies_apiservice_with_front_proxy_identity(
    kube: Client, routed: HookServer
) -> None:
    async def available() -> bool:
        return is_true(await kube.get(resources.APISERVICES, f"{VERSION}.{GROUP}"), "Available")

    await eventually(available, timeout=60, what="APIService Available")
    listing = await eventually(
        lambda: kube.request("GET", f"/apis/{GROUP}/{VERSION}/widgets"), timeout=30, what="proxied list"
    )
    assert listing["items"][0]["metadata"]["name"] == "seen-by-kubernetes-admin"
    assert routed.seen_client_cns[-1] == "front-proxy-client"


async def test_apiserver_applies_the_json_patch_our_webhooks_answer(
    kube: Client, namespace: str, routed: HookServer
) -> None:
    hook_name = f"sandbox-test-mutate-{uuid.uuid4().hex[:6]}"
    service = {"name": "test-hooks", "namespace": namespace, "port": routed.port, "path": "/mutate"}
    selector = {"matchLabels": {"patch-test": "true"}}
    hook = {
        "name": "mutate.sandbox-test.gpustack.ai",
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": "Fail",
        "timeoutSeconds": 10,
        "clientConfig": {"service": service, "caBundle": base64.b64encode(routed.ca_pem).decode()},
        "rules": [
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}
        ],
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "objectSelector": selector,
    }
    await kube.create(resources.MUTATING_WEBHOOKS, {"metadata": {"name": hook_name}, "webhooks": [hook]})
    config_map = {
        "metadata": {
            "name": "patched",
            "labels": {"patch-test": "true", "from": "moved"},
            "finalizers": ["example.com/b", "example.com/c"],
        },
        "data": {"keep": "1", "old": "value"},
    }
    path = resources.CONFIGMAPS.path(None, namespace)
    try:
        # A dry run: the webhook is called and the answer is the object as stored, without the finalizers
        # staying behind. The configuration reaches kube-apiserver's webhook cache within a moment.
        created = await eventually(
            lambda: _created_by_hook(kube, path, config_map), timeout=30, what="the mutating hook called"
        )
    finally:
        await kube.delete(resources.MUTATING_WEBHOOKS, hook_name)
    assert created["metadata"]["labels"] == {"patch-test": "true", "to": "moved"}
    assert created["metadata"]["finalizers"] == ["example.com/a", "example.com/b"]
    assert created["data"] == {"keep": "1", "new": "value"}
    patch = routed.patches[-1]
    assert {"op": "move", "from": "/metadata/labels/from", "path": "/metadata/labels/to"} in patch
    assert {"op": "move", "from": "/data/old", "path": "/data/new"} in patch
    assert any(op["path"].startswith("/metadata/finalizers/") for op in patch), patch


async def _created_by_hook(kube: Client, path: str, config_map: dict[str, Any]) -> dict[str, Any] | None:
    created = await kube.request("POST", path, body=config_map, params={"dryRun": "All"})
    return created if "to" in created["metadata"].get("labels", {}) else None
