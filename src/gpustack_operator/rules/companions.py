"""An Instance's companions as views over the core objects behind them: the conversions both ways.

Design choice. The four kinds an Instance refers to (contract §2.1: InstanceImagePullSecret,
InstanceSSHPublicKey, InstancePersistentVolume in a namespace, InstancePersistentVolumeType cluster-wide)
are not stored anywhere of their own: each is a view over the core object the kubelet already consumes,
of the same name, so the Instance's Pod can name that object directly (rules.instance.pod mounts the
Secret of `spec.sshPublicKey.name`, pulls with the Secret of `spec.imagePullSecret.name` and mounts the
claim of `spec.volume.persistent.name`) and nothing has to be copied or kept in step:

- InstanceImagePullSecret -> a `kubernetes.io/dockerconfigjson` Secret whose `.dockerconfigjson` holds
  the one registry's auths; registry, username, password and email are write-only (never read back);
- InstanceSSHPublicKey -> an Opaque Secret whose `authorized_keys` key holds `data` (the sidecar reads
  every key of the Secret mounted at /var/run/sshd-authorized-keys);
- InstancePersistentVolume -> a PersistentVolumeClaim (`spec.type` is its storageClassName, `capacity` its
  storage request, `accessMode` its one access mode); `status` is the claim's phase and bound volume;
- InstancePersistentVolumeType -> a StorageClass of csi-driver-nfs (`nfs.csi.k8s.io`) for an `nfs` source.

Every object behind a view carries `resource.gpustack.ai/type=<plural>`: that label is what makes it ours,
so a view lists and serves only labelled objects and an unlabelled Secret of the same name is a NotFound
(and a create over it an AlreadyExists), never silently taken over. displayName/description live in
`note.gpustack.ai/` annotations. Metadata otherwise passes through (labels, annotations, owners,
finalizers, resourceVersion, uid), so optimistic concurrency and garbage collection work as on the
object behind. Writes are checked here and refused with field errors naming the view's fields, never
the Secret's; pure functions, no I/O.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from gpustack_operator.api import field
from gpustack_operator.api.json import JSONObj, as_mapping, as_str
from gpustack_operator.api.keys import (
    DESCRIPTION_ANNOTATION,
    DISPLAY_NAME_ANNOTATION,
    RESOURCE_TYPE_IMAGE_PULL_SECRETS,
    RESOURCE_TYPE_LABEL,
    RESOURCE_TYPE_PERSISTENT_VOLUME_TYPES,
    RESOURCE_TYPE_PERSISTENT_VOLUMES,
    RESOURCE_TYPE_SSH_PUBLIC_KEYS,
)
from gpustack_operator.api.quantity import parse_quantity
from gpustack_operator.api.schema.apitype import ApiType
from gpustack_operator.api.schema.companions import (
    IMAGE_PULL_SECRET,
    PERSISTENT_VOLUME,
    PERSISTENT_VOLUME_TYPE,
    SSH_PUBLIC_KEY,
)
from gpustack_operator.api.schema.errors import InvalidObjectError

__all__ = [
    "AUTHORIZED_KEYS",
    "DEFAULT_ACCESS_MODE",
    "DEFAULT_CAPACITY",
    "DOCKER_CONFIG_KEY",
    "NFS_PROVISIONER",
    "VIEWS",
    "CompanionError",
    "View",
]

AUTHORIZED_KEYS: Final = "authorized_keys"
"""The key of an SSH public key's Secret (a file of that name under the sidecar's mount)."""
DOCKER_CONFIG_KEY: Final = ".dockerconfigjson"
DOCKER_CONFIG_TYPE: Final = "kubernetes.io/dockerconfigjson"
DEFAULT_CAPACITY: Final = "20Gi"
DEFAULT_ACCESS_MODE: Final = "ReadWriteOnce"
NFS_PROVISIONER: Final = "nfs.csi.k8s.io"
SSH_KEY_TYPES: Final = frozenset(
    {
        "ssh-ed25519",
        "ssh-rsa",
        "ecdsa-sha2-nistp256",
        "ecdsa-sha2-nistp384",
        "ecdsa-sha2-nistp521",
        "sk-ssh-ed25519@openssh.com",
        "sk-ecdsa-sha2-nistp256@openssh.com",
    }
)
_NOTES: Final = {"displayName": DISPLAY_NAME_ANNOTATION, "description": DESCRIPTION_ANNOTATION}
_META_KEYS: Final = (
    "name",
    "generateName",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "ownerReferences",
    "finalizers",
)
_WRITABLE_META: Final = (
    "name",
    "generateName",
    "namespace",
    "resourceVersion",
    "ownerReferences",
    "finalizers",
)


class CompanionError(ValueError):
    """A write no backing object can be made of; `errors` name the view's fields."""

    def __init__(self, errors: list[field.FieldError]) -> None:
        super().__init__(field.aggregate(errors))
        self.errors = errors


@dataclass(frozen=True)
class View:
    """One companion kind: its schema, the label value that marks its backing objects, and the
    conversions. `to_backing(view, old)` builds the whole backing object (old: the one replaced, None
    on create); `to_view(backing)` the view, never raising on a malformed backing object."""

    api: ApiType[JSONObj]
    label: str
    to_view_body: Callable[[Mapping[str, Any]], JSONObj]
    to_backing_body: Callable[[JSONObj, Mapping[str, Any] | None], JSONObj]

    def owns(self, backing: Mapping[str, Any]) -> bool:
        return (
            as_mapping(as_mapping(backing.get("metadata")).get("labels")).get(RESOURCE_TYPE_LABEL)
            == self.label
        )

    @property
    def selector(self) -> str:
        return f"{RESOURCE_TYPE_LABEL}={self.label}"

    def to_view(self, backing: Mapping[str, Any]) -> JSONObj:
        view: JSONObj = {
            "apiVersion": self.api.api_version,
            "kind": self.api.kind,
            "metadata": _view_metadata(backing),
        }
        return view | self.to_view_body(backing)

    def to_backing(self, view: Mapping[str, Any], old: Mapping[str, Any] | None) -> JSONObj:
        """The backing object for a create (`old` None) or a replace; raises CompanionError."""
        try:
            loaded = self.api.load(view)
        except InvalidObjectError as e:
            raise CompanionError([_schema_error(err.path, err.message) for err in e.errors]) from None
        body = self.to_backing_body(loaded, old)
        body["metadata"] = _backing_metadata(self.label, loaded, old)
        return body


def _schema_error(path: str, message: str) -> field.FieldError:
    if message.startswith("Missing data"):
        return field.required(path)
    return field.FieldError(field.ErrorType.INVALID, path, message)


# ---- metadata ---------------------------------------------------------------------------------------------


def _view_metadata(backing: Mapping[str, Any]) -> JSONObj:
    meta = as_mapping(backing.get("metadata"))
    out: JSONObj = {key: meta[key] for key in _META_KEYS if meta.get(key) not in (None, "", [], {})}
    labels = {k: v for k, v in as_mapping(meta.get("labels")).items() if k != RESOURCE_TYPE_LABEL}
    notes = set(_NOTES.values())
    annotations = {k: v for k, v in as_mapping(meta.get("annotations")).items() if k not in notes}
    if labels:
        out["labels"] = labels
    if annotations:
        out["annotations"] = annotations
    return out


def _backing_metadata(label: str, view: Mapping[str, Any], old: Mapping[str, Any] | None) -> JSONObj:
    meta = as_mapping(view.get("metadata"))
    out: JSONObj = {key: meta[key] for key in _WRITABLE_META if meta.get(key) not in (None, "", [], {})}
    if old is not None and "resourceVersion" not in out:
        version = as_mapping(old.get("metadata")).get("resourceVersion")
        if version:
            out["resourceVersion"] = version
    out["labels"] = {**as_mapping(meta.get("labels")), RESOURCE_TYPE_LABEL: label}
    spec = as_mapping(view.get("spec"))
    annotations = {k: v for k, v in as_mapping(meta.get("annotations")).items() if k not in _NOTES.values()}
    for key, annotation in _NOTES.items():
        if value := as_str(spec.get(key)):
            annotations[annotation] = value
    if annotations:
        out["annotations"] = annotations
    return out


def _notes(backing: Mapping[str, Any]) -> JSONObj:
    annotations = as_mapping(as_mapping(backing.get("metadata")).get("annotations"))
    return {key: annotations[a] for key, a in _NOTES.items() if as_str(annotations.get(a))}


def _decoded(backing: Mapping[str, Any], key: str) -> str:
    raw = as_str(as_mapping(backing.get("data")).get(key))
    try:
        return base64.b64decode(raw, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return ""


def _encoded(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# ---- InstanceImagePullSecret ------------------------------------------------------------------------------

_CREDENTIALS: Final = ("registry", "username", "password")


def _pull_secret_view(backing: Mapping[str, Any]) -> JSONObj:
    return {"spec": _notes(backing)}


def _pull_secret_backing(view: JSONObj, old: Mapping[str, Any] | None) -> JSONObj:
    spec = as_mapping(view.get("spec"))
    given = [key for key in (*_CREDENTIALS, "email") if as_str(spec.get(key))]
    if old is not None and not given:  # a metadata/display edit keeps the credentials
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": DOCKER_CONFIG_TYPE,
            "data": dict(as_mapping(old.get("data"))),
        }
    missing = [
        field.required(f"spec.{key}", "registry, username and password are written together")
        for key in _CREDENTIALS
        if not as_str(spec.get(key))
    ]
    registry = as_str(spec.get("registry"))
    if registry and (any(ch.isspace() for ch in registry) or "/" in registry.split("://", 1)[-1].rstrip("/")):
        missing.append(
            field.invalid("spec.registry", registry, "must be a registry host[:port], e.g. docker.io")
        )
    if missing:
        raise CompanionError(missing)
    username, password = as_str(spec["username"]), as_str(spec["password"])
    entry: JSONObj = {
        "username": username,
        "password": password,
        "auth": _encoded(f"{username}:{password}"),
    }
    if email := as_str(spec.get("email")):
        entry["email"] = email
    config = json.dumps({"auths": {registry: entry}}, separators=(",", ":"))
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": DOCKER_CONFIG_TYPE,
        "data": {DOCKER_CONFIG_KEY: _encoded(config)},
    }


# ---- InstanceSSHPublicKey ---------------------------------------------------------------------------------


def ssh_key_problem(line: str) -> str:
    """Why one authorized_keys line is not a public key ("" when it is one)."""
    parts = line.split()
    if len(parts) < 2:
        return "want `<type> <base64 key> [comment]`"
    kind, blob = parts[0], parts[1]
    if kind not in SSH_KEY_TYPES:
        return f"unknown key type {kind!r} (want one of {', '.join(sorted(SSH_KEY_TYPES))})"
    try:
        raw = base64.b64decode(blob, validate=True)
    except binascii.Error:
        return "the key is not base64"
    if len(raw) < 4:
        return "the key is truncated"
    (length,) = struct.unpack(">I", raw[:4])
    if raw[4 : 4 + length] != kind.encode():
        return f"the key's encoded type does not match {kind!r}"
    return ""


def _ssh_view(backing: Mapping[str, Any]) -> JSONObj:
    return {"data": _decoded(backing, AUTHORIZED_KEYS)}


def _ssh_backing(view: JSONObj, old: Mapping[str, Any] | None) -> JSONObj:
    data = as_str(view.get("data"))
    lines = [line.strip() for line in data.splitlines() if line.strip() and not line.strip().startswith("#")]
    if not lines:
        raise CompanionError([field.required("data", "at least one SSH public key")])
    for number, line in enumerate(lines, 1):
        if problem := ssh_key_problem(line):
            shown = line if len(line) <= 40 else line[:37] + "..."
            raise CompanionError([field.invalid("data", shown, f"key {number}: {problem}")])
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "data": {AUTHORIZED_KEYS: _encoded("\n".join(lines) + "\n")},
    }


# ---- InstancePersistentVolume -----------------------------------------------------------------------------


def _pv_view(backing: Mapping[str, Any]) -> JSONObj:
    spec = as_mapping(backing.get("spec"))
    out: JSONObj = _notes(backing)
    if klass := as_str(spec.get("storageClassName")):
        out["type"] = klass
    if capacity := as_mapping(as_mapping(spec.get("resources")).get("requests")).get("storage"):
        out["capacity"] = str(capacity)
    modes = spec.get("accessModes")
    if isinstance(modes, list) and modes and isinstance(modes[0], str):
        out["accessMode"] = modes[0]
    status: JSONObj = {}
    backing_status = as_mapping(backing.get("status"))
    if phase := as_str(backing_status.get("phase")):
        status["phase"] = phase
    if volume := as_str(spec.get("volumeName")):
        status["volume"] = {"apiVersion": "v1", "kind": "PersistentVolume", "name": volume}
    return {"spec": out, "status": status}


def _pv_backing(view: JSONObj, old: Mapping[str, Any] | None) -> JSONObj:
    spec = as_mapping(view.get("spec"))
    capacity = as_str(spec.get("capacity")) or DEFAULT_CAPACITY
    errors: list[field.FieldError] = []
    try:
        if parse_quantity(capacity) <= 0:
            errors.append(field.invalid("spec.capacity", capacity, "must be greater than zero"))
    except ValueError:
        errors.append(field.invalid("spec.capacity", capacity, "must be a quantity, e.g. 20Gi"))
    wanted: JSONObj = {
        "accessModes": [as_str(spec.get("accessMode")) or DEFAULT_ACCESS_MODE],
        "resources": {"requests": {"storage": capacity}},
    }
    if klass := as_str(spec.get("type")):
        wanted["storageClassName"] = klass
    if old is not None:
        before = _pv_view(old)["spec"]
        for key in ("type", "capacity", "accessMode"):
            now = {"type": klass, "capacity": capacity, "accessMode": wanted["accessModes"][0]}[key]
            was = before.get(key, "")
            if key in spec and now != was and not (key == "capacity" and _same_quantity(now, was)):
                errors.append(field.invalid(f"spec.{key}", now, "field is immutable"))
        wanted = dict(as_mapping(old.get("spec")))  # the claim's own spec (volumeName, ...) stays
    if errors:
        raise CompanionError(errors)
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "spec": wanted}


def _same_quantity(a: str, b: str) -> bool:
    try:
        return parse_quantity(a) == parse_quantity(b)
    except ValueError:
        return False


# ---- InstancePersistentVolumeType -------------------------------------------------------------------------

_NFS_PARAMETERS: Final = {"server": "server", "share": "share", "subDirectory": "subDir"}


def _pvt_view(backing: Mapping[str, Any]) -> JSONObj:
    spec: JSONObj = _notes(backing)
    if backing.get("provisioner") == NFS_PROVISIONER:
        params = as_mapping(backing.get("parameters"))
        nfs: JSONObj = {key: params[p] for key, p in _NFS_PARAMETERS.items() if as_str(params.get(p))}
        if mode := as_str(params.get("mountPermissions")):
            nfs["mountPermissions"] = mode
        options = backing.get("mountOptions")
        if isinstance(options, list) and options:
            nfs["mountOptions"] = [str(o) for o in options]
        spec["nfs"] = nfs
    return {"spec": spec}


def _pvt_backing(view: JSONObj, old: Mapping[str, Any] | None) -> JSONObj:
    spec = as_mapping(view.get("spec"))
    nfs, s3 = spec.get("nfs"), spec.get("s3")
    if (nfs is None) == (s3 is None):
        raise CompanionError([field.required("spec", "exactly one of nfs or s3 must be specified")])
    if s3 is not None:
        raise CompanionError([field.forbidden("spec.s3", "S3 volumes are not provisioned by this operator")])
    source = as_mapping(nfs)
    params: JSONObj = {
        p: as_str(source.get(key)) for key, p in _NFS_PARAMETERS.items() if as_str(source.get(key))
    }
    params.setdefault("share", "/")
    if mode := as_str(source.get("mountPermissions")):
        if not (mode.isdigit() and all(ch in "01234567" for ch in mode)):
            raise CompanionError(
                [field.invalid("spec.nfs.mountPermissions", mode, "must be octal, e.g. 0777")]
            )
        params["mountPermissions"] = mode
    body: JSONObj = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "provisioner": NFS_PROVISIONER,
        "parameters": params,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
    }
    if options := source.get("mountOptions"):
        body["mountOptions"] = list(options)
    if old is not None:
        before = as_mapping(_pvt_view(old)["spec"].get("nfs"))
        now = as_mapping(_pvt_view(body)["spec"].get("nfs"))
        changed = sorted(k for k in {*before, *now} if before.get(k) != now.get(k))
        if old.get("provisioner") != NFS_PROVISIONER:
            raise CompanionError([field.forbidden("spec.nfs", "the StorageClass behind is not an NFS one")])
        if changed:
            raise CompanionError(
                [field.invalid(f"spec.nfs.{key}", now.get(key), "field is immutable") for key in changed]
            )
    return body


VIEWS: Final = {
    view.api.kind: view
    for view in (
        View(IMAGE_PULL_SECRET, RESOURCE_TYPE_IMAGE_PULL_SECRETS, _pull_secret_view, _pull_secret_backing),
        View(SSH_PUBLIC_KEY, RESOURCE_TYPE_SSH_PUBLIC_KEYS, _ssh_view, _ssh_backing),
        View(PERSISTENT_VOLUME, RESOURCE_TYPE_PERSISTENT_VOLUMES, _pv_view, _pv_backing),
        View(PERSISTENT_VOLUME_TYPE, RESOURCE_TYPE_PERSISTENT_VOLUME_TYPES, _pvt_view, _pvt_backing),
    )
}
"""Each companion's view, by kind."""
