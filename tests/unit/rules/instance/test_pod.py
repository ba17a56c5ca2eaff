"""The Pod an Instance runs as: what Kueue, the Pod webhook, the device plugin and the kubelet will see."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.quantity import Quantity
from gpustack_operator.rules.instance.pod import (
    MAIN,
    SSH_KEY_MOUNT_PATH,
    SSHD,
    PodSettings,
    RenderError,
    render_pod,
    required_objects,
)
from gpustack_operator.rules.naming.queues import format_local_queue_name
from gpustack_operator.rules.slicing.pods import (
    mixed_modes_problem,
    repeated_card_requests,
    sliced_defaults,
    sliced_problems,
)

ENTRANCE = format_local_queue_name("nvidia-h100")
OVERCOMMIT = PodSettings(overcommit=True, ssh_server_image="gpustack/ssh-server:v1.3.0")
EXACT = PodSettings(overcommit=False, ssh_server_image="gpustack/ssh-server:v1.3.0")


def instance(**spec: Any) -> JSONObj:
    """An Instance as the Instance webhook leaves it: 2 H100 cards, an ephemeral workspace."""
    base: JSONObj = {
        "type": "nvidia-h100",
        "image": "pytorch/pytorch:2.4",
        "imagePullPolicy": "IfNotPresent",
        "volumeMount": "/workspace",
        "resources": {"cpu": "16", "ram": "64Gi", "localStorage": "15Gi", "accelerator": "2"},
        "volume": {"ephemeral": {"capacity": "100Gi"}},
    }
    base.update(spec)
    return {
        "apiVersion": "worker.gpustack.ai/v1alpha1",
        "kind": "Instance",
        "metadata": {"name": "alice-ws", "namespace": "team-a", "uid": "3f1c-uid"},
        "spec": base,
    }


def h100(**spec: Any) -> JSONObj:
    """A derived whole-card NVIDIA type with its queue entrance reported."""
    base: JSONObj = {
        "acceleratable": True,
        "acceleratorGroup": "nvidia-h100",
        "os": "linux",
        "arch": "amd64",
        "unitResources": {"cpu": "8", "ram": "32Gi"},
        "localStorage": "200Gi",
    }
    base.update(spec)
    return {
        "metadata": {"name": "nvidia-h100"},
        "spec": base,
        "status": {"phase": "Active", "entrance": ENTRANCE},
    }


def sliceable_a10() -> JSONObj:
    """An NVIDIA type whose cards slice (logical slicing, 128 per card)."""
    kind = h100(
        acceleratorGroup="nvidia-a10", manufacturer="nvidia", feature={"logicalSliced": {"maxSize": 128}}
    )
    kind["metadata"]["name"] = "nvidia-a10"
    return kind


def cpu_only() -> JSONObj:
    return {
        "metadata": {"name": "gpustack--generic"},
        "spec": {
            "acceleratable": False,
            "generalGroup": "generic",
            "os": "linux",
            "arch": "amd64",
            "unitResources": {"cpu": "1", "ram": "2Gi"},
            "localStorage": "50Gi",
        },
        "status": {"phase": "Active", "entrance": format_local_queue_name("gpustack--generic")},
    }


def containers(pod: Mapping[str, Any]) -> dict[str, JSONObj]:
    return {c["name"]: c for c in pod["spec"]["containers"]}


def main_resources(pod: Mapping[str, Any]) -> Any:
    return containers(pod)[MAIN]["resources"]


def volume(pod: Mapping[str, Any], name: str) -> JSONObj:
    return next(v for v in pod["spec"]["volumes"] if v["name"] == name)


# --- the Pod's identity: queue, labels, owner ----------------------------------------------------------


def test_pod_is_named_queued_and_owned_like_its_instance() -> None:
    pod = render_pod(instance(), h100(), OVERCOMMIT)
    assert (pod["apiVersion"], pod["kind"]) == ("v1", "Pod")
    assert (pod["metadata"]["name"], pod["metadata"]["namespace"]) == ("alice-ws", "team-a")
    assert pod["metadata"]["labels"] == {
        "kueue.x-k8s.io/queue-name": ENTRANCE,
        "resource.gpustack.ai/type": "instances",
        "resource.gpustack.ai/instance-uid": "3f1c-uid",
    }
    assert pod["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "worker.gpustack.ai/v1alpha1",
            "kind": "Instance",
            "name": "alice-ws",
            "uid": "3f1c-uid",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert pod["spec"]["restartPolicy"] == "Always"
    assert "tolerations" not in pod["spec"]
    assert "nodeSelector" not in pod["spec"]


def test_queue_falls_back_to_the_type_name_before_the_entrance_is_reported() -> None:
    kind = h100()
    del kind["status"]
    pod = render_pod(instance(), kind, OVERCOMMIT)
    assert pod["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == ENTRANCE


# --- main's resources ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "kind", "pod_settings", "limits", "requests"),
    [
        pytest.param(
            {},
            h100(),
            EXACT,
            {"cpu": "16", "memory": "64Gi", "ephemeral-storage": "15Gi", "nvidia.com/gpu": "2"},
            {"cpu": "16", "memory": "64Gi", "ephemeral-storage": "15Gi", "nvidia.com/gpu": "2"},
            id="two whole H100 cards, no overcommit: requests are the limits",
        ),
        pytest.param(
            {},
            h100(),
            OVERCOMMIT,
            {"cpu": "16", "memory": "64Gi", "ephemeral-storage": "15Gi", "nvidia.com/gpu": "2"},
            {"cpu": "1600m", "memory": "8Gi", "ephemeral-storage": "1920Mi", "nvidia.com/gpu": "2"},
            id="two whole H100 cards, overcommit: 100m per core, an eighth of memory and storage",
        ),
        pytest.param(
            {
                "resources": {
                    "cpu": "2",
                    "ram": "8Gi",
                    "localStorage": "15Gi",
                    "accelerator": "1",
                    "acceleratorSlicedMemoryPercentage": 25,
                    "acceleratorSlicedCoresPercentage": 50,
                }
            },
            sliceable_a10(),
            EXACT,
            {
                "cpu": "2",
                "memory": "8Gi",
                "ephemeral-storage": "15Gi",
                "nvidia.com/gpu.sliced": "1",
                "nvidia.com/gpu.sliced.memory-percentage": "25",
                "nvidia.com/gpu.sliced.cores-percentage": "50",
            },
            {
                "cpu": "2",
                "memory": "8Gi",
                "ephemeral-storage": "15Gi",
                "nvidia.com/gpu.sliced": "1",
                "nvidia.com/gpu.sliced.memory-percentage": "25",
                "nvidia.com/gpu.sliced.cores-percentage": "50",
            },
            id="a slice of 25% VRAM and 50% compute",
        ),
        pytest.param(
            {"resources": {"cpu": "4", "ram": "8Gi", "localStorage": "10Gi"}},
            cpu_only(),
            OVERCOMMIT,
            {"cpu": "4", "memory": "8Gi", "ephemeral-storage": "10Gi"},
            {"cpu": "3200m", "memory": "1Gi", "ephemeral-storage": "1280Mi"},
            id="CPU-only, overcommit: 800m per core, no accelerator",
        ),
        pytest.param(
            {"resources": {"cpu": "500m", "ram": "1Gi", "localStorage": "1Gi"}},
            cpu_only(),
            OVERCOMMIT,
            {"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "1Gi"},
            {"cpu": "500m", "memory": "128Mi", "ephemeral-storage": "128Mi"},
            id="CPU-only half a core: the request never exceeds the limit",
        ),
        pytest.param(
            {"resources": {"cpu": "8", "ram": "32Gi", "localStorage": "15Gi", "accelerator": "1"}},
            h100(acceleratorGroup="acme-x1", manufacturer="amd"),
            EXACT,
            {"cpu": "8", "memory": "32Gi", "ephemeral-storage": "15Gi", "amd.com/gpu": "1"},
            {"cpu": "8", "memory": "32Gi", "ephemeral-storage": "15Gi", "amd.com/gpu": "1"},
            id="spec.manufacturer names the resource even when the group says otherwise",
        ),
        pytest.param(
            {
                "resources": {
                    "cpu": "8",
                    "ram": "32Gi",
                    "localStorage": "15Gi",
                    "accelerator": "1",
                    "acceleratorSlicedMemoryPercentage": 25,
                }
            },
            h100(),
            EXACT,
            {"cpu": "8", "memory": "32Gi", "ephemeral-storage": "15Gi", "nvidia.com/gpu": "1"},
            {"cpu": "8", "memory": "32Gi", "ephemeral-storage": "15Gi", "nvidia.com/gpu": "1"},
            id="a percentage on a type whose cards do not slice asks for the whole card (as the webhook did)",
        ),
        pytest.param(
            {"resources": {"cpu": "8", "ram": "32Gi", "localStorage": "15Gi", "accelerator": "0"}},
            h100(),
            EXACT,
            {"cpu": "8", "memory": "32Gi", "ephemeral-storage": "15Gi"},
            {"cpu": "8", "memory": "32Gi", "ephemeral-storage": "15Gi"},
            id="zero cards on an accelerated type asks for no accelerator",
        ),
    ],
)
def test_main_asks_for(
    spec: JSONObj, kind: JSONObj, pod_settings: PodSettings, limits: JSONObj, requests: JSONObj
) -> None:
    resources = main_resources(render_pod(instance(**spec), kind, pod_settings))
    assert resources == {"limits": limits, "requests": requests}


def test_a_sliced_pod_passes_the_pod_webhook_fold() -> None:
    """The Pod webhook folds the percentages into units; nothing the instance asks for is refused."""
    spec = {
        "resources": {
            "cpu": "2",
            "ram": "8Gi",
            "localStorage": "15Gi",
            "accelerator": "1",
            "acceleratorSlicedMemoryPercentage": 25,
            "acceleratorSlicedCoresPercentage": 50,
        },
        "sshPublicKey": {"name": "alice-key"},
    }
    pod = render_pod(instance(**spec), sliceable_a10(), OVERCOMMIT)
    names = [list(c["resources"].get("limits", {})) for c in pod["spec"]["containers"]]
    main = {k: Quantity.parse(v) for k, v in main_resources(pod)["limits"].items()}
    assert sliced_problems(main, "nvidia.com/gpu") == []
    assert sliced_defaults(main, "nvidia.com/gpu", None) == {"nvidia.com/gpu.sliced.units": Quantity(400_000)}
    assert mixed_modes_problem(names) is None
    assert repeated_card_requests(names) == []


# --- main's other fields ------------------------------------------------------------------------------


def test_main_runs_the_users_image_command_env_ports_and_workspace() -> None:
    spec = {
        "command": ["sleep", "infinity"],
        "privileged": True,
        "imagePullPolicy": "Always",
        "env": [{"name": "HF_HOME", "value": "/workspace/hf"}, {"name": "EMPTY"}],
        "ports": [{"port": 8888, "protocol": "TCP", "name": "jupyter"}, {"port": 5353, "protocol": "UDP"}],
        "volumeMount": "/data",
    }
    pod = render_pod(instance(**spec), h100(), OVERCOMMIT)
    main = containers(pod)[MAIN]
    assert main["image"] == "pytorch/pytorch:2.4"
    assert main["imagePullPolicy"] == "Always"
    assert main["command"] == ["sleep", "infinity"]
    assert main["securityContext"] == {"privileged": True}
    assert main["env"] == [{"name": "HF_HOME", "value": "/workspace/hf"}, {"name": "EMPTY", "value": ""}]
    assert main["ports"] == [
        {"containerPort": 8888, "protocol": "TCP", "name": "jupyter"},
        {"containerPort": 5353, "protocol": "UDP", "name": "udp-5353"},
    ]
    assert main["volumeMounts"] == [{"name": "workspace", "mountPath": "/data"}]
    assert [c["name"] for c in pod["spec"]["containers"]] == [MAIN]


def test_an_unprivileged_instance_gets_no_security_context() -> None:
    main = containers(render_pod(instance(privileged=False), h100(), OVERCOMMIT))[MAIN]
    assert "securityContext" not in main


@pytest.mark.parametrize(
    ("volume_spec", "expected"),
    [
        pytest.param(
            {"ephemeral": {"capacity": "100Gi"}},
            {"name": "workspace", "emptyDir": {"sizeLimit": "100Gi"}},
            id="ephemeral: an emptyDir of the capacity, no provisioner needed",
        ),
        pytest.param(
            {"persistent": {"name": "alice-data"}},
            {"name": "workspace", "persistentVolumeClaim": {"claimName": "alice-data"}},
            id="persistent: the named claim",
        ),
    ],
)
def test_workspace_volume(volume_spec: JSONObj, expected: JSONObj) -> None:
    assert volume(render_pod(instance(volume=volume_spec), h100(), OVERCOMMIT), "workspace") == expected


def test_image_pull_secret_is_handed_to_the_kubelet() -> None:
    pod = render_pod(instance(imagePullSecret={"name": "registry-cred"}), h100(), OVERCOMMIT)
    assert pod["spec"]["imagePullSecrets"] == [{"name": "registry-cred"}]
    assert "imagePullSecrets" not in render_pod(instance(), h100(), OVERCOMMIT)["spec"]


# --- the SSH sidecar -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "kind", "visibility"),
    [
        pytest.param(
            {}, h100(), {"device.gpustack.ai/nvidia.visibility": "2"}, id="two whole cards: sees both"
        ),
        pytest.param(
            {
                "resources": {
                    "cpu": "2",
                    "ram": "8Gi",
                    "localStorage": "15Gi",
                    "accelerator": "1",
                    "acceleratorSlicedMemoryPercentage": 25,
                }
            },
            sliceable_a10(),
            {"device.gpustack.ai/nvidia.visibility": "1"},
            id="a slice: sees its one card",
        ),
        pytest.param(
            {"resources": {"cpu": "2", "ram": "4Gi", "localStorage": "10Gi"}},
            cpu_only(),
            None,
            id="CPU-only: no card to see",
        ),
    ],
)
def test_ssh_sidecar_sees_mains_cards(spec: JSONObj, kind: JSONObj, visibility: JSONObj | None) -> None:
    pod = render_pod(instance(sshPublicKey={"name": "alice-key"}, **spec), kind, OVERCOMMIT)
    assert [c["name"] for c in pod["spec"]["containers"]] == [MAIN, SSHD]
    sshd = containers(pod)[SSHD]
    expected = None if visibility is None else {"limits": visibility, "requests": visibility}
    assert sshd.get("resources") == expected
    assert sshd["image"] == "gpustack/ssh-server:v1.3.0"
    assert sshd["ports"] == [{"containerPort": 22, "protocol": "TCP", "name": "ssh"}]
    assert pod["spec"]["shareProcessNamespace"] is True


def test_ssh_sidecar_reads_the_key_secret_read_only() -> None:
    pod = render_pod(instance(sshPublicKey={"name": "alice-key"}), h100(), OVERCOMMIT)
    sshd = containers(pod)[SSHD]
    assert {"name": "ssh-public-key", "mountPath": SSH_KEY_MOUNT_PATH, "readOnly": True} in sshd[
        "volumeMounts"
    ]
    assert volume(pod, "ssh-public-key")["secret"]["secretName"] == "alice-key"
    assert {"name": "VOLUME_MOUNT_PATH", "value": "/workspace"} in sshd["env"]
    assert "shareProcessNamespace" not in render_pod(instance(), h100(), OVERCOMMIT)["spec"]


# --- refusals ------------------------------------------------------------------------------------------


def _without(path: str) -> Callable[[JSONObj, JSONObj], None]:
    def edit(inst: JSONObj, _: JSONObj) -> None:
        *parents, leaf = path.split(".")
        node = inst
        for key in parents:
            node = node[key]
        del node[leaf]

    return edit


def _set(target: str, path: str, value: Any) -> Callable[[JSONObj, JSONObj], None]:
    def edit(inst: JSONObj, kind: JSONObj) -> None:
        *parents, leaf = path.split(".")
        node = inst if target == "instance" else kind
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value

    return edit


def _no_queue(_: JSONObj, kind: JSONObj) -> None:
    del kind["status"]
    del kind["metadata"]


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        pytest.param(_without("spec.image"), "spec.image", id="no image"),
        pytest.param(_without("metadata.uid"), "metadata.uid", id="no uid to own the Pod by"),
        pytest.param(_without("spec.volume"), "spec.volume", id="no workspace volume"),
        pytest.param(
            _set("instance", "spec.volume.persistent", {"name": "x"}),
            "spec.volume",
            id="two workspace volumes",
        ),
        pytest.param(
            _set("instance", "spec.resources.accelerator", "1500m"),
            "spec.resources.accelerator",
            id="a card and a half",
        ),
        pytest.param(
            _set("instance", "spec.resources.ram", "lots"), "spec.resources.ram", id="unparsable quantity"
        ),
        pytest.param(
            _set("instance", "spec.resources.cpu", "-2"), "spec.resources.cpu", id="negative quantity"
        ),
        pytest.param(
            _set("instance", "spec.ports", [{"port": 80, "name": "Not_A_Name"}]),
            "spec.ports[0].name",
            id="port name kube would refuse",
        ),
        pytest.param(
            _set("instance", "spec.ports", [{"port": 80, "name": "web"}, {"port": 81, "name": "web"}]),
            "spec.ports[1].name",
            id="two ports of one name",
        ),
        pytest.param(_set("instance", "spec.ports", [{"port": 0}]), "spec.ports[0].port", id="port 0"),
        pytest.param(
            _set("type", "spec.acceleratorGroup", "acme-x1"), "acceleratorGroup", id="unknown manufacturer"
        ),
        pytest.param(
            _set("type", "spec.acceleratable", False),
            "spec.resources.accelerator",
            id="cards from a CPU-only type",
        ),
        pytest.param(_no_queue, "entrance", id="no entrance and no type name"),
        pytest.param(
            _set("instance", "spec.resources.acceleratorSlicedMemoryPercentage", 150),
            "acceleratorSlicedMemoryPercentage",
            id="150 percent",
        ),
    ],
)
def test_impossible_input_is_refused_naming_the_field(
    edit: Callable[[JSONObj, JSONObj], None], named: str
) -> None:
    inst, kind = instance(), h100()
    edit(inst, kind)
    with pytest.raises(RenderError, match=named.replace("[", r"\[").replace("]", r"\]")):
        render_pod(inst, kind, OVERCOMMIT)


def test_rendering_leaves_its_inputs_alone() -> None:
    inst, kind = instance(sshPublicKey={"name": "k"}), h100()
    before = copy.deepcopy((inst, kind))
    render_pod(inst, kind, OVERCOMMIT)
    assert (inst, kind) == before


# --- required objects ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param({}, [], id="ephemeral workspace, nothing else"),
        pytest.param(
            {
                "volume": {"persistent": {"name": "data"}},
                "imagePullSecret": {"name": "cred"},
                "sshPublicKey": {"name": "key"},
            },
            [("PersistentVolumeClaim", "data"), ("Secret", "cred"), ("Secret", "key")],
            id="claim, pull secret and key",
        ),
        pytest.param({"volume": "nonsense", "sshPublicKey": ["x"]}, [], id="malformed fields need nothing"),
    ],
)
def test_required_objects(spec: JSONObj, expected: list[tuple[str, str]]) -> None:
    assert required_objects(instance(**spec)) == expected


# --- malformed input never escapes as anything but RenderError -----------------------------------------

_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.text(max_size=12)
    | st.sampled_from(["1", "2Gi", "-1", "1e999", "1.5"]),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=8,
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(node, dict):
        for key, child in node.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(node, list):
        for i, child in enumerate(node):
            found += _paths(child, (*prefix, i))
    return found


def _replace(doc: JSONObj, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return doc


_BASE_INSTANCE = instance(sshPublicKey={"name": "k"}, ports=[{"port": 80}], env=[{"name": "A", "value": "b"}])
_BASE_TYPE = h100()


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_malformed_input_yields_a_pod_or_a_render_error(data: st.DataObject) -> None:
    inst, kind = copy.deepcopy(_BASE_INSTANCE), copy.deepcopy(_BASE_TYPE)
    for _ in range(data.draw(st.integers(1, 3))):
        on_instance = data.draw(st.booleans())
        doc = inst if on_instance else kind
        path = data.draw(st.sampled_from(_paths(doc)))
        replaced = _replace(doc, path, data.draw(_JSON_VALUES))
        if on_instance:
            inst = replaced
        else:
            kind = replaced
    try:
        pod = render_pod(inst, kind, OVERCOMMIT)
    except RenderError:
        return
    assert isinstance(pod, dict)
    assert pod["kind"] == "Pod"
    assert isinstance(required_objects(inst), list)
