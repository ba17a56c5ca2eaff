"""Schema source of Instance (worker.gpustack.ai/v1alpha1, namespaced; Era B, contract §2.6).

Why this module exists: an Instance is a user's long-running workload (image, ports, env, resources in
units of an InstanceType); the CRD carries its defaults, enums and bounds so a plain ``kubectl apply`` is
defaulted and checked before the Instance webhook applies the type-dependent rules.
"""

from __future__ import annotations

from gpustack_operator.api.schema import dsl
from gpustack_operator.api.schema.apitype import ApiType, kind_schema
from gpustack_operator.api.schema.devices import AllocationGroup
from gpustack_operator.api.schema.fields import Omit
from gpustack_operator.api.types.instance import Instance

_PROTOCOLS = ("TCP", "UDP", "SCTP")

_LocalObjectReference = dsl.struct(
    "LocalObjectReference",
    "An object in the same namespace, by name.",
    {
        "name": dsl.string("Name of the referent."),
    },
)

_Port = dsl.struct(
    "InstancePort",
    "A port the instance exposes.",
    {
        "port": dsl.integer("Container port.", go_type="int32", required=True, minimum=1, maximum=65535),
        "protocol": dsl.string("Protocol.", enum=_PROTOCOLS, default="TCP"),
        "name": dsl.string("Port name.", max_length=16),
    },
)

_Env = dsl.struct(
    "InstanceEnv",
    "An environment variable of the instance.",
    {
        "name": dsl.string("Variable name.", required=True),
        "value": dsl.string("Variable value."),
    },
)

_Resources = dsl.struct(
    "InstanceResources",
    "The resources of the instance, in units of its type.",
    {
        "cpu": dsl.quantity("CPU.", required=True),
        "ram": dsl.quantity("RAM.", required=True),
        "localStorage": dsl.quantity("Local (ephemeral) storage.", required=True),
        "accelerator": dsl.quantity("Whole accelerators (1 when sliced).", omit=Omit.NIL),
        "acceleratorSlicedMemoryPercentage": dsl.integer(
            "Percent of one accelerator's VRAM (sliced).", go_type="int32", minimum=0, maximum=100
        ),
        "acceleratorSlicedCoresPercentage": dsl.integer(
            "Percent of one accelerator's compute (sliced).", go_type="int32", minimum=0, maximum=100
        ),
    },
)

_Volume = dsl.struct(
    "InstanceVolume",
    "The workspace volume: exactly one of ephemeral or persistent.",
    {
        "ephemeral": dsl.obj(
            dsl.struct(
                "InstanceEphemeralVolume",
                "A volume that lives with the instance.",
                {
                    "capacity": dsl.quantity("Size of the volume.", required=True),
                },
            ),
            omit=Omit.NIL,
        ),
        "persistent": dsl.obj(_LocalObjectReference, "An InstancePersistentVolume by name.", omit=Omit.NIL),
    },
)

_Spec = dsl.struct(
    "InstanceSpec",
    "The desired instance.",
    {
        "displayName": dsl.string("Human-friendly name.", max_length=64),
        "description": dsl.string("Free-form note.", max_length=1024),
        "type": dsl.string("The InstanceType name (immutable).", required=True),
        "image": dsl.string("Container image.", required=True),
        "imagePullPolicy": dsl.string(
            "Image pull policy.", enum=("Always", "IfNotPresent", "Never"), default="IfNotPresent"
        ),
        "command": dsl.array(dsl.string(), "Entrypoint and arguments."),
        "privileged": dsl.boolean("Run the container privileged.", default=False),
        "ports": dsl.array(dsl.obj(_Port), "Exposed ports.", list_type="map", map_keys=("port", "protocol")),
        "env": dsl.array(dsl.obj(_Env), "Environment variables.", list_type="map", map_keys=("name",)),
        "resources": dsl.obj(_Resources, omit=Omit.NIL),
        "volumeMount": dsl.string(
            "Where the volume is mounted.", pattern=r"^(/[^/]+)+$", max_length=1024, default="/workspace"
        ),
        "imagePullSecret": dsl.obj(
            _LocalObjectReference, "An InstanceImagePullSecret by name.", omit=Omit.NIL
        ),
        "volume": dsl.obj(_Volume),
        "sshPublicKey": dsl.obj(_LocalObjectReference, "An InstanceSSHPublicKey by name.", omit=Omit.NIL),
        "stop": dsl.boolean("Stop the instance (keeps its volume)."),
    },
)

_StatusPort = dsl.struct(
    "InstanceStatusPort",
    "An exposed port and where it is reachable.",
    {
        "port": dsl.integer("Container port.", go_type="int32"),
        "protocol": dsl.string("Protocol."),
        "name": dsl.string("Port name."),
        "nodePort": dsl.integer("Node port.", go_type="int32"),
    },
)

_Status = dsl.struct(
    "InstanceStatus",
    "The observed instance.",
    {
        "phase": dsl.string("Phase, e.g. Starting or Stopped."),
        "phaseMessage": dsl.string("Why the instance is in its phase."),
        "nodeName": dsl.string("The node running the instance."),
        "accessAddresses": dsl.array(dsl.string(), "Addresses to reach the instance."),
        "hostIPs": dsl.array(dsl.string(), "IPs of the node."),
        "podIPs": dsl.array(dsl.string(), "IPs of the Pod."),
        "ports": dsl.array(dsl.obj(_StatusPort), "Exposed ports."),
        "allocations": dsl.array(dsl.obj(AllocationGroup), "The accelerators allocated to the instance."),
    },
)

INSTANCE: ApiType[Instance] = ApiType(
    group="worker.gpustack.ai",
    version="v1alpha1",
    kind="Instance",
    plural="instances",
    namespaced=True,
    schema=kind_schema(
        "Instance",
        "Instance is a long-running workload sized in units of an InstanceType.",
        spec=_Spec,
        status=_Status,
    ),
)
