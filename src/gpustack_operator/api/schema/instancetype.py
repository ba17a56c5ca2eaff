"""Schema source of InstanceType (worker.gpustack.ai/v1alpha1, cluster-scoped; Era B, contract §2.2).

Why this module exists: an InstanceType is the admin-facing face of one Kueue ClusterQueue (same name). Its
spec is the pool identity and unit sizes the webhooks check; its status is the live three-view capacity the
reconciler computes from the Devices ledger. The CPU and accelerator descriptors are inlined (Go ``,inline``)
so they are declared once here as field groups and spliced into the structs that inline them.
"""

from __future__ import annotations

from typing import Any

from marshmallow import fields

from gpustack_operator.api.schema import dsl
from gpustack_operator.api.schema.apitype import ApiType, kind_schema
from gpustack_operator.api.schema.devices import AcceleratorsFeature
from gpustack_operator.api.schema.fields import Omit
from gpustack_operator.api.types.instancetype import InstanceType, InstanceTypePhase

Body = dict[str, fields.Field[Any]]

_CPUCache = dsl.struct(
    "InstanceTypeCPUCache",
    "CPU cache sizes, in bytes.",
    {
        "l1i": dsl.string("L1 instruction cache."),
        "l1d": dsl.string("L1 data cache."),
        "l2": dsl.string("L2 cache."),
        "l3": dsl.string("L3 cache."),
    },
)


def _cpu() -> Body:
    """InstanceTypeCPU, inlined wherever a CPU is described."""
    return {
        "physicalCores": dsl.string("Physical cores, e.g. 8."),
        "threadsPerPhysicalCore": dsl.string("Threads per physical core, e.g. 2."),
        "logicalCores": dsl.string("Logical cores, e.g. 16."),
        "stepping": dsl.string("CPU stepping."),
        "clockSpeed": dsl.string("Clock speed in Hz."),
        "maxClockSpeed": dsl.string("Maximum (boost) clock speed in Hz."),
        "cacheLine": dsl.string("Cache line size in bytes."),
        "cache": dsl.obj(_CPUCache),
    }


def _descriptors(what: str) -> Body:
    """manufacturer/product/family of ``what``."""
    return {
        "manufacturer": dsl.string(f"Manufacturer of the {what}."),
        "product": dsl.string(f"Product of the {what}."),
        "family": dsl.string(f"Family of the {what}."),
    }


_AcceleratorCPU = dsl.struct(
    "InstanceTypeAcceleratorCPU",
    "The CPU of the nodes hosting the accelerator.",
    {**_descriptors("CPU"), **_cpu()},
)


def _accelerator(sliced_key: str, sliced_doc: str) -> Body:
    """The inline accelerator descriptors; ``sliced_key``: ``feature`` (spec) or ``slicedDetail`` (detail)."""
    return {
        "memory": dsl.string("VRAM per accelerator, e.g. 24576Mi; the Pod webhook's sliced-units divisor."),
        "cores": dsl.string("Cores per accelerator."),
        "computeCapability": dsl.string("Compute capability, e.g. 8.0."),
        sliced_key: dsl.obj(AcceleratorsFeature, sliced_doc),
        "cpu": dsl.obj(_AcceleratorCPU),
    }


_UnitResources = dsl.struct(
    "InstanceTypeUnitResources",
    "The resources of one unit of the type.",
    {
        "cpu": dsl.string("Unit CPU cores: a unitless positive integer (exactly 1 for a CPU-only type)."),
        "ram": dsl.string("Unit RAM: <positive int>Gi."),
    },
)

_Spec = dsl.struct(
    "InstanceTypeSpec",
    "The pool identity and unit sizes of the InstanceType.",
    {
        "acceleratorGroup": dsl.string(
            "Accelerator node key, e.g. nvidia-a10g; required when acceleratable."
        ),
        "acceleratable": dsl.boolean("Whether the type schedules onto accelerators.", omit=Omit.NEVER),
        **_descriptors("accelerator (or CPU for a CPU-only type)"),
        "os": dsl.string("Operating system, e.g. linux.", omit=Omit.NEVER),
        "arch": dsl.string("Architecture, e.g. amd64.", omit=Omit.NEVER),
        **_cpu(),
        **_accelerator("feature", "Slicing features of the accelerator."),
        "unitResources": dsl.obj(_UnitResources, omit=Omit.NEVER),
        "localStorage": dsl.string(
            "Local (ephemeral) storage of the type: <positive int>Gi.", omit=Omit.NEVER
        ),
        "generalGroup": dsl.string("CPU node key, or generic for a CPU-manufacturer-agnostic pool."),
        "displayName": dsl.string("Human-friendly name (admin-editable).", max_length=64),
        "inactive": dsl.boolean("Takes the type out of service: its ClusterQueue is held (admin toggle)."),
        "description": dsl.string("Free-form admin note.", max_length=1024),
    },
)

_Resource = dsl.struct(
    "InstanceTypeResource",
    "One capacity view of the InstanceType.",
    {
        "onceMaxRequest": dsl.quantity("The most one request can ask for (a soft limit)."),
        "remaining": dsl.quantity("What can still be requested."),
        "capacity": dsl.quantity("The total."),
    },
)

_Detail = dsl.struct(
    "InstanceTypeDetail",
    "The observed hardware of the pool, computed by the reconciler.",
    {
        **_descriptors("pool"),
        **_cpu(),
        **_accelerator("slicedDetail", "The pool's slicing capability."),
    },
)

_Status = dsl.struct(
    "InstanceTypeStatus",
    "The live capacity of the InstanceType.",
    {
        "phase": dsl.string(
            "Summary of the backing ClusterQueue; empty until first observed.",
            omit=Omit.NEVER,
            enum=["", *(p.value for p in InstanceTypePhase)],
        ),
        "phaseMessage": dsl.string("Why the type is in its phase."),
        "accelerator": dsl.obj(_Resource, "Exclusive view: whole free accelerators."),
        "acceleratorShared": dsl.obj(_Resource, "Shared view: ownership shares (10 per accelerator)."),
        "acceleratorSliced": dsl.obj(
            _Resource, "Sliced view: VRAM-percent units (100 per sliceable accelerator)."
        ),
        "cpu": dsl.obj(_Resource, "CPU view (CPU-only types)."),
        "entrance": dsl.string("The LocalQueue name (kueue.x-k8s.io/queue-name) that fronts the type."),
        "detail": dsl.obj(_Detail),
    },
)

INSTANCE_TYPE: ApiType[InstanceType] = ApiType(
    group="worker.gpustack.ai",
    version="v1alpha1",
    kind="InstanceType",
    plural="instancetypes",
    namespaced=False,
    schema=kind_schema(
        "InstanceType",
        "InstanceType is one schedulable hardware pool, backed 1:1 by the Kueue ClusterQueue of its name.",
        spec=_Spec,
        status=_Status,
    ),
)
