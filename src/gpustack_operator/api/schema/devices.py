"""Schema source of Devices (worker.gpustack.ai/v1alpha1, cluster-scoped, named after its node).

Why this module exists: Devices carries the node's accelerator inventory (``spec.groups``, written by the
device manager's detector) and the per-card allocation ledger (``status.groups``, rebuilt by the device
plugin). Both sides are read by the worker (capacity labels, three-view status, the per-card
AdmissionCheck), so their wire form is declared once here (contract §2.5, Era B).
"""

from __future__ import annotations

from gpustack_operator.api.schema import dsl
from gpustack_operator.api.schema.apitype import ApiType, kind_schema
from gpustack_operator.api.schema.fields import Omit
from gpustack_operator.api.types.devices import DeviceAllocationMode, Devices

AcceleratorSliced = dsl.struct(
    "AcceleratorSliced",
    "A slicing capability of the accelerators of a group.",
    {
        "maxSize": dsl.integer("The most slices one accelerator serves.", go_type="int32", required=True),
        "coresPercentageOvercommit": dsl.boolean(
            "Whether each slice may claim up to 100% of the accelerator's compute (time-shared)."
        ),
        "memoryPercentageStep": dsl.integer(
            "The granularity of a slice's VRAM share, in percent.", go_type="int32"
        ),
    },
)

AcceleratorsFeature = dsl.struct(
    "AcceleratorsFeature",
    "The slicing features of the accelerators of a group.",
    {
        "physicalSliced": dsl.obj(AcceleratorSliced, "Hardware partitioning.", omit=Omit.NIL),
        "logicalSliced": dsl.obj(AcceleratorSliced, "Software (soft) slicing.", omit=Omit.NIL),
    },
)

_RoCE = dsl.struct(
    "DeviceTopologyRoCE",
    "The RDMA over Converged Ethernet interface near the device.",
    {
        "ip": dsl.string("IP address."),
        "subnetMask": dsl.string("Subnet mask."),
        "gateway": dsl.string("Gateway address."),
    },
)

_Topology = dsl.struct(
    "DeviceTopology",
    "Where the device sits on the node.",
    {
        "pciBusId": dsl.string("PCI bus ID, e.g. 0000:3b:00.0.", required=True),
        "pciRootId": dsl.string("PCI root complex ID.", required=True),
        "pciClass": dsl.string("PCI class code, e.g. 0302.", required=True),
        "numaAffinity": dsl.string("NUMA node(s) close to the device.", required=True),
        "cpuAffinity": dsl.string("CPU cores close to the device.", required=True),
        "roce": dsl.obj(_RoCE, omit=Omit.NIL),
    },
)

_Accelerator = dsl.struct(
    "Accelerator",
    "One accelerator card.",
    {
        "id": dsl.string("Universally unique identifier of the device.", required=True),
        "index": dsl.integer("Logical number of the device, from 0.", go_type="uint32", required=True),
        "physicalIndexes": dsl.array(
            dsl.integer(go_type="uint32"), "Device char numbers of the device.", required=True
        ),
        "topology": dsl.obj(_Topology, required=True),
        "status": dsl.obj(
            dsl.struct(
                "AcceleratorStatus",
                "The observed state of the device.",
                {
                    "unhealthy": dsl.boolean("Whether the device is unhealthy.", omit=Omit.NEVER),
                },
            ),
            required=True,
        ),
    },
)

_Group = dsl.struct(
    "DevicesGroup",
    "Accelerators of one model (one group ID) on the node.",
    {
        "id": dsl.string("Group ID (ConstructGroupID, manufacturer prefix stripped).", required=True),
        "manufacturer": dsl.string("Manufacturer, e.g. nvidia.", required=True),
        "name": dsl.string("Product name.", required=True),
        "memory": dsl.integer("VRAM per accelerator, in MiB.", go_type="uint64", required=True),
        "cores": dsl.integer("Cores per accelerator.", go_type="uint32"),
        "driverVersion": dsl.string("Driver version."),
        "runtimeVersion": dsl.string("Runtime (toolkit) version."),
        "computeCapability": dsl.string("Compute capability, e.g. 8.0."),
        "family": dsl.string("Product family."),
        "accelerators": dsl.array(
            dsl.obj(_Accelerator), "The accelerators of this group.", list_type="map", map_keys=("id",)
        ),
        "acceleratorsFeature": dsl.obj(AcceleratorsFeature, omit=Omit.NIL),
    },
)

_MODES = ", ".join(f"{m.value} {m.label}" for m in DeviceAllocationMode)

AcceleratorAllocation = dsl.struct(
    "AcceleratorAllocation",
    "The ledger entry of one accelerator.",
    {
        "id": dsl.string("Accelerator ID.", required=True),
        "index": dsl.integer("Accelerator index.", go_type="uint32", required=True),
        "mode": dsl.integer(
            f"Allocation mode, a number: {_MODES}.",
            go_type="uint32",
            omit=Omit.NEVER,
            enum=[m.value for m in DeviceAllocationMode],
        ),
        "allocated": dsl.integer("Allocated units (1 card = 1600000).", go_type="int32"),
        "remaining": dsl.integer(
            "Remaining units (1 card = 1600000); negative when the card is oversold.", go_type="int32"
        ),
        "oversold": dsl.boolean(
            "True when the holders of the card were given more units than it has (recorded by an older "
            "version or by hand): the card gives nothing until enough of them finish."
        ),
    },
)

AllocationGroup = dsl.struct(
    "DevicesAllocationGroup",
    "The ledger of one device group.",
    {
        "id": dsl.string("Group ID.", required=True),
        "manufacturer": dsl.string("Manufacturer.", required=True),
        "accelerators": dsl.array(dsl.obj(AcceleratorAllocation), "Per-accelerator ledger entries."),
    },
)

_Spec = dsl.struct(
    "DevicesSpec",
    "The detected devices of the node.",
    {
        "groups": dsl.array(
            dsl.obj(_Group),
            "Device groups on the node.",
            required=True,
            list_type="map",
            map_keys=("id", "manufacturer"),
        ),
    },
)

_Status = dsl.struct(
    "DevicesStatus",
    "The per-card allocation ledger of the node.",
    {
        "groups": dsl.array(dsl.obj(AllocationGroup), "Ledger per device group."),
    },
)

DEVICES: ApiType[Devices] = ApiType(
    group="worker.gpustack.ai",
    version="v1alpha1",
    kind="Devices",
    plural="devices",
    namespaced=False,
    schema=kind_schema(
        "Devices",
        "Devices is the accelerator inventory and allocation ledger of one node (named after the node).",
        spec=_Spec,
        status=_Status,
        spec_required=True,
    ),
)
