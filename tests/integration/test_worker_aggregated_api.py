"""`kubectl get instancetype.v1.worker.gpustack.ai` through the real kube-apiserver and the real kubectl.

One real `gpustack-operator worker` serves the aggregated API on 127.0.0.1; Prepare registers the
APIService behind an ExternalName Service, and its controllers start once kube-apiserver reports it
Available. Each test is a row of the aggregated-API guide's §7 checklist (row number in the test name).

Named `test_worker_*` to run with the other tests that start a real worker, after the chain tests: a
worker derives the inventory's pools (flavors, queues, types), and those outlive it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import ssl
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpustack_operator.kube import resources
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import INSTANCE_TYPES, Resource
from gpustack_operator.rules.cards import Mode
from gpustack_operator.sandbox.cluster import Sandbox
from tests.helpers import consistently, eventually
from tests.integration.test_device_plugin import cards_of, gpu_pod, ledger, remove_pods, running
from tests.integration.worker_support import APISERVICE, Kubectl, Served, cpu_type, serving_worker

CLUSTER_ROLES = Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False)
CLUSTER_ROLE_BINDINGS = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False
)


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def served(
    sandbox: Sandbox, kube: Client, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Served]:
    """A worker serving the aggregated API; its APIService is removed afterwards."""
    async with serving_worker(sandbox, kube, tmp_path_factory.mktemp("aggregated-api"), "api-0") as served:
        yield served


@pytest_asyncio.fixture(loop_scope="session")
async def instance_type(kube: Client, served: Served) -> AsyncIterator[str]:
    """A CPU-only InstanceType created through the CRD (v1alpha1), settled by the worker's controllers."""
    name = f"agg-{uuid.uuid4().hex[:6]}"
    spec = {
        "acceleratable": False,
        "generalGroup": "generic",
        "os": "linux",
        "arch": "amd64",
        "unitResources": {"cpu": "1", "ram": "2Gi"},
        "localStorage": "100Gi",
    }
    await kube.create(
        INSTANCE_TYPES,
        {
            "apiVersion": INSTANCE_TYPES.api_version,
            "kind": "InstanceType",
            "metadata": {"name": name},
            "spec": spec,
        },
    )

    async def settled() -> bool:
        status = (await kube.get(INSTANCE_TYPES, name)).get("status") or {}
        return bool(status.get("entrance") and status.get("phase"))

    await eventually(settled, timeout=60, what=f"InstanceType {name} status written by the controllers")
    try:
        yield name
    finally:
        await kube.delete(INSTANCE_TYPES, name)


async def test_row01_apiservice_is_available_and_passed(kubectl: Kubectl, served: Served) -> None:
    out = await kubectl.ok(
        "get",
        "apiservice",
        APISERVICE,
        "-o",
        'jsonpath={.status.conditions[?(@.type=="Available")].status} '
        '{.status.conditions[?(@.type=="Available")].reason}',
    )
    assert out.split() == ["True", "Passed"]
    log = served.worker.log.read_text(errors="replace")  # contract §3: controllers only once Available
    assert log.index("APIServices Available") < log.index("starting the manager")
    spec = json.loads(await kubectl.ok("get", "apiservice", APISERVICE, "-o", "json"))["spec"]
    assert spec["versionPriority"] >= 100
    assert spec["groupPriorityMinimum"] == 100
    assert spec["caBundle"]


async def test_row02_discovery_through_the_aggregator(kubectl: Kubectl, served: Served) -> None:
    doc = json.loads(await kubectl.ok("get", "--raw", "/apis/worker.gpustack.ai/v1"))
    assert doc["kind"] == "APIResourceList"
    by_name = {r["name"]: r for r in doc["resources"]}
    assert by_name["instancetypes"]["shortNames"] == ["instype"]
    assert by_name["instancetypes/status"]["verbs"] == ["get", "patch", "update"]


async def test_row03_v1_is_the_preferred_version(kubectl: Kubectl, served: Served) -> None:
    groups = json.loads(await kubectl.ok("get", "--raw", "/apis"))["groups"]
    group = next(g for g in groups if g["name"] == "worker.gpustack.ai")
    assert group["preferredVersion"]["version"] == "v1"
    assert [v["version"] for v in group["versions"]] == ["v1", "v1alpha1"]


async def test_row05_kubectl_get_shows_the_contract_columns(kubectl: Kubectl, instance_type: str) -> None:
    for args in (("instancetypes",), ("instype",), ("instancetype.v1.worker.gpustack.ai",)):
        out = await kubectl.ok("get", *args, instance_type)
        header, row = out.splitlines()
        assert header.split() == [
            "NAME",
            "ENTRANCE",
            "ACCEL.(EXCLUSIVE)",
            "ACCEL.(SHARED)",
            "ACCEL.(SLICED)",
            "CPU",
            "PRODUCT",
            "MEMORY",
            "PHASE",
        ]
        cells = row.split()
        assert cells[0] == instance_type
        assert cells[1].startswith("gpustack-fnv64-")
        assert "/" in cells[5]  # onceMaxRequest/remaining of the CPU view


async def test_row06_age_only_in_wide_and_labels_shown(
    kubectl: Kubectl, kube: Client, instance_type: str
) -> None:
    wide = await kubectl.ok("get", "instype", instance_type, "-o", "wide")
    assert wide.splitlines()[0].split()[-1] == "AGE"
    await kube.patch(INSTANCE_TYPES, instance_type, {"metadata": {"labels": {"tier": "gold"}}})
    labelled = await kubectl.ok("get", "instype", instance_type, "--show-labels")
    assert "tier=gold" in labelled
    sorted_out = await kubectl.ok("get", "instype", "--sort-by=.metadata.name", "-o", "name")
    assert f"instancetype.worker.gpustack.ai/{instance_type}" in sorted_out.split()


async def test_row09_yaml_and_json_show_the_served_version(kubectl: Kubectl, instance_type: str) -> None:
    listed = json.loads(await kubectl.ok("get", "instancetypes", "-o", "json"))
    assert listed["items"]
    assert {i["apiVersion"] for i in listed["items"]} == {"worker.gpustack.ai/v1"}
    raw = json.loads(await kubectl.ok("get", "--raw", "/apis/worker.gpustack.ai/v1/instancetypes"))
    assert (raw["apiVersion"], raw["kind"]) == ("worker.gpustack.ai/v1", "InstanceTypeList")
    assert raw["metadata"]["resourceVersion"]  # what informers and `get -w` resume from
    one = await kubectl.ok("get", "instype", instance_type, "-o", "yaml")
    assert "apiVersion: worker.gpustack.ai/v1\n" in one
    assert "selfLink" not in one


async def test_row11_selectors_pass_through(kubectl: Kubectl, instance_type: str) -> None:
    out = await kubectl.ok(
        "get", "instype", "--field-selector", f"metadata.name={instance_type}", "-o", "name"
    )
    assert out.split() == [f"instancetype.worker.gpustack.ai/{instance_type}"]
    rc, _, err = await kubectl.run("get", "instype", "--field-selector", "spec.foo=x")
    assert rc != 0
    assert "not a known field selector" in err or "field label not supported" in err


async def test_row19_patch_types_strategic_is_415(kubectl: Kubectl, kube: Client, instance_type: str) -> None:
    rc, _, err = await kubectl.run("patch", "instype", instance_type, "-p", '{"spec":{"displayName":"x"}}')
    assert rc != 0
    assert "strategic-merge-patch+json is not supported" in err or "UnsupportedMediaType" in err
    await kubectl.ok(
        "patch", "instype", instance_type, "--type=merge", "-p", '{"spec":{"displayName":"Merged"}}'
    )
    await kubectl.ok(
        "patch",
        "instype",
        instance_type,
        "--type=json",
        "-p",
        '[{"op":"test","path":"/spec/displayName","value":"Merged"},'
        '{"op":"replace","path":"/spec/description","value":"by json patch"}]',
    )
    stored = await kube.get(INSTANCE_TYPES, instance_type)
    assert (stored["spec"]["displayName"], stored["spec"]["description"]) == ("Merged", "by json patch")


async def test_row15_21_create_in_v1_delete_and_wait(kubectl: Kubectl, kube: Client, served: Served) -> None:
    name = f"agg-new-{uuid.uuid4().hex[:6]}"
    manifest = json.dumps(cpu_type(name))
    await kubectl.ok("create", "-f", "-", "--dry-run=server", stdin=manifest)
    assert await kube.get_or_none(INSTANCE_TYPES, name) is None
    await kubectl.ok("create", "-f", "-", stdin=manifest)
    assert (await kube.get(INSTANCE_TYPES, name))["apiVersion"] == "worker.gpustack.ai/v1alpha1"
    rc, _, err = await kubectl.run("create", "-f", "-", stdin=manifest)
    assert rc != 0
    assert "Error from server (AlreadyExists)" in err, err
    out = await kubectl.ok("delete", "instype", name, "--timeout=60s")
    assert "deleted" in out
    assert await kube.get_or_none(INSTANCE_TYPES, name) is None


async def test_row24_forged_headers_straight_to_our_port_are_401(served: Served) -> None:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    port = served.port
    headers = {"X-Remote-User": "admin", "X-Remote-Group": "system:masters"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as session:
        for path in ("/apis/worker.gpustack.ai/v1", "/apis/worker.gpustack.ai/v1/instancetypes"):
            async with session.get(f"https://127.0.0.1:{port}{path}", headers=headers) as resp:
                assert resp.status == 401
                assert (await resp.json())["reason"] == "Unauthorized"


@contextlib.asynccontextmanager
async def reader_role(
    kube: Client, user: str, resources: tuple[str, ...] = ("instancetypes",)
) -> AsyncIterator[None]:
    """`user` may get and list `resources` of worker.gpustack.ai (a subresource as `<plural>/<sub>`)."""
    name = f"agg-reader-{uuid.uuid4().hex[:6]}"
    rules = [{"apiGroups": ["worker.gpustack.ai"], "resources": list(resources), "verbs": ["get", "list"]}]
    await kube.create(CLUSTER_ROLES, {"metadata": {"name": name}, "rules": rules})
    await kube.create(
        CLUSTER_ROLE_BINDINGS,
        {
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        },
    )
    try:
        yield
    finally:
        await kube.delete(CLUSTER_ROLE_BINDINGS, name)
        await kube.delete(CLUSTER_ROLES, name)


async def test_row23_rbac_through_kubectl(kubectl: Kubectl, kube: Client, instance_type: str) -> None:
    rc, _, err = await kubectl.run("get", "instancetypes", "--as=alice")
    assert rc != 0
    assert (
        'instancetypes.worker.gpustack.ai is forbidden: User "alice" cannot list resource "instancetypes" '
        'in API group "worker.gpustack.ai" at the cluster scope'
    ) in err
    async with reader_role(kube, "bob"):  # allowed by kube-apiserver, then by our SubjectAccessReview
        out = await eventually(_bob_reads(kubectl, instance_type), timeout=30, what="bob's RBAC in effect")
        assert out[1].split() == [f"instancetype.worker.gpustack.ai/{instance_type}"]


def _bob_reads(kubectl: Kubectl, name: str) -> Any:
    async def attempt() -> tuple[int, str, str] | None:
        result = await kubectl.run("get", "instype", name, "--as=bob", "-o", "name")
        return result if result[0] == 0 else None

    return attempt


async def test_row08_watch_shows_a_change_once(kubectl: Kubectl, kube: Client, instance_type: str) -> None:
    with kubectl.discovery() as cache:
        proc = await asyncio.create_subprocess_exec(
            *kubectl.command(
                cache, "get", "instancetypes", instance_type, "-w", "--output-watch-events", "-L", "mark"
            ),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=kubectl.env,
        )
        lines: list[str] = []

        async def read() -> None:
            assert proc.stdout is not None
            async for raw in proc.stdout:
                lines.append(raw.decode().rstrip())

        reader = asyncio.create_task(read())
        try:
            await eventually(
                lambda: _async(any(instance_type in line for line in lines)),
                timeout=30,
                what="the watch's first row",
            )
            await kube.patch(INSTANCE_TYPES, instance_type, {"metadata": {"labels": {"mark": "changed"}}})
            await eventually(
                lambda: _async(any("changed" in line for line in lines)),
                timeout=30,
                what="the change on the watch",
            )
            await consistently(
                lambda: len([line for line in lines if "changed" in line]) == 1,
                duration=3,
                what="the change shown once, no duplicate",
            )
            changed = [line for line in lines if "changed" in line]
            assert len(changed) == 1, lines
            assert changed[0].split()[0] == "MODIFIED"
            assert lines[0].split()[:2] == ["EVENT", "NAME"]  # headers once, first
            assert sum(1 for line in lines if line.startswith("EVENT")) == 1
        finally:
            proc.kill()
            await proc.wait()
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader


async def _async(value: bool) -> bool:
    return value


async def test_row27_the_crd_version_keeps_working(kubectl: Kubectl, instance_type: str) -> None:
    out = await kubectl.ok("get", "instancetypes.v1alpha1.worker.gpustack.ai", instance_type, "-o", "yaml")
    assert "apiVersion: worker.gpustack.ai/v1alpha1\n" in out


async def test_row04_api_resources_lists_v1_without_stale_discovery(kubectl: Kubectl, served: Served) -> None:
    rc, out, err = await kubectl.run("api-resources", "--api-group=worker.gpustack.ai", "-o", "wide")
    assert rc == 0, err
    assert "stale GroupVersion" not in err
    row = next(line for line in out.splitlines() if line.startswith("instancetypes "))
    assert "instype" in row.split()
    assert "worker.gpustack.ai/v1 " in row + " "
    categories = await kubectl.ok("api-resources", "--categories=gpustack", "-o", "name")
    assert "instancetypes.worker.gpustack.ai" in categories.split()


async def test_row14_describe_reads_through_v1(kubectl: Kubectl, instance_type: str) -> None:
    out = await kubectl.ok("describe", "instancetype", instance_type)
    assert f"Name:         {instance_type}" in out
    assert "API Version:  worker.gpustack.ai/v1" in out


async def test_row15_unknown_field_is_refused_by_strict_validation(kubectl: Kubectl, served: Served) -> None:
    manifest = json.dumps(
        {
            "apiVersion": "worker.gpustack.ai/v1",
            "kind": "InstanceType",
            "metadata": {"name": "agg-strict"},
            "spec": {
                "os": "linux",
                "arch": "amd64",
                "bogus": 1,
                "unitResources": {"cpu": "1", "ram": "2Gi"},
                "localStorage": "10Gi",
            },
        }
    )
    rc, _, err = await kubectl.run("create", "-f", "-", stdin=manifest)
    assert rc != 0
    assert 'unknown field "spec.bogus"' in err


async def test_row15_unknown_field_is_a_warning_with_validate_warn(
    kubectl: Kubectl, kube: Client, served: Served
) -> None:
    """`--validate=warn` asks for fieldValidation=Warn: the CRD keeps the object, drops the field and says
    so in a Warning header, which the proxy passes on for kubectl to print."""
    name = f"agg-warn-{uuid.uuid4().hex[:6]}"
    manifest = cpu_type(name)
    manifest["spec"]["bogus"] = 1
    rc, _, err = await kubectl.run("create", "-f", "-", "--validate=warn", stdin=json.dumps(manifest))
    try:
        assert rc == 0, err
        assert 'Warning: unknown field "spec.bogus"' in err
        assert "bogus" not in (await kube.get(INSTANCE_TYPES, name))["spec"]
    finally:
        await kube.delete(INSTANCE_TYPES, name)


async def test_a_write_without_a_field_manager_is_owned_by_the_callers_user_agent(
    sandbox: Sandbox, kube: Client, served: Served, instance_type: str
) -> None:
    """kube names the manager of a write that names none after the User-Agent; through the proxy too
    (sent as the aggregator sends it, which passes the caller's User-Agent on)."""
    status, body, _ = await asyncio.to_thread(
        _direct,
        sandbox,
        served.port,
        "PATCH",
        f"/apis/worker.gpustack.ai/v1/instancetypes/{instance_type}",
        json.dumps({"metadata": {"labels": {"by-agent": "yes"}}}).encode(),
        {"Content-Type": "application/merge-patch+json", "User-Agent": "team-tool/2.1 (linux)"},
    )
    assert status == 200, body[:300]
    fields = (await kube.get(INSTANCE_TYPES, instance_type))["metadata"].get("managedFields") or []
    assert "team-tool" in {entry.get("manager") for entry in fields}


def v1_instance(namespace: str, type_name: str) -> dict[str, Any]:
    """A minimal Instance manifest in the served v1."""
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "Instance",
        "metadata": {"generateName": "agg-inst-", "namespace": namespace},
        "spec": {"type": type_name, "image": "busybox", "volume": {"ephemeral": {"capacity": "1Gi"}}},
    }


async def test_row07_instances_across_and_within_namespaces(
    kubectl: Kubectl, kube: Client, instance_type: str, namespace: str
) -> None:
    other = f"agg-ns-{uuid.uuid4().hex[:6]}"
    await kube.create(resources.NAMESPACES, {"metadata": {"name": other}})
    try:
        names = {}
        for ns in (namespace, other):
            out = await kubectl.ok(
                "create", "-f", "-", "-o", "json", stdin=json.dumps(v1_instance(ns, instance_type))
            )
            created = json.loads(out)
            assert created["apiVersion"] == "worker.gpustack.ai/v1"
            names[ns] = created["metadata"]["name"]
        every = await kubectl.ok("get", "instances", "-A")
        lines = every.splitlines()
        assert lines[0].split()[:3] == ["NAMESPACE", "NAME", "TYPE"]
        rows = {tuple(line.split()[:3]) for line in lines[1:]}
        assert {(ns, name, instance_type) for ns, name in names.items()} <= rows
        within = await kubectl.ok("get", "inst", "-n", other, "-o", "name")
        assert within.split() == [f"instance.worker.gpustack.ai/{names[other]}"]
        listed = json.loads(await kubectl.ok("get", "--raw", "/apis/worker.gpustack.ai/v1/instances"))
        assert listed["kind"] == "InstanceList"
        assert {(i["metadata"]["namespace"], i["apiVersion"]) for i in listed["items"]} >= {
            (namespace, "worker.gpustack.ai/v1"),
            (other, "worker.gpustack.ai/v1"),
        }
        rc, _, err = await kubectl.run(
            "create", "--raw", "/apis/worker.gpustack.ai/v1/instances", "-f", "-", stdin="{}"
        )
        assert rc != 0
        assert 'create is not supported on resources of kind "Instance"' in err
        await kubectl.ok("delete", "inst", names[namespace], "-n", namespace, "--timeout=60s")
        assert await kube.get_or_none(resources.INSTANCES, names[namespace], namespace) is None
    finally:
        await kube.delete(resources.NAMESPACES, other)


async def test_row25_a_namespace_holding_v1_instances_is_deleted(
    kubectl: Kubectl, kube: Client, instance_type: str
) -> None:
    """The namespace controller discovers instances through our v1, lists and deletes them there."""
    ns = f"agg-t-{uuid.uuid4().hex[:6]}"
    await kubectl.ok("create", "ns", ns)
    await kubectl.ok("-n", ns, "create", "-f", "-", stdin=json.dumps(v1_instance(ns, instance_type)))
    await kubectl.ok("delete", "ns", ns, "--wait=false")
    failures: set[str] = set()

    async def gone() -> bool:
        obj = await kube.get_or_none(resources.NAMESPACES, ns)
        for condition in ((obj or {}).get("status") or {}).get("conditions") or []:
            if condition.get("status") == "True" and condition.get("type") in (
                "NamespaceDeletionContentFailure",
                "NamespaceDeletionDiscoveryFailure",
            ):
                failures.add(f"{condition['type']}: {condition.get('message')}")
        return obj is None

    await eventually(gone, timeout=120, what=f"namespace {ns} deleted")
    assert failures == set()


async def test_devices_in_v1_with_their_card_counts(kubectl: Kubectl, kube: Client, served: Served) -> None:
    """`kubectl get devs` reads the v1 Devices: cards in the ledger and how many are untouched; status is
    a subresource written through v1."""
    name = f"agg-node-{uuid.uuid4().hex[:6]}"
    manifest = {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "Devices",
        "metadata": {"name": name},
        "spec": {"groups": []},
    }
    await kubectl.ok("create", "-f", "-", stdin=json.dumps(manifest))
    try:
        card = {"id": "GPU-0", "index": 0, "mode": 0, "allocated": 0, "remaining": 1600000}
        busy = {"id": "GPU-1", "index": 1, "mode": 1, "allocated": 1600000, "remaining": 0}
        ledger = {
            "status": {"groups": [{"id": "h100", "manufacturer": "nvidia", "accelerators": [card, busy]}]}
        }
        await kubectl.ok(
            "patch", "devs", name, "--subresource=status", "--type=merge", "-p", json.dumps(ledger)
        )
        out = await kubectl.ok("get", "devs", name)
        header, row = (line.split() for line in out.splitlines()[:2])
        assert header[:4] == ["NAME", "MANUFACTURER", "CARDS", "FREE"]
        assert row[:4] == [name, "<none>", "2", "1"]
        stored = await kube.get(resources.DEVICES, name)
        assert len(stored["status"]["groups"][0]["accelerators"]) == 2
    finally:
        await kube.delete(resources.DEVICES, name)


async def test_devices_wide_and_each_card_with_the_pod_holding_it(
    kubectl: Kubectl, kube: Client, served: Served, kueue_namespace: str
) -> None:
    """`kubectl get devices <node> -o wide` names the cards' product and VRAM, and `--subresource=cards` shows
    each card of the node: the one a real Pod was allocated by the device plugin is exclusive, has no units
    left and names that Pod; the others are free. `kubectl describe` lists the cards in index order, the
    held one with its mode. A user allowed to read Devices but not `devices/cards` is refused the card view
    (it names Pods of every namespace), and allowed it once granted."""
    node, namespace = "a10-0", kueue_namespace
    await kube.create(resources.PODS, gpu_pod("holder", node, {"nvidia.com/gpu": "1"}), namespace)
    try:
        (pod,) = await eventually(
            lambda: running(kube, namespace, ["holder"]), timeout=120, what="the Pod Running with its card"
        )
        ((card, _, _),) = cards_of(pod)

        async def charged() -> bool:
            return (await ledger(kube, node)).get(card, (0, 0))[0] == Mode.EXCLUSIVE

        await eventually(charged, timeout=60, what="the ledger holding the card exclusive")
        out = await kubectl.ok("get", "devices", node, "-o", "wide")
        print(out)
        header, row = (printed_cells(line) for line in out.splitlines())
        assert header == [
            "NAME", "MANUFACTURER", "CARDS", "FREE", "EXCLUSIVE", "SHARED", "SLICED", "UNHEALTHY", "OVERSOLD",
            "PRODUCT", "VRAM", "AGE",
        ]  # fmt: skip
        assert row[:-1] == [node, "nvidia", "4", "3", "1", "0", "0", "0", "0", "NVIDIA A10", "23028Mi"]

        out = await kubectl.ok("get", "devices", node, "--subresource=cards")
        print(out)
        lines = out.splitlines()
        assert printed_cells(lines[0]) == [
            "INDEX", "UUID", "PRODUCT", "VRAM", "MODE", "REMAINING", "HEALTH", "HOLDERS",
        ]  # fmt: skip
        by_card = {printed_cells(line)[1]: printed_cells(line) for line in lines[1:]}
        assert len(by_card) == 4
        assert by_card[card][-4:] == ["exclusive", "0", "Healthy", f"{namespace}/holder"]
        for other, cells in by_card.items():
            if other != card:
                assert cells[-4:] == ["<none>", "1600000", "Healthy", "<none>"]
        out = await kubectl.ok("get", "devices", node, "--subresource=cards", "-o", "wide")
        assert out.splitlines()[0].split()[-3:] == ["MANUFACTURER", "GROUP", "OVERSOLD"]
        doc = json.loads(await kubectl.ok("get", "devices", node, "--subresource=cards", "-o", "json"))
        assert (doc["kind"], doc["metadata"]["name"]) == ("DeviceCards", node)
        assert [c["holders"] for c in doc["cards"] if c["id"] == card] == [[f"{namespace}/holder"]]
        described = await kubectl.ok("describe", "devices", node)
        print(described)
        spec, _, ledger_part = described.partition("\nStatus:\n")
        for part in (spec, ledger_part):  # each card's block in index order, in the inventory and the ledger
            assert re.findall(r"^ +Index: +(\d+)$", part, re.M) == ["0", "1", "2", "3"]
        assert re.search(rf"Id: +{card}\n +Index: +\d\n +Mode: +1\n", ledger_part), ledger_part

        async with reader_role(kube, "carol", ("devices",)):
            await eventually(
                lambda: _reads(kubectl, "carol", "get", "devices", node), timeout=30, what="carol's RBAC"
            )
            rc, _, err = await kubectl.run("get", "devices", node, "--subresource=cards", "--as=carol")
            assert rc != 0
            assert 'User "carol" cannot get resource "devices/cards" in API group "worker.gpustack.ai"' in err
        async with reader_role(kube, "dave", ("devices", "devices/cards")):
            result = await eventually(
                lambda: _reads(kubectl, "dave", "get", "devices", node, "--subresource=cards"),
                timeout=30,
                what="dave's RBAC",
            )
            assert f"{namespace}/holder" in result[1]
    finally:
        await remove_pods(kube, namespace)

    async def freed() -> bool:
        out = await kubectl.ok("get", "devices", node, "--subresource=cards")
        return f"{namespace}/holder" not in out and "exclusive" not in out

    await eventually(freed, timeout=60, what="the card free again, nobody named")


def printed_cells(line: str) -> list[str]:
    """The cells of one line kubectl printed (two spaces or more apart: a cell may hold one)."""
    return re.split(r"\s{2,}", line.strip())


async def _reads(kubectl: Kubectl, user: str, *args: str) -> tuple[int, str, str] | None:
    result = await kubectl.run(*args, f"--as={user}")
    return result if result[0] == 0 else None


async def test_row16_17_client_and_server_side_apply(kubectl: Kubectl, kube: Client, served: Served) -> None:
    name = f"agg-apply-{uuid.uuid4().hex[:6]}"
    doc = cpu_type(name)
    doc["spec"]["displayName"] = "one"
    try:
        assert "created" in await kubectl.ok("apply", "-f", "-", stdin=json.dumps(doc))
        assert "unchanged" in await kubectl.ok("apply", "-f", "-", stdin=json.dumps(doc))
        doc["spec"]["displayName"] = "two"  # type: ignore[index]
        assert "configured" in await kubectl.ok("apply", "-f", "-", stdin=json.dumps(doc))
        # Taking over from client-side apply with the same manifest migrates its fields (no conflict) ...
        out = await kubectl.ok("apply", "--server-side", "-f", "-", stdin=json.dumps(doc))
        assert "serverside-applied" in out
        managers = {m["manager"] for m in (await kube.get(INSTANCE_TYPES, name))["metadata"]["managedFields"]}
        assert "kubectl-client-side-apply" not in managers
        doc["spec"]["displayName"] = "three"  # type: ignore[index]  # ... after which kubectl owns them
        await kubectl.ok("apply", "--server-side", "-f", "-", stdin=json.dumps(doc))
        assert (await kube.get(INSTANCE_TYPES, name))["spec"]["displayName"] == "three"
        doc["spec"]["displayName"] = "four"  # type: ignore[index]
        rc, _, err = await kubectl.run(
            "apply", "--server-side", "--field-manager=other", "-f", "-", stdin=json.dumps(doc)
        )
        assert rc != 0
        assert "conflict" in err.lower()
        await kubectl.ok(
            "apply",
            "--server-side",
            "--field-manager=other",
            "--force-conflicts",
            "-f",
            "-",
            stdin=json.dumps(doc),
        )
        assert (await kube.get(INSTANCE_TYPES, name))["spec"]["displayName"] == "four"
    finally:
        await kube.delete(INSTANCE_TYPES, name)


async def test_row18_status_subresource_keeps_spec_and_status_apart(
    kubectl: Kubectl, kube: Client, instance_type: str
) -> None:
    before = await kube.get(INSTANCE_TYPES, instance_type)
    await kubectl.ok(
        "patch",
        "instype",
        instance_type,
        "--type=merge",
        "-p",
        '{"spec":{"description":"spec edit"},"status":{"phaseMessage":"ignored on the main resource"}}',
    )
    after = await kube.get(INSTANCE_TYPES, instance_type)
    assert after["spec"]["description"] == "spec edit"
    assert after["status"].get("phaseMessage") != "ignored on the main resource"
    assert after["metadata"]["generation"] == before["metadata"]["generation"] + 1
    out = await kubectl.ok("get", "instype", instance_type, "--subresource=status", "-o", "json")
    assert json.loads(out)["apiVersion"] == "worker.gpustack.ai/v1"


async def test_row20_replace_with_a_stale_version_is_a_conflict(
    kubectl: Kubectl, kube: Client, instance_type: str
) -> None:
    current = json.loads(await kubectl.ok("get", "instype", instance_type, "-o", "json"))
    await kube.patch(INSTANCE_TYPES, instance_type, {"spec": {"description": "moved on"}})
    current["spec"]["description"] = "stale"
    rc, _, err = await kubectl.run("replace", "-f", "-", stdin=json.dumps(current))
    assert rc != 0
    assert "the object has been modified" in err


async def test_row22_wait_for_delete_completes(kubectl: Kubectl, kube: Client, served: Served) -> None:
    name = f"agg-wait-{uuid.uuid4().hex[:6]}"
    await kube.create(
        INSTANCE_TYPES,
        cpu_type(name, INSTANCE_TYPES.api_version),
    )
    waiter = asyncio.create_task(kubectl.run("wait", "--for=delete", f"instype/{name}", "--timeout=60s"))
    await asyncio.sleep(1)
    await kubectl.ok("delete", "instype", name, "--wait=false")
    rc, out, err = await waiter
    assert rc == 0, err
    assert "condition met" in out
    assert await kube.get_or_none(INSTANCE_TYPES, name) is None


async def test_row24_anonymous_is_refused(sandbox: Sandbox, served: Served, tmp_path: Path) -> None:
    """Our API refuses anonymous with kube's message. Discovery is the admin's, as in a kubectl whose cache
    an admin filled: anonymous may not discover at all (`system:discovery` is for authenticated users), so
    a kubectl with no cache stops at discovery with "Forbidden: unknown" before it ever reaches our API."""
    kubectl = Kubectl(sandbox, cache_dir=tmp_path / "kube-cache")
    await kubectl.ok("api-resources", "--api-group=worker.gpustack.ai")
    rc, _, err = await kubectl.run("get", "instancetypes", "--as=system:anonymous")
    assert rc != 0
    assert 'User "system:anonymous" cannot list resource "instancetypes"' in err


async def test_row26_garbage_collector_follows_owners_through_v1(
    sandbox: Sandbox, kubectl: Kubectl, kube: Client, served: Served, namespace: str
) -> None:
    """The garbage collector resolves an owner named as `worker.gpustack.ai/v1` through our API (metadata
    client: PartialObjectMetadata get/list/watch) and deletes the dependent when the owner goes."""
    name = f"agg-owner-{uuid.uuid4().hex[:6]}"
    owner = await kube.create(
        INSTANCE_TYPES,
        cpu_type(name, INSTANCE_TYPES.api_version),
    )
    ref = {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "InstanceType",
        "name": name,
        "uid": owner["metadata"]["uid"],
    }
    await kube.create(
        resources.CONFIGMAPS,
        {"metadata": {"name": "dependent", "namespace": namespace, "ownerReferences": [ref]}},
    )
    await kubectl.ok("delete", "instype", name)

    async def collected() -> bool:
        return await kube.get_or_none(resources.CONFIGMAPS, "dependent", namespace) is None

    await eventually(collected, timeout=90, what="the dependent ConfigMap collected")
    log = (sandbox.run_dir / "logs" / "kube-controller-manager.log").read_text(errors="replace")
    failures = [
        line
        for line in log.splitlines()
        if "worker.gpustack.ai/v1," in line and ("failed to list" in line or "Failed to watch" in line)
    ]
    assert failures == []


async def test_watch_list_ends_initial_events_with_a_v1_bookmark(kube: Client, instance_type: str) -> None:
    """What informers (watch-list, client-go's default) read: ADDED for each object, then a BOOKMARK of our
    version carrying `k8s.io/initial-events-end`."""
    params = {
        "watch": "true",
        "sendInitialEvents": "true",
        "resourceVersionMatch": "NotOlderThan",
        "allowWatchBookmarks": "true",
        "fieldSelector": f"metadata.name={instance_type}",
        "timeoutSeconds": "10",
    }
    events: list[dict[str, Any]] = []
    async with kube.stream(
        "/apis/worker.gpustack.ai/v1/instancetypes", params=params, read_timeout=30
    ) as lines:
        async for line in lines:
            events.append(json.loads(line))
            if events[-1]["type"] == "BOOKMARK":
                break
    added, bookmark = events[0], events[-1]
    assert added["type"] == "ADDED"
    assert added["object"]["apiVersion"] == "worker.gpustack.ai/v1"
    assert added["object"]["metadata"]["name"] == instance_type
    assert bookmark["object"]["apiVersion"] == "worker.gpustack.ai/v1"
    assert bookmark["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


async def test_row12_13_explain_reads_our_openapi(kubectl: Kubectl, served: Served) -> None:
    async def explained() -> str | None:
        rc, out, _ = await kubectl.run("explain", "instancetypes")
        return out if rc == 0 else None

    out = await eventually(explained, timeout=90, what="kube-apiserver aggregated our OpenAPI v3")
    assert "GROUP:      worker.gpustack.ai" in out
    assert "KIND:       InstanceType" in out
    assert "VERSION:    v1" in out
    assert "backed 1:1 by the Kueue ClusterQueue" in " ".join(out.split())  # explain wraps lines
    spec = await kubectl.ok("explain", "instancetypes.spec.unitResources")
    assert "FIELDS:" in spec
    root = json.loads(await kubectl.ok("get", "--raw", "/openapi/v3"))["paths"]
    assert "apis/worker.gpustack.ai/v1" in root
    assert "apis/worker.gpustack.ai/v1alpha1" in root  # the CRD's document is still its own
    document = json.loads(await kubectl.ok("get", "--raw", "/openapi/v3/apis/worker.gpustack.ai/v1"))
    assert "/apis/worker.gpustack.ai/v1/instancetypes/{name}" in document["paths"]


# ---- bad input: no 5xx, every refusal a Status ------------------------------------------------------

FUZZ_EXAMPLES = int(os.environ.get("GPUSTACK_FUZZ_EXAMPLES", "400"))
"""Cases per run; the issue's 10,000 is `GPUSTACK_FUZZ_EXAMPLES=10000` (about 10 minutes here)."""
_NAMES = st.sampled_from(["", "agg-none", "a%2Fb", "UPPER", "x" * 300, "..", "%00"])
_QUERY_KEYS = st.sampled_from(
    [
        "labelSelector",
        "fieldSelector",
        "limit",
        "continue",
        "resourceVersion",
        "resourceVersionMatch",
        "watch",
        "timeoutSeconds",
        "allowWatchBookmarks",
        "sendInitialEvents",
        "includeObject",
        "fieldManager",
        "fieldValidation",
        "force",
        "gracePeriodSeconds",
        "propagationPolicy",
        "bogus",
    ]
)
_SCALARS = st.none() | st.booleans() | st.integers() | st.text(max_size=8)
_JSON = st.one_of(
    _SCALARS,
    st.lists(_SCALARS, max_size=3),
    st.dictionaries(st.text(max_size=8), _SCALARS | st.lists(_SCALARS, max_size=2), max_size=3),
)
_BODIES = st.one_of(
    _JSON.map(lambda doc: json.dumps(doc).encode()),
    st.fixed_dictionaries(
        {
            "apiVersion": st.sampled_from(
                ["worker.gpustack.ai/v1", "worker.gpustack.ai/v1alpha1", "gpustack.ai/v1", "v1"]
            ),
            "kind": st.sampled_from(
                ["InstanceType", "Instance", "Devices", "Setting", "Pod", "InstanceSSHPublicKey"]
            ),
            "metadata": _JSON,
            "spec": _JSON,
        }
    ).map(lambda doc: json.dumps(doc).encode()),
    st.binary(max_size=64),
)
_CONTENT_TYPES = st.sampled_from(
    [
        "application/json",
        "application/merge-patch+json",
        "application/json-patch+json",
        "application/apply-patch+yaml",
        "application/strategic-merge-patch+json",
        "text/plain",
        "",
    ]
)
_ACCEPTS = st.sampled_from(
    [
        "",
        "application/json",
        "application/json;as=Table;v=v1;g=meta.k8s.io",
        "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io",
        "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
        "application/yaml",
        "*/*;q=0.1",
    ]
)


def _direct(
    sandbox: Sandbox, port: int, method: str, path: str, body: bytes | None, headers: dict[str, str]
) -> tuple[int, bytes, str]:
    """One request straight to our port as the front proxy would send it (as system:masters)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.load_cert_chain(str(sandbox.certs.front_proxy_client_crt), str(sandbox.certs.front_proxy_client_key))
    request = urllib.request.Request(
        f"https://127.0.0.1:{port}{path}",
        data=body,
        method=method,
        headers={
            "X-Remote-User": "fuzz",
            "X-Remote-Group": "system:masters",
            **headers,
        },
    )
    try:
        with urllib.request.urlopen(request, context=ctx, timeout=30) as resp:
            return resp.status, resp.read(2_000_000), resp.headers.get("Content-Type", "")
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers.get("Content-Type", "")


def test_fuzzed_requests_never_get_a_5xx_and_every_refusal_is_a_status(
    sandbox: Sandbox, served: Served
) -> None:
    @settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        method=st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE"]),
        collection=st.sampled_from(
            [
                "/apis/worker.gpustack.ai/v1/instancetypes",
                "/apis/worker.gpustack.ai/v1/devices",
                "/apis/worker.gpustack.ai/v1/namespaces/default/instances",
                "/apis/worker.gpustack.ai/v1/instances",
                "/apis/worker.gpustack.ai/v1/instancetypeflavors",
                f"/apis/gpustack.ai/v1/namespaces/{served.namespace}/settings",
                "/apis/worker.gpustack.ai/v1/namespaces/default/instancesshpublickeys",
                "/apis/worker.gpustack.ai/v1/namespaces/default/instanceimagepullsecrets",
                "/apis/worker.gpustack.ai/v1/namespaces/default/instancepersistentvolumes",
                "/apis/worker.gpustack.ai/v1/instancepersistentvolumetypes",
            ]
        ),
        name=_NAMES,
        status=st.booleans(),
        query=st.dictionaries(_QUERY_KEYS, st.text(max_size=12), max_size=4),
        body=_BODIES,
        content_type=_CONTENT_TYPES,
        accept=_ACCEPTS,
    )
    def one(
        method: str,
        collection: str,
        name: str,
        status: bool,
        query: dict[str, str],
        body: bytes,
        content_type: str,
        accept: str,
    ) -> None:
        path = collection
        if name:
            path += "/" + name + ("/status" if status else "")
        if method != "GET":
            query["dryRun"] = "All"  # fuzzing must change nothing
        elif "watch" in query:  # kube reads any value but 0/false as a watch, `watch=` included
            query["timeoutSeconds"] = "1"
        query_text = urllib.parse.urlencode(query)
        headers = {"Content-Type": content_type, "Accept": accept}
        code, raw, ctype = _direct(
            sandbox, served.port, method, f"{path}?{query_text}", body if method != "GET" else None, headers
        )
        assert code < 500, (method, path, query, raw[:300])
        if code >= 400:
            assert ctype.startswith("application/json")
            doc = json.loads(raw)
            assert doc["kind"] == "Status"
            assert doc["reason"]
            assert doc["code"] == code

    one()


async def test_row10_instancetypeflavors_are_list_only(
    kubectl: Kubectl, kube: Client, served: Served
) -> None:
    async def listed() -> str | None:
        out = await kubectl.ok("get", "instancetypeflavors")
        return out if "gpustack--nvidia-h100" in out else None

    out = await eventually(listed, timeout=60, what="the sandbox's pools as InstanceTypeFlavors")
    header = out.splitlines()[0].split()
    assert header == [
        "NAME",
        "GENERALGROUP",
        "ACCELERATORGROUP",
        "ACCELERATABLE",
        "MANUFACTURER",
        "PRODUCT",
        "MEMORY",
        "CORES",
        "SLICEABLE",
    ]
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    assert "gpustack--generic" in rows  # CPU pools collapse while the setting is off
    h100 = next(cells for name, cells in rows.items() if name.startswith("gpustack--nvidia-h100"))
    assert (h100[3], h100[4]) == ("true", "nvidia")
    short = await kubectl.ok("get", "instypeflavor", "-o", "name")
    assert f"instancetypeflavor.worker.gpustack.ai/{h100[0]}" in short.split()
    rc, _, err = await kubectl.run("get", "instancetypeflavors", h100[0])
    assert rc != 0
    assert "NotFound" in err or "not found" in err
    rc, _, err = await kubectl.run("get", "instancetypeflavors", "-w", "--request-timeout=10s")
    assert rc != 0
    assert "MethodNotAllowed" in err or "not supported" in err
