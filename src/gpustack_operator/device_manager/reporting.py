"""Publishing what was detected: the NodeFeature NFD turns into node labels, and the node's Devices object.

NFD merges `<node>-gpustack-device-manager` (system namespace) into the node's labels (contract §5.3);
the worker turns those into ResourceFlavors and pools. The Devices object (named after the node) carries
the detected groups for the device plugin, the ledger and the per-card AdmissionCheck, and the pool
selector labels (feature keys, os, arch) so a pool's queue can find its nodes' Devices. Both are owned
by the Node, so they go when it goes.

Writes are server-side applies under our own field manager: a label or group we stop applying is removed,
and labels others own (the worker's `gpustack.ai/managed`) are kept. Nothing is sent when the objects
already say what we would write, so an unchanged node never changes resourceVersion.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

from gpustack_operator.api.json import JSONObj
from gpustack_operator.api.keys import (
    ACCELERATABLE_FEATURE_PREFIX,
    ARCH_LABEL,
    DEFAULT_SYSTEM_NAMESPACE,
    DEVICE_MANAGER_NODE_FEATURE_SUFFIX,
    OS_LABEL,
)
from gpustack_operator.api.types.devices import DevicesGroup
from gpustack_operator.controllerkit.rbac import SYSTEM, Rule
from gpustack_operator.kube import resources
from gpustack_operator.kube.client import Client
from gpustack_operator.rules.naming.groups import accelerator_key
from gpustack_operator.rules.naming.labels import TRUE, construct_acceleratable_node_labels
from gpustack_operator.rules.naming.objects import node_feature, node_owner_reference

log = logging.getLogger(__name__)

RBAC: tuple[Rule, ...] = (
    Rule.of(resources.NODES, "get"),
    Rule.of(resources.NODE_FEATURES, "get", "create", "patch", namespace=SYSTEM),  # server-side apply
    Rule.of(resources.DEVICES, "get", "create", "patch"),  # server-side apply
)
"""The reporter's API verbs: the node it runs on, its NodeFeature (in the system namespace) and Devices."""

FIELD_MANAGER: Final = "gpustack-device-manager"


def desired_node_feature(node: Mapping[str, Any], namespace: str, groups: Sequence[DevicesGroup]) -> JSONObj:
    labels = construct_acceleratable_node_labels(groups)
    return node_feature(node, DEVICE_MANAGER_NODE_FEATURE_SUFFIX, namespace, labels)


def devices_labels(node: Mapping[str, Any], groups: Sequence[DevicesGroup]) -> dict[str, str]:
    """The pool selector labels: each model's feature key, and the node's os and arch."""
    node_labels = node["metadata"].get("labels") or {}
    labels = {key: node_labels[key] for key in (OS_LABEL, ARCH_LABEL) if node_labels.get(key)}
    for group in groups:
        if group.get("accelerators"):
            labels[ACCELERATABLE_FEATURE_PREFIX + accelerator_key(group["manufacturer"], group["id"])] = TRUE
    return labels


def desired_devices(node: Mapping[str, Any], groups: Sequence[DevicesGroup]) -> JSONObj:
    return {
        "apiVersion": resources.DEVICES.api_version,
        "kind": resources.DEVICES.kind,
        "metadata": {
            "name": node["metadata"]["name"],
            "labels": devices_labels(node, groups),
            "ownerReferences": [node_owner_reference(node)],
        },
        "spec": {"groups": list(groups)},
    }


def _canonical(groups: Any) -> str:
    """Groups as text that ignores list order (the lists are maps keyed by id)."""

    def order(group: Mapping[str, Any]) -> Mapping[str, Any]:
        return {**group, "accelerators": sorted(group.get("accelerators") or [], key=lambda a: a["id"])}

    ordered = sorted((order(g) for g in groups or []), key=lambda g: (g["manufacturer"], g["id"]))
    return json.dumps(ordered, sort_keys=True)


def _owned_and_labelled(observed: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    meta, want = observed.get("metadata") or {}, desired["metadata"]
    labels = meta.get("labels") or {}
    uids = {ref.get("uid") for ref in meta.get("ownerReferences") or []}
    stale = [k for k in labels if k.startswith(ACCELERATABLE_FEATURE_PREFIX) and k not in want["labels"]]
    return (
        all(labels.get(k) == v for k, v in want["labels"].items())
        and want["ownerReferences"][0]["uid"] in uids
        and not stale
    )


def node_feature_current(observed: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> bool:
    """True when the NodeFeature already carries exactly the labels we would apply."""
    return (
        observed is not None
        and _owned_and_labelled(observed, desired)
        and (observed.get("spec") or {}).get("labels", {}) == desired["spec"]["labels"]
    )


def devices_current(observed: Mapping[str, Any] | None, desired: Mapping[str, Any]) -> bool:
    """True when the Devices object already has our groups, labels and owner."""
    return (
        observed is not None
        and _owned_and_labelled(observed, desired)
        and _canonical((observed.get("spec") or {}).get("groups")) == _canonical(desired["spec"]["groups"])
    )


class Reporter:
    """Writes one node's NodeFeature and Devices when they differ from what detection found."""

    def __init__(self, client: Client, node: str, namespace: str = DEFAULT_SYSTEM_NAMESPACE) -> None:
        self.client = client
        self.node = node
        self.namespace = namespace

    async def report(self, groups: Sequence[DevicesGroup]) -> bool:
        """Bring both objects in line with ``groups``; True when anything was written.

        Raises kube errors (NotFound when the Node does not exist) for the caller's retry.
        """
        node = await self.client.get(resources.NODES, self.node)
        wrote = False
        feature = desired_node_feature(node, self.namespace, groups)
        observed = await self.client.get_or_none(
            resources.NODE_FEATURES, feature["metadata"]["name"], self.namespace
        )
        if not node_feature_current(observed, feature):
            await self.client.apply(resources.NODE_FEATURES, feature, field_manager=FIELD_MANAGER)
            log.info("node=%s NodeFeature %s reported", self.node, feature["metadata"]["name"])
            wrote = True
        devices = desired_devices(node, groups)
        if not devices_current(await self.client.get_or_none(resources.DEVICES, self.node), devices):
            await self.client.apply(resources.DEVICES, devices, field_manager=FIELD_MANAGER)
            log.info("node=%s Devices reported with %d groups", self.node, len(groups))
            wrote = True
        return wrote
