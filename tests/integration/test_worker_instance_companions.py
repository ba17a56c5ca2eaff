"""The Instance's companions through kube-apiserver with the real kubectl: create, get (table), -o yaml,
explain, discovery, delete, a bad object refused naming the field, and an Instance whose
`spec.sshPublicKey` names an InstanceSSHPublicKey getting the key into its Pod.

Reuses test_worker_instances' module worker (`served`) and namespace (`space`) fixtures.
"""

from __future__ import annotations

import base64
import json
import struct
import uuid
from typing import Any

import yaml

from gpustack_operator.api.json import JSONObj
from gpustack_operator.kube.client import Client
from gpustack_operator.kube.resources import PERSISTENT_VOLUME_CLAIMS, PODS, SECRETS, STORAGE_CLASSES
from gpustack_operator.rules.companions import AUTHORIZED_KEYS, DOCKER_CONFIG_KEY
from tests.helpers import eventually
from tests.integration.test_admission_check import LONG
from tests.integration.test_worker_instances import served, space, started
from tests.integration.worker_support import Kubectl, Served

__all__ = ["served", "space"]

V1 = "worker.gpustack.ai/v1"
KEY = (
    "ssh-ed25519 "
    + base64.b64encode(struct.pack(">I", 11) + b"ssh-ed25519" + struct.pack(">I", 32) + bytes(32)).decode()
)


def _manifest(kind: str, name: str, namespace: str | None, **body: Any) -> JSONObj:
    meta: JSONObj = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": V1, "kind": kind, "metadata": meta, **body}


async def _create(kubectl: Kubectl, manifest: JSONObj) -> tuple[int, str, str]:
    return await kubectl.run("create", "-f", "-", "-o", "json", stdin=json.dumps(manifest))


async def test_1_discovery_and_explain_list_the_companions(kubectl: Kubectl, served: Served) -> None:
    async def listed() -> str | None:
        rc, out, _ = await kubectl.run("api-resources", "--api-group=worker.gpustack.ai", "-o", "wide")
        return out if rc == 0 and "instancesshpublickeys" in out else None

    out = await eventually(listed, timeout=60, what="discovery listing the companions")
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    for plural, kind, namespaced in (
        ("instanceimagepullsecrets", "InstanceImagePullSecret", "true"),
        ("instancesshpublickeys", "InstanceSSHPublicKey", "true"),
        ("instancepersistentvolumes", "InstancePersistentVolume", "true"),
        ("instancepersistentvolumetypes", "InstancePersistentVolumeType", "false"),
    ):
        cells = rows[plural].split()
        assert kind in cells, rows[plural]
        assert namespaced in cells, rows[plural]
        assert "create,delete,get,list,patch,update,watch" in rows[plural]
        assert "gpustack" in rows[plural]

    async def explained() -> str | None:
        rc, text, _ = await kubectl.run("explain", "instancesshpublickeys")
        return text if rc == 0 else None

    text = await eventually(explained, timeout=90, what="kube-apiserver aggregated the companions' OpenAPI")
    assert "authorized_keys" in text
    spec = await kubectl.ok("explain", "instancepersistentvolumes.spec")
    assert "accessMode" in spec
    assert "capacity" in spec


async def test_2_ssh_public_key_create_get_yaml_delete(kube: Client, kubectl: Kubectl, space: str) -> None:
    name = f"key-{uuid.uuid4().hex[:6]}"
    rc, out, err = await _create(
        kubectl, _manifest("InstanceSSHPublicKey", name, space, data=KEY + " me@here")
    )
    assert rc == 0, err
    assert json.loads(out)["data"] == KEY + " me@here\n"
    secret = await kube.get(SECRETS, name, space)
    assert base64.b64decode(secret["data"][AUTHORIZED_KEYS]).decode() == KEY + " me@here\n"
    table = await kubectl.ok("get", "instancesshpublickeys", "-n", space)
    assert table.split("\n")[0].split() == ["NAME", "KEYS", "AGE"]
    assert f"{name}   ssh-ed25519 me@here" in table
    doc = yaml.safe_load(await kubectl.ok("get", "instancesshpublickey", name, "-n", space, "-o", "yaml"))
    assert (doc["apiVersion"], doc["kind"]) == (V1, "InstanceSSHPublicKey")
    assert "resource.gpustack.ai/type" not in (doc["metadata"].get("labels") or {})
    await kubectl.ok("delete", "instancesshpublickey", name, "-n", space)
    assert await kube.get_or_none(SECRETS, name, space) is None

    # a Secret that is not ours is not served, nor taken over
    plain = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "stringData": {"k": "v"}}
    await kube.create(SECRETS, plain, space)
    try:
        rc, _, err = await kubectl.run("get", "instancesshpublickey", name, "-n", space)
        assert rc != 0, err
        assert "NotFound" in err, err
        assert "instancesshpublickeys" in err, err
        rc, _, err = await _create(kubectl, _manifest("InstanceSSHPublicKey", name, space, data=KEY))
        assert rc != 0, err
        assert "AlreadyExists" in err, err
    finally:
        await kube.delete(SECRETS, name, space)


async def test_3_bad_objects_are_refused_naming_the_field(kubectl: Kubectl, space: str) -> None:
    rc, _, err = await _create(
        kubectl, _manifest("InstanceSSHPublicKey", "bad-key", space, data="ssh-ed25519 nope!")
    )
    assert rc != 0
    assert 'InstanceSSHPublicKey "bad-key" is invalid' in err, err
    assert "data: Invalid value" in err, err
    rc, _, err = await _create(
        kubectl, _manifest("InstanceImagePullSecret", "bad-pull", space, spec={"registry": "docker.io"})
    )
    assert rc != 0, err
    assert "spec.username: Required value" in err, err
    assert "spec.password: Required value" in err, err
    rc, _, err = await _create(
        kubectl, _manifest("InstancePersistentVolume", "bad-pv", space, spec={"capacity": "-1Gi"})
    )
    assert rc != 0, err
    assert "spec.capacity: Invalid value" in err, err
    rc, _, err = await _create(kubectl, _manifest("InstancePersistentVolumeType", "bad-pvt", None, spec={}))
    assert rc != 0, err
    assert "spec: Required value" in err, err


async def test_4_pull_secret_volume_and_volume_type(kube: Client, kubectl: Kubectl, space: str) -> None:
    tag = uuid.uuid4().hex[:6]
    pull = _manifest(
        "InstanceImagePullSecret",
        f"pull-{tag}",
        space,
        spec={"displayName": "Site", "registry": "registry.local:5000", "username": "u", "password": "p"},
    )
    rc, out, err = await _create(kubectl, pull)
    assert rc == 0, err
    assert json.loads(out)["spec"] == {"displayName": "Site"}  # the credentials are write-only
    secret = await kube.get(SECRETS, f"pull-{tag}", space)
    assert secret["type"] == "kubernetes.io/dockerconfigjson"
    auths = json.loads(base64.b64decode(secret["data"][DOCKER_CONFIG_KEY]))["auths"]
    assert auths["registry.local:5000"]["username"] == "u"
    await kubectl.ok(
        "patch", "instanceimagepullsecret", f"pull-{tag}", "-n", space, "--type=merge",
        "-p", json.dumps({"spec": {"displayName": "Renamed"}}),
    )  # fmt: skip
    assert (await kube.get(SECRETS, f"pull-{tag}", space))["data"] == secret["data"]  # kept
    assert "Renamed" in await kubectl.ok("get", "instanceimagepullsecrets", "-n", space)

    pvt = _manifest("InstancePersistentVolumeType", f"nfs-{tag}", None, spec={"nfs": {"server": "10.0.0.9"}})
    rc, _, err = await _create(kubectl, pvt)
    assert rc == 0, err
    klass = await kube.get(STORAGE_CLASSES, f"nfs-{tag}")
    assert (klass["provisioner"], klass["parameters"]["server"]) == ("nfs.csi.k8s.io", "10.0.0.9")
    types = await kubectl.ok("get", "instancepersistentvolumetypes")
    assert f"nfs-{tag}" in types
    assert "10.0.0.9" in types

    pv = _manifest(
        "InstancePersistentVolume", f"vol-{tag}", space, spec={"type": f"nfs-{tag}", "capacity": "5Gi"}
    )
    rc, _, err = await _create(kubectl, pv)
    assert rc == 0, err
    claim = await kube.get(PERSISTENT_VOLUME_CLAIMS, f"vol-{tag}", space)
    assert claim["spec"]["storageClassName"] == f"nfs-{tag}"
    assert claim["spec"]["resources"]["requests"]["storage"] == "5Gi"
    row = (await kubectl.ok("get", "instancepersistentvolumes", "-n", space)).splitlines()
    assert row[0].split()[:5] == ["NAME", "TYPE", "CAPACITY", "ACCESS", "MODE"]
    assert row[1].split()[:4] == [f"vol-{tag}", f"nfs-{tag}", "5Gi", "ReadWriteOnce"]
    rc, _, err = await kubectl.run(
        "patch", "instancepersistentvolume", f"vol-{tag}", "-n", space, "--type=merge",
        "-p", json.dumps({"spec": {"capacity": "9Gi"}}),
    )  # fmt: skip
    assert rc != 0, err
    assert "spec.capacity: Invalid value" in err, err
    assert "immutable" in err, err

    for kind, name, ns in (
        ("instancepersistentvolume", f"vol-{tag}", space),
        ("instanceimagepullsecret", f"pull-{tag}", space),
        ("instancepersistentvolumetype", f"nfs-{tag}", None),
    ):
        await kubectl.ok("delete", kind, name, *(("-n", ns) if ns else ()), "--wait=false")
    assert await kube.get_or_none(STORAGE_CLASSES, f"nfs-{tag}") is None


async def test_5_an_instance_gets_its_ssh_public_key_into_its_pod(
    kube: Client, kubectl: Kubectl, space: str
) -> None:
    key = f"inst-key-{uuid.uuid4().hex[:6]}"
    rc, _, err = await _create(kubectl, _manifest("InstanceSSHPublicKey", key, space, data=KEY))
    assert rc == 0, err
    name = await started(kube, kubectl, space, sshPublicKey={"name": key})

    async def rendered() -> JSONObj | None:
        return await kube.get_or_none(PODS, name, space)

    pod = await eventually(rendered, timeout=LONG, what=f"the Pod of Instance {space}/{name}")
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    secret_volumes = [v["secret"]["secretName"] for v in volumes.values() if "secret" in v]
    assert secret_volumes == [key]
    sshd = next(c for c in pod["spec"]["containers"] if c["name"] == "sshd")
    assert sshd["volumeMounts"][0]["mountPath"] == "/var/run/sshd-authorized-keys"
    secret = await kube.get(SECRETS, key, space)
    assert base64.b64decode(secret["data"][AUTHORIZED_KEYS]).decode() == KEY + "\n"
