"""The Instance's companions in `worker.gpustack.ai/v1` (contract §2.1): InstanceImagePullSecret,
InstanceSSHPublicKey and InstancePersistentVolume (namespaced) and InstancePersistentVolumeType (cluster).

Each is a view over the core object of its name that the Instance's Pod consumes: a
`kubernetes.io/dockerconfigjson` Secret, an Opaque Secret holding `authorized_keys`, a PersistentVolumeClaim,
a StorageClass; rules.companions explains the choice and holds the conversions, generic/backedviews.py
serves them. Verbs: create, get, list, watch, update, patch (JSON merge only) and delete; no
deletecollection and no subresources. Users are authorized by the same SubjectAccessReview as every
served kind (on the view's resource, e.g. `instancesshpublickeys`), then the worker reads and writes the
object behind with its own credentials (the `rbac` rules below; only objects labelled as the view's are
ever served or changed).
"""

from __future__ import annotations

from typing import Any

from gpustack_operator.api.json import JSONObj, as_mapping
from gpustack_operator.api.keys import (
    CATEGORY,
    KIND_INSTANCE_IMAGE_PULL_SECRET,
    KIND_INSTANCE_PERSISTENT_VOLUME,
    KIND_INSTANCE_PERSISTENT_VOLUME_TYPE,
    KIND_INSTANCE_SSH_PUBLIC_KEY,
    V1,
    WORKER_GROUP,
)
from gpustack_operator.apiserver.discovery import ServedResource
from gpustack_operator.apiserver.registry.generic.backedviews import BackedView, backed_rules
from gpustack_operator.apiserver.served import Backends, Resource
from gpustack_operator.apiserver.table import NAME, Column, age
from gpustack_operator.kube.client import MERGE_PATCH
from gpustack_operator.kube.resources import PERSISTENT_VOLUME_CLAIMS, SECRETS, STORAGE_CLASSES
from gpustack_operator.kube.resources import Resource as Stored
from gpustack_operator.rules.companions import VIEWS

__all__ = [
    "IMAGE_PULL_SECRETS",
    "PERSISTENT_VOLUMES",
    "PERSISTENT_VOLUME_TYPES",
    "RESOURCES",
    "SSH_PUBLIC_KEYS",
]

VERBS = ("create", "delete", "get", "list", "patch", "update", "watch")


def _spec(key: str) -> Any:
    return lambda obj: as_mapping(obj.get("spec")).get(key)


def _fingerprints(obj: JSONObj) -> str:
    """The key types and comments of an SSH key's lines (`ssh-ed25519 alice@laptop`)."""
    shown = []
    for line in str(obj.get("data") or "").splitlines():
        parts = line.split()
        if len(parts) >= 2:
            shown.append(" ".join([parts[0], *parts[2:3]]))
    return ", ".join(shown)


AGE = Column("Age", age, type="date", description="Time since creation.")
DISPLAY = Column("Display Name", _spec("displayName"), description="The display name.")
DESCRIPTION = Column("Description", _spec("description"), description="The description.", priority=1)


def _resource(
    kind: str, plural: str, singular: str, *, namespaced: bool, backing: Stored, columns: tuple[Column, ...]
) -> Resource:
    served = ServedResource(
        group=WORKER_GROUP,
        version=V1,
        plural=plural,
        singular=singular,
        kind=kind,
        namespaced=namespaced,
        verbs=VERBS,
        categories=(CATEGORY,),
        patch_types=(MERGE_PATCH,),
    )
    view = VIEWS[kind]

    def storage(backends: Backends) -> BackedView:
        return BackedView(backends.client, served, backing, view, columns)

    return Resource(served, view.api.openapi_schema(), storage, columns, rbac=backed_rules(backing))


IMAGE_PULL_SECRETS = _resource(
    KIND_INSTANCE_IMAGE_PULL_SECRET,
    "instanceimagepullsecrets",
    "instanceimagepullsecret",
    namespaced=True,
    backing=SECRETS,
    columns=(NAME, DISPLAY, AGE, DESCRIPTION),
)
SSH_PUBLIC_KEYS = _resource(
    KIND_INSTANCE_SSH_PUBLIC_KEY,
    "instancesshpublickeys",
    "instancesshpublickey",
    namespaced=True,
    backing=SECRETS,
    columns=(NAME, Column("Keys", _fingerprints, description="Each key's type and comment."), AGE),
)
PERSISTENT_VOLUMES = _resource(
    KIND_INSTANCE_PERSISTENT_VOLUME,
    "instancepersistentvolumes",
    "instancepersistentvolume",
    namespaced=True,
    backing=PERSISTENT_VOLUME_CLAIMS,
    columns=(
        NAME,
        Column("Type", _spec("type"), description="Its InstancePersistentVolumeType (StorageClass)."),
        Column("Capacity", _spec("capacity"), description="The capacity asked for."),
        Column("Access Mode", _spec("accessMode"), description="How it may be mounted."),
        Column(
            "Phase",
            lambda obj: as_mapping(obj.get("status")).get("phase"),
            description="Pending, Bound, Lost.",
        ),
        AGE,
        DISPLAY,
    ),
)
PERSISTENT_VOLUME_TYPES = _resource(
    KIND_INSTANCE_PERSISTENT_VOLUME_TYPE,
    "instancepersistentvolumetypes",
    "instancepersistentvolumetype",
    namespaced=False,
    backing=STORAGE_CLASSES,
    columns=(
        NAME,
        Column(
            "Source",
            lambda obj: "nfs" if "nfs" in as_mapping(obj.get("spec")) else "",
            description="nfs or s3.",
        ),
        Column(
            "Server",
            lambda obj: as_mapping(as_mapping(obj.get("spec")).get("nfs")).get("server"),
            description="The NFS server.",
        ),
        AGE,
        DISPLAY,
    ),
)
RESOURCES = (PERSISTENT_VOLUME_TYPES, PERSISTENT_VOLUMES, IMAGE_PULL_SECRETS, SSH_PUBLIC_KEYS)
"""In the catalog's order."""
