"""An Instance's status as its user reads it, derived from the Instance's Pod (contract §2.6).

Why this module exists: a user asks "is my workspace up, where, on which cards, and if not, why?". The
answers are spread over the Pod (Kueue's scheduling gate, the scheduler's condition, container states,
node and IPs) and the device manager's allocation annotation; this module reads them into the Instance's
``status`` in one pure function. It never raises: a Pod bent out of shape yields what can be read.

Phases (api.types.instance.InstancePhase): Pending (no Pod yet, waiting for Kueue's admission or for a
node), Starting (on a node, containers not all ready), Running, Failed (the Pod ended), Stopping (the Pod
is being deleted, or must be because ``spec.stop``), Stopped (``spec.stop`` and no Pod).

Where to connect: ``ports`` carry the node ports of the Instance's NodePort Service and
``accessAddresses`` the address to use with them (``Access``: the static-address and wildcard-DNS
settings, else the node's address), so ``kubectl get instance -o wide`` shows both.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from gpustack_operator.api.json import JSONObj, as_list, as_mapping, as_str
from gpustack_operator.api.keys import (
    ACCELERATOR_ALLOCATED_ANNOTATION,
    KUEUE_ADMISSION_GATE,
    KUEUE_QUEUE_NAME_LABEL,
)
from gpustack_operator.api.types.devices import AcceleratorAllocation, DevicesAllocationGroup
from gpustack_operator.api.types.instance import InstancePhase
from gpustack_operator.rules.instance.access import access_addresses, node_address

UNREADABLE_ALLOCATION: Final = "the device allocation annotation of the Pod is unreadable"
_MESSAGE_MAX: Final = 1024
"""Kubernetes messages can be long; a status line keeps the start."""


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _condition(status: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    return next(
        (as_mapping(c) for c in as_list(status.get("conditions")) if as_mapping(c).get("type") == kind), {}
    )


def _join(*parts: str) -> str:
    return ": ".join(part for part in parts if part)[:_MESSAGE_MAX]


def _container_problem(statuses: Iterable[Any]) -> str:
    """Why the first not-ready container is not ready, from its state."""
    for entry in map(as_mapping, statuses):
        if entry.get("ready") is True:
            continue
        name, state = as_str(entry.get("name")), as_mapping(entry.get("state"))
        if waiting := as_mapping(state.get("waiting")):
            return _join(
                f"container {name}",
                as_str(waiting.get("reason")) or "waiting",
                as_str(waiting.get("message")),
            )
        if terminated := as_mapping(state.get("terminated")):
            code = _int(terminated.get("exitCode"))
            reason = as_str(terminated.get("reason")) or "terminated"
            return _join(
                f"container {name} exited", reason + (f" (exit code {code})" if code is not None else "")
            )
        return f"container {name} is not ready"
    return ""


STUCK_REASONS: Final = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "CrashLoopBackOff",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
    }
)
"""Waiting reasons that last until someone changes something: the Instance is Failed, not Starting (the
Instance webhook refuses a stop while Starting, so a workspace stuck on a bad image must not read as one)."""


def _stuck(statuses: Iterable[Any]) -> bool:
    return any(
        as_str(as_mapping(as_mapping(as_mapping(entry).get("state")).get("waiting")).get("reason"))
        in STUCK_REASONS
        for entry in statuses
    )


def _phase(pod: Mapping[str, Any], stop: bool) -> tuple[InstancePhase, str]:
    meta, spec, status = (
        as_mapping(pod.get("metadata")),
        as_mapping(pod.get("spec")),
        as_mapping(pod.get("status")),
    )
    containers = as_list(status.get("containerStatuses"))
    if stop:
        return InstancePhase.STOPPING, "stopping: deleting the Pod"
    if meta.get("deletionTimestamp"):
        disruption = _condition(status, "DisruptionTarget")
        return InstancePhase.STOPPING, _join("the Pod is being deleted", as_str(disruption.get("message")))
    pod_phase = as_str(status.get("phase"))
    if pod_phase in ("Failed", "Succeeded"):
        return InstancePhase.FAILED, _join(
            "the Pod ended",
            as_str(status.get("message")) or as_str(status.get("reason")) or _container_problem(containers),
        )
    gates = {as_str(as_mapping(gate).get("name")) for gate in as_list(spec.get("schedulingGates"))}
    if KUEUE_ADMISSION_GATE in gates:
        queue = as_str(as_mapping(meta.get("labels")).get(KUEUE_QUEUE_NAME_LABEL))
        return InstancePhase.PENDING, f"waiting for admission in queue {queue}"
    if not as_str(spec.get("nodeName")):
        scheduled = _condition(status, "PodScheduled")
        return InstancePhase.PENDING, _join("waiting for scheduling", as_str(scheduled.get("message")))
    if pod_phase == "Running" and _condition(status, "Ready").get("status") == "True":
        return InstancePhase.RUNNING, ""
    if _stuck(containers):
        return InstancePhase.FAILED, _container_problem(containers)
    return InstancePhase.STARTING, _container_problem(containers) or "starting the containers"


def _ips(status: Mapping[str, Any], many: str, one: str) -> list[str]:
    ips = [as_str(as_mapping(entry).get("ip")) for entry in as_list(status.get(many))]
    ips = [ip for ip in ips if ip] or [as_str(status.get(one))]
    return [ip for ip in ips if ip]


def _ports(spec: Mapping[str, Any]) -> list[JSONObj]:
    """The ports main (the Pod's first container) exposes, as the Pod (immutable: what runs) declares."""
    main = as_mapping(next(iter(as_list(spec.get("containers"))), {}))
    ports: list[JSONObj] = []
    for entry in map(as_mapping, as_list(main.get("ports"))):
        if (port := _int(entry.get("containerPort"))) is None:
            continue
        item: JSONObj = {"port": port, "protocol": as_str(entry.get("protocol")) or "TCP"}
        if name := as_str(entry.get("name")):
            item["name"] = name
        ports.append(item)
    return ports


def _service_ports(service: Mapping[str, Any]) -> list[JSONObj]:
    """Every port of the Instance's Service, with the node port kube-apiserver gave it (once it has)."""
    ports: list[JSONObj] = []
    for entry in map(as_mapping, as_list(as_mapping(service.get("spec")).get("ports"))):
        if (port := _int(entry.get("port"))) is None:
            continue
        item: JSONObj = {"port": port, "protocol": as_str(entry.get("protocol")) or "TCP"}
        if name := as_str(entry.get("name")):
            item["name"] = name
        if node_port := _int(entry.get("nodePort")):
            item["nodePort"] = node_port
        ports.append(item)
    return ports


@dataclass(frozen=True)
class Access:
    """What says where an Instance is reached: its Service, its node and the two access settings."""

    service: Mapping[str, Any] | None = None
    """The Instance's NodePort Service (rules.instance.service), None when there is none (yet)."""
    node: Mapping[str, Any] | None = None
    """The Node its Pod runs on, None when unknown."""
    static_address: str = ""
    """``instance-access-static-address``."""
    wildcard_dns: str = ""
    """``instance-access-wildcard-dns``."""


def _card(value: object) -> AcceleratorAllocation | None:
    entry = as_mapping(value)
    uuid, index, mode = as_str(entry.get("id")), _int(entry.get("index")), _int(entry.get("mode"))
    if not uuid or index is None or mode is None:
        return None
    card: AcceleratorAllocation = {"id": uuid, "index": index, "mode": mode}
    if allocated := _int(entry.get("allocated")):
        card["allocated"] = allocated
    return card


def pod_allocations(pod: Mapping[str, Any]) -> tuple[list[DevicesAllocationGroup], bool]:
    """The cards the device manager recorded on the Pod, merged over its containers in name order, and
    whether the annotation was readable (absent counts as readable: nothing allocated yet)."""
    text = as_mapping(as_mapping(pod.get("metadata")).get("annotations")).get(
        ACCELERATOR_ALLOCATED_ANNOTATION
    )
    if not text:
        return [], True
    try:
        record = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        record = None
    if not isinstance(record, Mapping):
        return [], False
    groups: dict[tuple[str, str], DevicesAllocationGroup] = {}
    entries = [record[name] for name in sorted(record)]
    if not all(isinstance(entry, Mapping) and isinstance(entry.get("devices"), Mapping) for entry in entries):
        return [], False
    for entry in entries:
        for raw in as_list(entry["devices"].get("groups")):
            group_id, manufacturer = (
                as_str(as_mapping(raw).get("id")),
                as_str(as_mapping(raw).get("manufacturer")),
            )
            cards = [
                card for card in map(_card, as_list(as_mapping(raw).get("accelerators"))) if card is not None
            ]
            if not group_id or not cards:
                continue
            group = groups.setdefault(
                (group_id, manufacturer), {"id": group_id, "manufacturer": manufacturer, "accelerators": []}
            )
            held = group.setdefault("accelerators", [])
            held.extend(card for card in cards if card["id"] not in {c["id"] for c in held})
    return list(groups.values()), True


def pod_status(
    pod: Mapping[str, Any] | None, instance: Mapping[str, Any], access: Access | None = None
) -> JSONObj:
    """The Instance ``status`` for its Pod (None: there is none); empty fields are omitted.

    ``ports`` are the Service's (with their node ports) when there is one, else main's declared ports;
    ``accessAddresses`` (rules.instance.access) only once the Pod is on a node.
    """
    access = access or Access()
    stop = as_mapping(instance.get("spec")).get("stop") is True
    if pod is None:
        if stop:
            return {"phase": InstancePhase.STOPPED.value, "phaseMessage": "the instance is stopped"}
        return {"phase": InstancePhase.PENDING.value, "phaseMessage": "creating the Pod"}
    phase, message = _phase(pod, stop)
    spec, status = as_mapping(pod.get("spec")), as_mapping(pod.get("status"))
    allocations, readable = pod_allocations(pod)
    if not readable:
        message = "; ".join(part for part in (message, UNREADABLE_ALLOCATION) if part)
    node_name, host_ips = as_str(spec.get("nodeName")), _ips(status, "hostIPs", "hostIP")
    addresses: list[str] = []
    if node_name and phase not in (InstancePhase.STOPPING, InstancePhase.FAILED):
        addresses = access_addresses(
            [node_address(access.node), *host_ips],
            static_address=access.static_address,
            wildcard_dns=access.wildcard_dns,
        )
    result: JSONObj = {
        "phase": phase.value,
        "phaseMessage": message,
        "nodeName": node_name,
        "accessAddresses": addresses,
        "hostIPs": host_ips,
        "podIPs": _ips(status, "podIPs", "podIP"),
        "ports": _service_ports(access.service) if access.service is not None else _ports(spec),
        "allocations": allocations,
    }
    return {key: value for key, value in result.items() if value}
