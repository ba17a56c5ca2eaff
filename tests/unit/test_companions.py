"""rules.companions: each Instance companion converted to the object behind it and back, and its refusals."""

from __future__ import annotations

import base64
import json
import struct
from typing import Any

import pytest

from gpustack_operator.api.json import JSONObj
from gpustack_operator.rules.companions import (
    AUTHORIZED_KEYS,
    DOCKER_CONFIG_KEY,
    NFS_PROVISIONER,
    VIEWS,
    CompanionError,
    ssh_key_problem,
)

V1 = "worker.gpustack.ai/v1"
LABEL = "resource.gpustack.ai/type"
KEY = (
    "ssh-ed25519 "
    + base64.b64encode(struct.pack(">I", 11) + b"ssh-ed25519" + struct.pack(">I", 32) + bytes(32)).decode()
)


def _view(kind: str, **body: Any) -> JSONObj:
    return {"apiVersion": V1, "kind": kind, "metadata": {"name": "x", "namespace": "ns"}, **body}


def _paths(err: pytest.ExceptionInfo[CompanionError]) -> list[str]:
    return [str(e) for e in err.value.errors]


def test_ssh_key_round_trips_through_an_opaque_secret_labelled_ours() -> None:
    view = VIEWS["InstanceSSHPublicKey"]
    secret = view.to_backing(_view("InstanceSSHPublicKey", data=f"# mine\n{KEY} me@here\n\n"), None)
    assert secret["type"] == "Opaque"
    assert base64.b64decode(secret["data"][AUTHORIZED_KEYS]).decode() == f"{KEY} me@here\n"
    assert secret["metadata"]["labels"] == {LABEL: "instancesshpublickeys"}
    assert view.owns(secret)
    back = view.to_view({**secret, "metadata": {**secret["metadata"], "uid": "u", "resourceVersion": "7"}})
    assert back == {
        "apiVersion": V1,
        "kind": "InstanceSSHPublicKey",
        "metadata": {"name": "x", "namespace": "ns", "uid": "u", "resourceVersion": "7"},
        "data": f"{KEY} me@here\n",
    }


@pytest.mark.parametrize(
    ("data", "why"),
    [
        ("", "data: Required value"),
        ("ssh-ed25519", "want `<type> <base64 key> [comment]`"),
        ("ssh-foo AAAA", "unknown key type 'ssh-foo'"),
        ("ssh-ed25519 nope!", "the key is not base64"),
        ("ssh-rsa " + KEY.split()[1], "does not match 'ssh-rsa'"),
    ],
)
def test_ssh_key_refusals_name_data(data: str, why: str) -> None:
    with pytest.raises(CompanionError) as err:
        VIEWS["InstanceSSHPublicKey"].to_backing(_view("InstanceSSHPublicKey", data=data), None)
    assert err.value.errors[0].path == "data"
    assert why in str(err.value)


def test_ssh_key_problem_accepts_a_real_key() -> None:
    assert ssh_key_problem(KEY + " comment") == ""


def test_pull_secret_is_a_dockerconfigjson_and_credentials_are_write_only() -> None:
    view = VIEWS["InstanceImagePullSecret"]
    spec = {
        "displayName": "Site",
        "registry": "r.local:5000",
        "username": "u",
        "password": "p",
        "email": "e@x",
    }
    secret = view.to_backing(_view("InstanceImagePullSecret", spec=spec), None)
    assert secret["type"] == "kubernetes.io/dockerconfigjson"
    auths = json.loads(base64.b64decode(secret["data"][DOCKER_CONFIG_KEY]))["auths"]
    assert auths == {
        "r.local:5000": {
            "username": "u",
            "password": "p",
            "email": "e@x",
            "auth": base64.b64encode(b"u:p").decode(),
        }
    }
    assert secret["metadata"]["annotations"] == {"note.gpustack.ai/display-name": "Site"}
    back = view.to_view(secret)
    assert back["spec"] == {"displayName": "Site"}
    # an edit of the display name alone keeps the credentials
    edited = view.to_backing({**back, "spec": {"displayName": "New"}}, secret)
    assert edited["data"] == secret["data"]
    assert edited["metadata"]["annotations"] == {"note.gpustack.ai/display-name": "New"}


def test_pull_secret_needs_all_credentials_together() -> None:
    with pytest.raises(CompanionError) as err:
        VIEWS["InstanceImagePullSecret"].to_backing(
            _view("InstanceImagePullSecret", spec={"registry": "docker.io"}), None
        )
    assert [e.path for e in err.value.errors] == ["spec.username", "spec.password"]
    with pytest.raises(CompanionError) as err:
        VIEWS["InstanceImagePullSecret"].to_backing(
            _view("InstanceImagePullSecret", spec={"registry": "a b", "username": "u", "password": "p"}), None
        )
    assert [e.path for e in err.value.errors] == ["spec.registry"]


def test_persistent_volume_is_a_claim_with_defaults_and_shows_its_status() -> None:
    view = VIEWS["InstancePersistentVolume"]
    claim = view.to_backing(_view("InstancePersistentVolume", spec={"type": "nfs"}), None)
    assert claim["spec"] == {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "20Gi"}},
        "storageClassName": "nfs",
    }
    bound = {**claim, "spec": {**claim["spec"], "volumeName": "pv-1"}, "status": {"phase": "Bound"}}
    back = view.to_view(bound)
    assert back["spec"] == {"type": "nfs", "capacity": "20Gi", "accessMode": "ReadWriteOnce"}
    assert back["status"] == {
        "phase": "Bound",
        "volume": {"apiVersion": "v1", "kind": "PersistentVolume", "name": "pv-1"},
    }
    # the same spec again (an apply, an edit of labels) is fine; a new capacity is refused
    same = view.to_backing({**back, "metadata": {**back["metadata"], "labels": {"a": "b"}}}, bound)
    assert same["spec"]["volumeName"] == "pv-1"
    assert same["metadata"]["labels"] == {"a": "b", LABEL: "instancepersistentvolumes"}
    with pytest.raises(CompanionError) as err:
        view.to_backing({**back, "spec": {**back["spec"], "capacity": "30Gi"}}, bound)
    assert _paths(err) == ['spec.capacity: Invalid value: "30Gi": field is immutable']


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({"capacity": "0"}, "spec.capacity"),
        ({"capacity": "lots"}, "spec.capacity"),
        ({"accessMode": "Any"}, "spec.accessMode"),
    ],
)
def test_persistent_volume_refusals(spec: JSONObj, path: str) -> None:
    with pytest.raises(CompanionError) as err:
        VIEWS["InstancePersistentVolume"].to_backing(_view("InstancePersistentVolume", spec=spec), None)
    assert err.value.errors[0].path == path


def test_persistent_volume_type_is_an_nfs_storage_class() -> None:
    view = VIEWS["InstancePersistentVolumeType"]
    obj = {"apiVersion": V1, "kind": "InstancePersistentVolumeType", "metadata": {"name": "nfs"}}
    spec = {"nfs": {"server": "10.0.0.9", "subDirectory": "${pvc.metadata.name}", "mountOptions": ["vers=4"]}}
    klass = view.to_backing({**obj, "spec": spec}, None)
    assert klass["provisioner"] == NFS_PROVISIONER
    assert klass["parameters"] == {"server": "10.0.0.9", "share": "/", "subDir": "${pvc.metadata.name}"}
    assert klass["mountOptions"] == ["vers=4"]
    assert view.to_view(klass)["spec"] == {"nfs": {**spec["nfs"], "share": "/"}}
    with pytest.raises(CompanionError) as err:
        view.to_backing({**obj, "spec": {"nfs": {"server": "10.0.0.10"}}}, klass)
    assert [e.path for e in err.value.errors] == [
        "spec.nfs.mountOptions",
        "spec.nfs.server",
        "spec.nfs.subDirectory",
    ]


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({}, "spec"),
        ({"nfs": {"server": "a"}, "s3": {"endpoint": "b"}}, "spec"),
        ({"s3": {"endpoint": "b"}}, "spec.s3"),
        ({"nfs": {}}, "spec.nfs.server"),
        ({"nfs": {"server": "a", "share": "rel"}}, "spec.nfs.share"),
        ({"nfs": {"server": "a", "mountPermissions": "rwx"}}, "spec.nfs.mountPermissions"),
    ],
)
def test_persistent_volume_type_refusals(spec: JSONObj, path: str) -> None:
    obj = {"apiVersion": V1, "kind": "InstancePersistentVolumeType", "metadata": {"name": "t"}, "spec": spec}
    with pytest.raises(CompanionError) as err:
        VIEWS["InstancePersistentVolumeType"].to_backing(obj, None)
    assert err.value.errors[0].path == path


def test_an_unlabelled_object_is_not_ours_and_reads_never_raise() -> None:
    for view in VIEWS.values():
        assert not view.owns({"metadata": {"name": "x"}})
        assert (
            view.to_view({"metadata": {"name": "x"}, "data": {AUTHORIZED_KEYS: "%%%"}})["kind"]
            == view.api.kind
        )
