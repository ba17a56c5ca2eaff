"""The settings an Instance's Pod, Service and status obey: built-in images, pull secrets and policy, the
RuntimeClass, the NodePort Service and where a user connects (contract §6, §2.6, §5.1)."""

from __future__ import annotations

import dataclasses

import pytest

from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import INSTANCE_UID_LABEL
from gpustack_operator.rules.instance.access import (
    access_addresses,
    builtin_image,
    node_address,
    pull_secret_names,
)
from gpustack_operator.rules.instance.pod import PodSettings, RenderError, render_pod
from gpustack_operator.rules.instance.service import render_service, serves_pod
from gpustack_operator.rules.instance.spec import validate_privileges
from gpustack_operator.rules.instance.status import Access, pod_status
from tests.unit.rules.instance.test_pod import containers, cpu_only, h100, instance

SSH_IMAGE = "gpustack/ssh-server:v1.3.0"
PLAIN = PodSettings(overcommit=True, ssh_server_image=SSH_IMAGE)
KEY = {"sshPublicKey": {"name": "my-key"}}


@pytest.mark.parametrize(
    ("image", "registry", "namespace", "expected"),
    [
        pytest.param(SSH_IMAGE, "", "", SSH_IMAGE, id="no settings: as is"),
        pytest.param(SSH_IMAGE, "registry.local:5000", "", f"registry.local:5000/{SSH_IMAGE}", id="registry"),
        pytest.param(SSH_IMAGE, "", "mirror", "mirror/ssh-server:v1.3.0", id="namespace replaces the first"),
        pytest.param(
            SSH_IMAGE, "r.io", "mirror", "r.io/mirror/ssh-server:v1.3.0", id="namespace then registry"
        ),
        pytest.param("ssh-server:v1", "", "mirror", "ssh-server:v1", id="no namespace to replace"),
    ],
)
def test_builtin_images_follow_the_registry_and_namespace_settings(
    image: str, registry: str, namespace: str, expected: str
) -> None:
    assert builtin_image(image, registry=registry, namespace=namespace) == expected


def test_pull_secret_names_are_comma_separated() -> None:
    assert pull_secret_names("") == ()
    assert pull_secret_names("a, b,,a ,c") == ("a", "b", "c")


def test_the_image_settings_shape_the_sidecar_and_the_pod_but_never_the_users_image() -> None:
    settings = dataclasses.replace(
        PLAIN,
        container_registry="registry.local:5000",
        container_namespace="mirror",
        image_pull_secrets=("site-creds", "my-creds"),
        image_pull_policy="Always",
    )
    pod = render_pod(instance(imagePullSecret={"name": "my-creds"}, **KEY), h100(), settings)
    by_name = containers(pod)
    assert by_name["sshd"]["image"] == "registry.local:5000/mirror/ssh-server:v1.3.0"
    assert by_name["sshd"]["imagePullPolicy"] == "Always"
    assert by_name["main"]["image"] == "pytorch/pytorch:2.4"
    assert by_name["main"]["imagePullPolicy"] == "IfNotPresent"
    assert pod["spec"]["imagePullSecrets"] == [{"name": "my-creds"}, {"name": "site-creds"}]


def test_without_the_image_settings_the_sidecar_follows_the_instance() -> None:
    pod = render_pod(instance(imagePullPolicy="Never", **KEY), h100(), PLAIN)
    assert containers(pod)["sshd"]["image"] == SSH_IMAGE
    assert containers(pod)["sshd"]["imagePullPolicy"] == "Never"
    assert "imagePullSecrets" not in pod["spec"]


@pytest.mark.parametrize(
    ("kind", "existing", "expected"),
    [
        pytest.param(h100(), {"nvidia"}, "nvidia", id="nvidia names one and it exists"),
        pytest.param(h100(), set(), None, id="missing: not named, kube-apiserver would refuse the Pod"),
        pytest.param(
            h100(acceleratorGroup="thead-ppu", manufacturer="thead"), {"nvidia", ""}, None, id="thead: none"
        ),
        pytest.param(cpu_only(), {"nvidia"}, None, id="CPU-only"),
    ],
)
def test_the_runtime_class_of_the_cards_manufacturer(
    kind: JSONObj, existing: set[str], expected: str | None
) -> None:
    inst = instance()
    if not kind["spec"]["acceleratable"]:
        inst["spec"]["resources"] = {"cpu": "1", "ram": "2Gi", "localStorage": "15Gi"}
    settings = dataclasses.replace(PLAIN, runtime_classes=frozenset(existing))
    assert render_pod(inst, kind, settings)["spec"].get("runtimeClassName") == expected


def test_an_ssh_instance_may_not_take_the_sidecars_port() -> None:
    with pytest.raises(RenderError, match=r"spec\.ports"):
        render_pod(instance(ports=[{"port": 22}], **KEY), h100(), PLAIN)
    with pytest.raises(RenderError, match=r"spec\.ports"):
        render_pod(instance(ports=[{"port": 2222, "name": "ssh"}], **KEY), h100(), PLAIN)


def _created(pod: JSONObj) -> JSONObj:
    pod["metadata"]["uid"] = "pod-uid-1"
    return pod


def test_a_pod_with_ports_gets_a_node_port_service_it_controls() -> None:
    pod = _created(render_pod(instance(ports=[{"port": 8888, "name": "jupyter"}], **KEY), h100(), PLAIN))
    service = render_service(pod)
    assert service is not None
    assert service["metadata"]["name"] == "alice-ws"
    assert service["metadata"]["namespace"] == "team-a"
    assert service["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "alice-ws", "uid": "pod-uid-1", "controller": True}
    ]
    assert service["spec"]["type"] == "NodePort"
    assert service["spec"]["selector"] == {INSTANCE_UID_LABEL: "3f1c-uid"}
    assert pod["metadata"]["labels"][INSTANCE_UID_LABEL] == "3f1c-uid"
    assert service["spec"]["ports"] == [
        {"name": "jupyter", "protocol": "TCP", "port": 8888, "targetPort": 8888},
        {"name": "ssh", "protocol": "TCP", "port": 22, "targetPort": 22},
    ]
    assert serves_pod(service, pod)
    assert not serves_pod(service, {"metadata": {"uid": "a-later-pod"}})


def test_a_pod_without_ports_gets_no_service() -> None:
    assert render_service(_created(render_pod(instance(), h100(), PLAIN))) is None


def _running(pod: JSONObj) -> JSONObj:
    pod["spec"]["nodeName"] = "gpu-node-1"
    pod["status"] = {
        "phase": "Running",
        "hostIP": "10.0.0.7",
        "conditions": [{"type": "Ready", "status": "True"}],
    }
    return pod


NODE = {"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.7"}, {"type": "Hostname"}]}}
SERVICE = {
    "spec": {"ports": [{"name": "ssh", "protocol": "TCP", "port": 22, "targetPort": 22, "nodePort": 30022}]}
}


@pytest.mark.parametrize(
    ("access", "expected"),
    [
        pytest.param(Access(SERVICE, NODE), ["10.0.0.7"], id="the node's address"),
        pytest.param(
            Access(SERVICE, NODE, static_address="gpu.example.com"), ["gpu.example.com"], id="static"
        ),
        pytest.param(
            Access(SERVICE, NODE, wildcard_dns="traefik.me"), ["10-0-0-7.traefik.me"], id="wildcard"
        ),
        pytest.param(
            Access(SERVICE, NODE, static_address="1.2.3.4", wildcard_dns="traefik.me"),
            ["1.2.3.4"],
            id="static wins over wildcard",
        ),
        pytest.param(Access(SERVICE, None), ["10.0.0.7"], id="no node cached: the Pod's host IP"),
    ],
)
def test_where_to_connect(access: Access, expected: list[str]) -> None:
    status = pod_status(_running(render_pod(instance(**KEY), h100(), PLAIN)), instance(**KEY), access)
    assert status["accessAddresses"] == expected
    assert status["ports"] == [{"port": 22, "protocol": "TCP", "name": "ssh", "nodePort": 30022}]


def test_an_unscheduled_pod_has_no_address_yet() -> None:
    status = pod_status(render_pod(instance(), h100(), PLAIN), instance(), Access(static_address="1.2.3.4"))
    assert "accessAddresses" not in status


@pytest.mark.parametrize(
    ("addresses", "expected"),
    [
        (
            [{"type": "InternalIP", "address": "10.0.0.7"}, {"type": "ExternalIP", "address": "8.8.4.4"}],
            "8.8.4.4",
        ),
        ([{"type": "InternalIP", "address": "fd00::7"}], "fd00::7"),
        ([{"type": "Hostname", "address": "n1"}], ""),
    ],
)
def test_a_node_is_reached_at_its_external_ip_first(addresses: list[JSONObj], expected: str) -> None:
    assert node_address({"status": {"addresses": addresses}}) == expected


def test_an_ipv6_host_under_a_wildcard_dns() -> None:
    assert access_addresses(["fd00::7"], static_address="", wildcard_dns="sslip.io") == ["fd00--7.sslip.io"]


def _privileged(value: bool | None) -> JSONObj:
    return instance() if value is None else instance(privileged=value)


@pytest.mark.parametrize(
    ("old", "new", "allowed", "refused"),
    [
        pytest.param(None, True, False, True, id="create privileged, setting false: refused"),
        pytest.param(None, True, True, False, id="create privileged, setting true"),
        pytest.param(None, False, False, False, id="create unprivileged"),
        pytest.param(False, True, False, True, id="taking privileged mode later: refused"),
        pytest.param(True, True, False, False, id="already privileged keeps it when turned off"),
    ],
)
def test_privileged_mode_needs_the_setting(old: bool | None, new: bool, allowed: bool, refused: bool) -> None:
    errors = validate_privileges(
        None if old is None else _privileged(old), _privileged(new), privileged_allowed=allowed
    )
    assert bool(errors) == refused
    if refused:
        (error,) = errors
        assert error.path == "spec.privileged"
        assert '"instance-privileged-allowed"' in error.detail
