"""The Instance settings act, and an Instance is reachable, on the sandbox with a real worker and kubectl.

Each setting is flipped with `kubectl patch setting` (the worker's `gpustack.ai/v1` Settings) and its effect
observed where a user would see it: the Instance webhook's refusal naming the setting, the rendered Pod's
images, pull secrets and policy, the Instance's `status.accessAddresses`. An Instance with an SSH key
gets a NodePort Service, its node port and address in status, and `kubectl get instance -o wide` shows
both (kwok stands in for the runtime, so the rendered objects and the status are what is checked).

Reuses test_worker_instances' module worker (`served`) and namespace (`space`) fixtures and helpers; every
setting a test flips is put back.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest_asyncio

from gpustack_operator.api.json import JSONObj
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import NODES, PODS, RUNTIME_CLASSES, SECRETS, SERVICES
from gpustack_operator.rules.instance.access import node_address
from gpustack_operator.settings.catalog import SETTINGS
from tests.helpers import eventually
from tests.integration.test_admission_check import H100, LONG
from tests.integration.test_worker_instances import offering, served, space, started, status_of
from tests.integration.test_worker_webhooks import create, instance
from tests.integration.worker_support import Kubectl, Served

__all__ = ["served", "space"]  # the fixtures, shared with test_worker_instances

SSH_KEY = "my-key"


class Settings:
    """`kubectl patch setting` in the worker's namespace; `restore` puts every flipped one back."""

    def __init__(self, kubectl: Kubectl, namespace: str) -> None:
        self.kubectl, self.namespace = kubectl, namespace
        self.flipped: set[str] = set()

    async def set(self, name: str, value: str) -> None:
        self.flipped.add(name)
        body = json.dumps({"spec": {"value": value}})
        await self.kubectl.ok("patch", "setting", name, "-n", self.namespace, "--type=merge", "-p", body)
        await asyncio.sleep(0.5)  # the worker's informer of the settings Secret: a local watch event away

    async def restore(self) -> None:
        for name in sorted(self.flipped):
            await self.set(name, SETTINGS[name].default)


@pytest_asyncio.fixture(loop_scope="session")
async def settings(kubectl: Kubectl, served: Served) -> AsyncIterator[Settings]:
    flips = Settings(kubectl, served.namespace)
    yield flips
    await flips.restore()


@pytest_asyncio.fixture(loop_scope="session")
async def ssh_key(kube: Client, space: str) -> str:
    key = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": SSH_KEY},
        "stringData": {"k": "ssh-ed25519 A"},
    }
    if await kube.get_or_none(SECRETS, SSH_KEY, space) is None:
        await kube.create(SECRETS, key, space)
    return SSH_KEY


async def test_1_privileged_instances_need_instance_privileged_allowed(
    kubectl: Kubectl, space: str, settings: Settings
) -> None:
    resources = {"cpu": "1", "ram": "2Gi", "localStorage": "10Gi"}  # a stopped one is not folded
    privileged = instance(space, H100, privileged=True, stop=True, resources=resources)
    obj, err = await create(kubectl, privileged)
    assert obj is None
    assert "spec.privileged: Forbidden" in err
    assert 'enable the "instance-privileged-allowed" setting' in err

    await settings.set("instance-privileged-allowed", "true")
    obj, err = await create(kubectl, privileged)
    assert obj is not None, err
    assert obj["spec"]["privileged"] is True


async def _pod(kube: Client, namespace: str, name: str) -> JSONObj:
    async def rendered() -> JSONObj | None:
        return await kube.get_or_none(PODS, name, namespace)

    return await eventually(rendered, timeout=LONG, what=f"the Pod of Instance {namespace}/{name}")


async def test_2_the_image_settings_and_the_runtime_class_shape_the_rendered_pod(
    kube: Client, kubectl: Kubectl, space: str, settings: Settings, ssh_key: str
) -> None:
    await settings.set("container-registry", "registry.local:5000")
    await settings.set("container-namespace", "mirror")
    await settings.set("image-pull-secrets", "site-creds,more-creds")
    await settings.set("image-pull-policy", "Always")
    runtime_class = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "nvidia"}}
    await kube.create(RUNTIME_CLASSES, {**runtime_class, "handler": "nvidia"})
    try:
        await asyncio.sleep(0.5)  # the worker's RuntimeClass informer
        name = await started(kube, kubectl, space, sshPublicKey={"name": ssh_key})
        pod = await _pod(kube, space, name)
    finally:
        await kube.delete(RUNTIME_CLASSES, "nvidia")
    main, sshd = pod["spec"]["containers"]
    assert sshd["image"] == "registry.local:5000/mirror/ssh-server:v1.3.0"
    assert sshd["imagePullPolicy"] == "Always"
    assert main["image"] == "busybox"  # the user's image is theirs
    assert main["imagePullPolicy"] == "IfNotPresent"
    assert pod["spec"]["imagePullSecrets"] == [{"name": "site-creds"}, {"name": "more-creds"}]
    assert pod["spec"]["runtimeClassName"] == "nvidia"


async def test_3_an_ssh_instance_is_reachable_at_the_address_the_access_settings_say(
    kube: Client, kubectl: Kubectl, space: str, settings: Settings, ssh_key: str
) -> None:
    await offering(kube)
    obj, err = await create(kubectl, instance(space, H100, sshPublicKey={"name": ssh_key}))
    assert obj is not None, err
    name = obj["metadata"]["name"]

    async def exposed() -> JSONObj:
        status = await status_of(kube, space, name)
        assert status.get("accessAddresses"), f"not yet: {status}"
        assert status.get("ports"), f"not yet: {status}"
        assert all(port.get("nodePort") for port in status["ports"]), status
        return status

    status = await eventually(exposed, timeout=LONG, what="the Instance's node port and address")
    service = await kube.get(SERVICES, name, space)
    pod = await kube.get(PODS, name, space)
    assert service["spec"]["type"] == "NodePort"
    assert service["metadata"]["ownerReferences"][0]["uid"] == pod["metadata"]["uid"]
    ((port,),) = [service["spec"]["ports"]]
    assert (port["name"], port["port"], port["targetPort"]) == ("ssh", 22, 22)
    assert status["ports"] == [{"port": 22, "protocol": "TCP", "name": "ssh", "nodePort": port["nodePort"]}]
    node = await kube.get(NODES, pod["spec"]["nodeName"])
    host = node_address(node) or pod["status"]["hostIP"]
    assert status["accessAddresses"] == [host]

    wide = await kubectl.ok("get", "instance", name, "-n", space, "-o", "wide")
    header, row = (line.split() for line in wide.splitlines()[:2])
    assert header[-2:] == ["ADDRESS", "SSH-PORT"]
    assert row[-2:] == [host, str(port["nodePort"])]

    async def addressed(expected: str) -> bool:
        return (await status_of(kube, space, name)).get("accessAddresses") == [expected]

    await settings.set("instance-access-wildcard-dns", "traefik.me")
    dashed = f"{host.replace('.', '-').replace(':', '-')}.traefik.me"
    await eventually(lambda: addressed(dashed), timeout=30, what="the wildcard DNS address")
    await settings.set("instance-access-static-address", "gpu.example.com")
    await eventually(lambda: addressed("gpu.example.com"), timeout=30, what="the static address")
