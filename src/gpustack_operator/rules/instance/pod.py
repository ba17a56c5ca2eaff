"""The Pod an Instance runs as (contract §2.6, §4.3; architecture: the SSH sidecar, running-instance stop).

Why this module exists: an Instance is a user's workspace asked for in the user's terms (an image, an
InstanceType, cards or a slice of one, a volume, an SSH key); the reconciler turns it into one Pod that Kueue
queues in the type's LocalQueue, the Pod webhook folds, the device plugin serves and the kubelet runs. The
translation is a pure function of the Instance (already defaulted by the Instance webhook), its
InstanceType and two settings, so it lives here and the reconciler only does the I/O around it. The way
back, the Instance status read from the Pod, is ``rules.instance.status.pod_status``, re-exported here.

Shape of the Pod:

- named and namespaced as the Instance, controlled by it (garbage-collected with it), labelled with the
  LocalQueue (``kueue.x-k8s.io/queue-name``), ``resource.gpustack.ai/type=instances`` and the Instance's
  UID; no tolerations or node selectors: Kueue injects the admitted flavor's node labels and tolerations
  when it lifts its scheduling gate;
- container ``main`` first (the kubelet allocates devices in container order and the allocator pairs the
  sidecar's visibility grant with main's cards), with the accelerator, the general resources, the ports,
  env, command and the workspace volume;
- with an SSH key, container ``sshd`` (settings ``instance-ssh-server-image``) that nsenters into main
  (hence ``shareProcessNamespace`` and the SYS_ADMIN/SYS_PTRACE capabilities), requesting
  ``device.gpustack.ai/<mfr>.visibility`` for main's card count so it sees the same cards, and reading the
  public keys from the Secret mounted read-only at ``/var/run/sshd-authorized-keys`` (where the
  gpustack/ssh-server image looks for them; it also reads ``VOLUME_MOUNT_PATH``, the workspace path);
- no service-account token and no service-link env: a workspace runs a user's image, which has no business
  with the namespace's API credentials;
- the built-in sidecar's image placed by ``container-registry``/``container-namespace``, its pull policy
  ``image-pull-policy``, and ``image-pull-secrets`` added to the Pod's pull secrets (rules.instance.access;
  the user's own image is never rewritten);
- ``runtimeClassName``: the RuntimeClass the card manufacturer names (contract §5.1; NVIDIA's ``nvidia``),
  when that RuntimeClass exists (the original's rule: kube-apiserver refuses a Pod naming a missing one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from gpustack_operator.api.json import JSONObj, as_mapping
from gpustack_operator.api.keys import (
    INSTANCE_UID_LABEL,
    KIND_INSTANCE,
    KUEUE_QUEUE_NAME_LABEL,
    RESOURCE_TYPE_INSTANCES,
    RESOURCE_TYPE_LABEL,
    V1ALPHA1,
    WORKER_GROUP,
)
from gpustack_operator.rules.instance.access import builtin_image
from gpustack_operator.rules.instance.input import RenderError, mapping, quantity, sequence, text
from gpustack_operator.rules.instance.resources import Accelerator, accelerator, resource_requirements
from gpustack_operator.rules.instance.status import pod_status
from gpustack_operator.rules.naming.manufacturers import manufacturer
from gpustack_operator.rules.naming.queues import format_local_queue_name

__all__ = [
    "INSTANCE_POD_LABEL_VALUE",
    "MAIN",
    "SSHD",
    "PodSettings",
    "RenderError",
    "pod_status",
    "render_pod",
    "required_objects",
    "runtime_class_of",
]


INSTANCE_POD_LABEL_VALUE: Final = RESOURCE_TYPE_INSTANCES
MAIN: Final = "main"
SSHD: Final = "sshd"
WORKSPACE_VOLUME: Final = "workspace"
SSH_KEY_VOLUME: Final = "ssh-public-key"
SSH_KEY_MOUNT_PATH: Final = "/var/run/sshd-authorized-keys"
"""Where the gpustack/ssh-server sidecar reads the authorized public keys."""
SSH_KEY_FILE_MODE: Final = 0o600
SSH_PORT: Final = 22
SSH_PORT_NAME: Final = "ssh"
SSH_CAPABILITIES: Final = ("SYS_ADMIN", "SYS_PTRACE")
"""What nsenter needs to enter another container's namespaces."""
DEFAULT_VOLUME_MOUNT: Final = "/workspace"
"""The Instance webhook's default, for a spec that has not been through it."""
_PROTOCOLS: Final = frozenset({"TCP", "UDP", "SCTP"})
_PORT_NAME_MAX: Final = 15
"""A container port name is an IANA service name: at most 15 characters."""


@dataclass(frozen=True)
class PodSettings:
    """The settings that shape an Instance's Pod."""

    overcommit: bool
    """``instance-general-resources-overcommit``: request a fraction of the general limits."""
    ssh_server_image: str
    """``instance-ssh-server-image``: the SSH sidecar's image."""
    container_registry: str = ""
    """``container-registry``: the registry of the built-in images (rules.instance.access)."""
    container_namespace: str = ""
    """``container-namespace``: the namespace (first path element) of the built-in images."""
    image_pull_secrets: tuple[str, ...] = ()
    """``image-pull-secrets``: Secrets added to the Pod's ``imagePullSecrets``."""
    image_pull_policy: str = ""
    """``image-pull-policy``: the built-in containers' pull policy ("": the Instance's)."""
    runtime_classes: frozenset[str] = frozenset()
    """RuntimeClasses that exist: the manufacturer's (contract §5.1) is set on the Pod only when it does,
    since kube-apiserver refuses a Pod naming a missing one."""


def _queue_name(instance_type: Mapping[str, Any]) -> str:
    entrance = text(mapping(instance_type.get("status"), "status").get("entrance"), "status.entrance")
    if entrance:
        return entrance
    name = text(mapping(instance_type.get("metadata"), "metadata").get("name"), "metadata.name")
    if not name:
        raise RenderError("the InstanceType has neither status.entrance nor metadata.name: no queue to join")
    return format_local_queue_name(name)


def _port_name(port: int, protocol: str, name: str, field: str) -> str:
    if not name:
        return f"{protocol.lower()}-{port}"
    valid = (
        len(name) <= _PORT_NAME_MAX
        and name[0].isalnum()
        and name[-1].isalnum()
        and all(c.isdigit() or c == "-" or ("a" <= c <= "z") for c in name)
        and any("a" <= c <= "z" for c in name)
        and "--" not in name
    )
    if not valid:
        raise RenderError(
            f"{field}: {name!r} is not a port name (at most 15 lower-case letters, digits and '-')"
        )
    return name


def _ports(spec: Mapping[str, Any]) -> list[JSONObj]:
    ports: list[JSONObj] = []
    names: set[str] = set()
    for i, item in enumerate(sequence(spec.get("ports"), "spec.ports")):
        field = f"spec.ports[{i}]"
        entry = mapping(item, field)
        number = entry.get("port")
        if not isinstance(number, int) or isinstance(number, bool) or not 0 < number < 65536:
            raise RenderError(f"{field}.port: want a port number in [1, 65535], got {number!r}")
        protocol = text(entry.get("protocol"), f"{field}.protocol") or "TCP"
        if protocol not in _PROTOCOLS:
            raise RenderError(f"{field}.protocol: want TCP, UDP or SCTP, got {protocol!r}")
        name = _port_name(number, protocol, text(entry.get("name"), f"{field}.name"), f"{field}.name")
        if name in names:
            raise RenderError(f"{field}.name: {name!r} names two ports")
        names.add(name)
        ports.append({"containerPort": number, "protocol": protocol, "name": name})
    return ports


def _env(spec: Mapping[str, Any]) -> list[JSONObj]:
    env: list[JSONObj] = []
    for i, item in enumerate(sequence(spec.get("env"), "spec.env")):
        entry = mapping(item, f"spec.env[{i}]")
        name = text(entry.get("name"), f"spec.env[{i}].name")
        if not name:
            raise RenderError(f"spec.env[{i}].name is required")
        env.append({"name": name, "value": text(entry.get("value"), f"spec.env[{i}].value")})
    return env


def _workspace(spec: Mapping[str, Any]) -> JSONObj:
    volume = mapping(spec.get("volume"), "spec.volume")
    ephemeral = mapping(volume.get("ephemeral"), "spec.volume.ephemeral")
    persistent = mapping(volume.get("persistent"), "spec.volume.persistent")
    if bool(ephemeral) == bool(persistent):
        raise RenderError("spec.volume: want exactly one of ephemeral or persistent")
    if ephemeral:
        capacity = quantity(ephemeral.get("capacity"), "spec.volume.ephemeral.capacity")
        if capacity is None or capacity <= 0:
            raise RenderError("spec.volume.ephemeral.capacity: want a positive quantity")
        return {"name": WORKSPACE_VOLUME, "emptyDir": {"sizeLimit": str(capacity)}}
    claim = text(persistent.get("name"), "spec.volume.persistent.name")
    if not claim:
        raise RenderError("spec.volume.persistent.name is required")
    return {"name": WORKSPACE_VOLUME, "persistentVolumeClaim": {"claimName": claim}}


def _reference(spec: Mapping[str, Any], key: str) -> str:
    """The name in a LocalObjectReference field ("" when unset)."""
    return text(mapping(spec.get(key), f"spec.{key}").get("name"), f"spec.{key}.name")


def _main(spec: Mapping[str, Any], requirements: JSONObj, pull_policy: str, mount_path: str) -> JSONObj:
    image = text(spec.get("image"), "spec.image")
    if not image:
        raise RenderError("spec.image is required")
    container: JSONObj = {"name": MAIN, "image": image}
    if pull_policy:
        container["imagePullPolicy"] = pull_policy
    command = [text(arg, "spec.command[]") for arg in sequence(spec.get("command"), "spec.command")]
    if command:
        container["command"] = command
    privileged = spec.get("privileged")
    if privileged is not None and not isinstance(privileged, bool):
        raise RenderError(f"spec.privileged: want true or false, got {privileged!r}")
    if privileged:
        container["securityContext"] = {"privileged": True}
    if ports := _ports(spec):
        container["ports"] = ports
    if env := _env(spec):
        container["env"] = env
    container["resources"] = requirements
    container["volumeMounts"] = [{"name": WORKSPACE_VOLUME, "mountPath": mount_path}]
    return container


def _sshd(settings: PodSettings, pull_policy: str, mount_path: str, cards: Accelerator | None) -> JSONObj:
    if not settings.ssh_server_image:
        raise RenderError("setting instance-ssh-server-image is empty: no SSH sidecar image")
    image = builtin_image(
        settings.ssh_server_image,
        registry=settings.container_registry,
        namespace=settings.container_namespace,
    )
    pull_policy = settings.image_pull_policy or pull_policy
    container: JSONObj = {"name": SSHD, "image": image}
    if pull_policy:
        container["imagePullPolicy"] = pull_policy
    container |= {
        "stdin": True,
        "tty": True,
        "securityContext": {"capabilities": {"add": list(SSH_CAPABILITIES)}},
        "ports": [{"containerPort": SSH_PORT, "protocol": "TCP", "name": SSH_PORT_NAME}],
        "env": [{"name": "VOLUME_MOUNT_PATH", "value": mount_path}],
        "volumeMounts": [{"name": SSH_KEY_VOLUME, "mountPath": SSH_KEY_MOUNT_PATH, "readOnly": True}],
    }
    if cards is not None:
        visible = {cards.visibility_resource: str(cards.visible_cards)}
        container["resources"] = {"limits": visible, "requests": dict(visible)}
    return container


def _no_ssh_clash(main: Mapping[str, Any]) -> None:
    """main may not take the sidecar's port (the Pod's containers share one network) nor its name."""
    for entry in main.get("ports") or ():
        if entry["name"] == SSH_PORT_NAME or (entry["containerPort"], entry["protocol"]) == (SSH_PORT, "TCP"):
            raise RenderError(
                f"spec.ports: port {entry['containerPort']}/{entry['protocol']} ({entry['name']}) clashes "
                f"with the SSH sidecar's {SSH_PORT}/TCP ({SSH_PORT_NAME}) that spec.sshPublicKey adds"
            )


def runtime_class_of(cards: Accelerator | None) -> str:
    """The RuntimeClass the manufacturer of main's cards names (contract §5.1; "" for none or CPU-only)."""
    if cards is None:
        return ""
    known = manufacturer(cards.manufacturer)
    return known.runtime_class if known is not None else ""


def _runtime_class(cards: Accelerator | None, existing: frozenset[str]) -> str:
    wanted = runtime_class_of(cards)
    return wanted if wanted in existing else ""


def _owner(metadata: Mapping[str, Any]) -> tuple[str, str, str]:
    """(name, namespace, uid) of the Instance; all three are needed to own a Pod."""
    values = tuple(text(metadata.get(key), f"metadata.{key}") for key in ("name", "namespace", "uid"))
    for key, value in zip(("name", "namespace", "uid"), values, strict=True):
        if not value:
            raise RenderError(f"metadata.{key} of the Instance is required")
    return values[0], values[1], values[2]


def render_pod(
    instance: Mapping[str, Any], instance_type: Mapping[str, Any], settings: PodSettings
) -> JSONObj:
    """The v1 Pod that runs ``instance`` (defaulted by the Instance webhook) of ``instance_type``.

    Resources of ``main``: limits are the spec's cpu, ram (memory) and localStorage (ephemeral-storage);
    requests are described in ``rules.instance.resources.resource_requirements``. The accelerator goes into
    limits and requests alike: whole cards as ``<base>: n``, a slice as ``<base>.sliced: 1`` with its
    memory and cores percentages (the Pod webhook folds them into ``.sliced.units``).
    Raises RenderError, naming the field, on input no valid Pod can be made of.
    """
    instance, instance_type = mapping(instance, "Instance"), mapping(instance_type, "InstanceType")
    name, namespace, uid = _owner(mapping(instance.get("metadata"), "metadata"))
    spec = mapping(instance.get("spec"), "spec")
    resources = mapping(spec.get("resources"), "spec.resources")
    cards = accelerator(resources, instance_type)
    requirements = resource_requirements(resources, instance_type, cards, overcommit=settings.overcommit)
    pull_policy = text(spec.get("imagePullPolicy"), "spec.imagePullPolicy")
    mount_path = text(spec.get("volumeMount"), "spec.volumeMount") or DEFAULT_VOLUME_MOUNT
    containers = [_main(spec, requirements, pull_policy, mount_path)]
    volumes = [_workspace(spec)]
    pod_spec: JSONObj = {
        "restartPolicy": "Always",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
    }
    if ssh_key := _reference(spec, "sshPublicKey"):
        _no_ssh_clash(containers[0])
        containers.append(_sshd(settings, pull_policy, mount_path, cards))
        volumes.append(
            {"name": SSH_KEY_VOLUME, "secret": {"secretName": ssh_key, "defaultMode": SSH_KEY_FILE_MODE}}
        )
        pod_spec["shareProcessNamespace"] = True
    pull_secrets = [_reference(spec, "imagePullSecret"), *settings.image_pull_secrets]
    if pull_secrets := list(dict.fromkeys(name for name in pull_secrets if name)):
        pod_spec["imagePullSecrets"] = [{"name": name} for name in pull_secrets]
    if runtime_class := _runtime_class(cards, settings.runtime_classes):
        pod_spec["runtimeClassName"] = runtime_class
    pod_spec |= {"containers": containers, "volumes": volumes}
    labels = {
        KUEUE_QUEUE_NAME_LABEL: _queue_name(instance_type),
        RESOURCE_TYPE_LABEL: INSTANCE_POD_LABEL_VALUE,
        INSTANCE_UID_LABEL: uid,
    }
    owner = {
        "apiVersion": f"{WORKER_GROUP}/{V1ALPHA1}",
        "kind": KIND_INSTANCE,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    metadata = {"name": name, "namespace": namespace, "labels": labels, "ownerReferences": [owner]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}


def required_objects(instance: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(kind, name) of the namespace's objects the Pod cannot start without; never raises.

    The PersistentVolumeClaim of a persistent workspace, the image pull Secret and the SSH key Secret.
    """
    spec = as_mapping(instance).get("spec")
    if not isinstance(spec, Mapping):
        return []
    wanted = [
        ("PersistentVolumeClaim", _loose_name(as_mapping(spec.get("volume")).get("persistent"))),
        ("Secret", _loose_name(spec.get("imagePullSecret"))),
        ("Secret", _loose_name(spec.get("sshPublicKey"))),
    ]
    return [(kind, name) for kind, name in wanted if name]


def _loose_name(reference: object) -> str:
    name = as_mapping(reference).get("name")
    return name if isinstance(name, str) else ""
