"""Schema source of an Instance's companions (worker.gpustack.ai/v1, served by the aggregated API, no CRD).

Why this module exists: an Instance names an image pull secret, an SSH public key and a persistent volume
(`spec.imagePullSecret`, `spec.sshPublicKey`, `spec.volume.persistent`); these four kinds let a user write
them in the Instance's own terms (contract §2.1), and the aggregated API both validates writes and
publishes the OpenAPI of each kind from these declarations. Field names follow the original's v1 types.
Write-only inputs (a registry password, ...) are accepted on writes and never shown on reads.
"""

from __future__ import annotations

from typing import Any

from marshmallow import fields

from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import (
    KIND_INSTANCE_IMAGE_PULL_SECRET,
    KIND_INSTANCE_PERSISTENT_VOLUME,
    KIND_INSTANCE_PERSISTENT_VOLUME_TYPE,
    KIND_INSTANCE_SSH_PUBLIC_KEY,
    PLURAL_INSTANCE_IMAGE_PULL_SECRETS,
    PLURAL_INSTANCE_PERSISTENT_VOLUME_TYPES,
    PLURAL_INSTANCE_PERSISTENT_VOLUMES,
    PLURAL_INSTANCE_SSH_PUBLIC_KEYS,
    V1,
    WORKER_GROUP,
)
from gpustack_operator.api.schema import dsl
from gpustack_operator.api.schema.apitype import ApiType, kind_schema
from gpustack_operator.api.schema.fields import Omit

__all__ = [
    "ACCESS_MODES",
    "IMAGE_PULL_SECRET",
    "PERSISTENT_VOLUME",
    "PERSISTENT_VOLUME_TYPE",
    "SSH_PUBLIC_KEY",
]

ACCESS_MODES = ("ReadWriteOnce", "ReadWriteMany", "ReadOnlyMany", "ReadWriteOncePod")


def _described(what: str) -> dict[str, fields.Field[Any]]:
    return {
        "displayName": dsl.string(f"The display name of the {what}.", max_length=64),
        "description": dsl.string(f"The description of the {what}.", max_length=1024),
    }


def _write_only(what: str) -> str:
    return f"{what} Write-only input: required on create, never shown on reads."


_PullSecretSpec = dsl.struct(
    "InstanceImagePullSecretSpec",
    "The registry credentials (write-only) and how the secret is shown.",
    {
        **_described("InstanceImagePullSecret"),
        "registry": dsl.string(
            _write_only("The registry the credentials are for, e.g. `registry.local:5000`.")
        ),
        "username": dsl.string(_write_only("The user name at the registry.")),
        "password": dsl.string(_write_only("The password (or token) at the registry.")),
        "email": dsl.string("The e-mail of the registry account (optional, write-only)."),
    },
)

IMAGE_PULL_SECRET: ApiType[JSONObj] = ApiType(
    group=WORKER_GROUP,
    version=V1,
    kind=KIND_INSTANCE_IMAGE_PULL_SECRET,
    plural=PLURAL_INSTANCE_IMAGE_PULL_SECRETS,
    namespaced=True,
    schema=kind_schema(
        KIND_INSTANCE_IMAGE_PULL_SECRET,
        "InstanceImagePullSecret is registry credentials an Instance pulls its image with "
        "(spec.imagePullSecret); backed by a kubernetes.io/dockerconfigjson Secret of the same name.",
        spec=_PullSecretSpec,
    ),
)

SSH_PUBLIC_KEY: ApiType[JSONObj] = ApiType(
    group=WORKER_GROUP,
    version=V1,
    kind=KIND_INSTANCE_SSH_PUBLIC_KEY,
    plural=PLURAL_INSTANCE_SSH_PUBLIC_KEYS,
    namespaced=True,
    schema=dsl.struct(
        KIND_INSTANCE_SSH_PUBLIC_KEY,
        "InstanceSSHPublicKey is the public keys an Instance's SSH server accepts (spec.sshPublicKey); "
        "backed by a Secret of the same name.",
        {
            "apiVersion": dsl.string(
                "APIVersion defines the versioned schema of this representation of an object."
            ),
            "kind": dsl.string(
                "Kind is a string value representing the REST resource this object represents."
            ),
            "metadata": dsl.metadata(),
            "data": dsl.string(
                "The SSH public key(s), one per line as in authorized_keys (`ssh-ed25519 AAAA... comment`).",
                required=True,
            ),
        },
    ),
)

_PersistentVolumeSpec = dsl.struct(
    "InstancePersistentVolumeSpec",
    "The volume asked for; type, capacity and access mode are immutable after creation.",
    {
        **_described("InstancePersistentVolume"),
        "type": dsl.string(
            "The InstancePersistentVolumeType (StorageClass) that provisions the volume; the cluster's "
            "default StorageClass when absent. Immutable.",
            omit=Omit.NIL,
        ),
        "capacity": dsl.quantity("The capacity of the volume (default 20Gi). Immutable."),
        "accessMode": dsl.string(
            "The access mode of the volume (default ReadWriteOnce). Immutable.",
            enum=ACCESS_MODES,
            omit=Omit.NIL,
        ),
    },
)

_ObjectReference = dsl.struct(
    "ObjectReference",
    "A reference to an object.",
    {
        "apiVersion": dsl.string("The API version of the referent."),
        "kind": dsl.string("The kind of the referent."),
        "name": dsl.string("The name of the referent."),
    },
)

_PersistentVolumeStatus = dsl.struct(
    "InstancePersistentVolumeStatus",
    "The observed state of the volume (its claim's).",
    {
        "phase": dsl.string("Pending, Bound or Lost: the phase of the PersistentVolumeClaim behind it."),
        "volume": dsl.obj(_ObjectReference, "The PersistentVolume bound to it.", omit=Omit.NIL),
    },
)

PERSISTENT_VOLUME: ApiType[JSONObj] = ApiType(
    group=WORKER_GROUP,
    version=V1,
    kind=KIND_INSTANCE_PERSISTENT_VOLUME,
    plural=PLURAL_INSTANCE_PERSISTENT_VOLUMES,
    namespaced=True,
    schema=kind_schema(
        KIND_INSTANCE_PERSISTENT_VOLUME,
        "InstancePersistentVolume is a workspace volume an Instance mounts (spec.volume.persistent); "
        "backed by a PersistentVolumeClaim of the same name.",
        spec=_PersistentVolumeSpec,
        status=_PersistentVolumeStatus,
    ),
)

_NFS = dsl.struct(
    "NFSInstancePersistentVolumeSource",
    "An NFS share (provisioned by csi-driver-nfs, `nfs.csi.k8s.io`); immutable after creation.",
    {
        "server": dsl.string("The host name or IP address of the NFS server.", required=True),
        "share": dsl.string(
            "The exported path on the server (default /).", pattern=r"^/([^/]+(/[^/]+)*)?$", max_length=1024
        ),
        "subDirectory": dsl.string(
            "The subdirectory of the share each volume gets; may use ${pvc.metadata.name}, "
            "${pvc.metadata.namespace} and ${pv.metadata.name}. Blank: the volume's own name."
        ),
        "mountPermissions": dsl.string(
            "The permissions (octal, e.g. 0777) to chmod the mounted directory to."
        ),
        "mountOptions": dsl.array(dsl.string(), "The NFS mount options."),
    },
)

_S3 = dsl.struct(
    "S3InstancePersistentVolumeSource",
    "An S3-compatible bucket (not provisioned by this operator yet: refused on create).",
    {
        "endpoint": dsl.string("The endpoint of the S3-compatible service.", required=True),
        "region": dsl.string("The region."),
        "insecure": dsl.boolean("Whether to skip TLS verification."),
        "accessKey": dsl.string("The access key (write-only)."),
        "secretKey": dsl.string("The secret key (write-only)."),
        "bucket": dsl.string("The bucket."),
        "mountOptions": dsl.array(dsl.string(), "The GeeseFS mount options."),
    },
)

_PersistentVolumeTypeSpec = dsl.struct(
    "InstancePersistentVolumeTypeSpec",
    "Exactly one source: nfs or s3.",
    {
        **_described("InstancePersistentVolumeType"),
        "nfs": dsl.obj(_NFS, omit=Omit.NIL),
        "s3": dsl.obj(_S3, omit=Omit.NIL),
    },
)

PERSISTENT_VOLUME_TYPE: ApiType[JSONObj] = ApiType(
    group=WORKER_GROUP,
    version=V1,
    kind=KIND_INSTANCE_PERSISTENT_VOLUME_TYPE,
    plural=PLURAL_INSTANCE_PERSISTENT_VOLUME_TYPES,
    namespaced=False,
    schema=kind_schema(
        KIND_INSTANCE_PERSISTENT_VOLUME_TYPE,
        "InstancePersistentVolumeType is a kind of storage InstancePersistentVolumes are provisioned from; "
        "backed by a StorageClass of the same name.",
        spec=_PersistentVolumeTypeSpec,
        spec_required=True,
    ),
)
