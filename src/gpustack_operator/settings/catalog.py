"""The editable settings of the worker (contract §6), their defaults and first-install values.

Why this module exists: this is the list an admin sees as ``kubectl get settings`` and the keys the
gpustack-settings Secret is backfilled with. Names, defaults and blank rules match the original operator so
a Secret written by it reads the same here.

Left out: ``instance-host-path-volume-allowed``. It gates hostPath mounts in an Instance's
``spec.additionalVolumes``, an Era C field this operator's (Era B) Instance does not have: no Instance can
ask for a hostPath, so the setting would gate nothing. A key of that name in the Secret (written by the
original) is ignored. It comes back with ``additionalVolumes``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from gpustack_operator.settings.admission import check_bool, check_container_registry, check_image_reference
from gpustack_operator.settings.setting import Setting, SettingValueError


def _flag(name: str, description: str, default: bool) -> Setting:
    return Setting(name, description, "true" if default else "false", checks=(check_bool,))


CONTAINER_REGISTRY = Setting(
    "container-registry",
    "Indicates the registry to pull images from, for every built-in application.",
    allow_blank=True,
    checks=(check_container_registry,),
)
CONTAINER_NAMESPACE = Setting(
    "container-namespace",
    "Indicates the namespace to pull images from, for every built-in application.",
    allow_blank=True,
)
IMAGE_PULL_SECRETS = Setting(
    "image-pull-secrets",
    "Indicates the image pull secrets, for every built-in application.",
    allow_blank=True,
)
IMAGE_PULL_POLICY = Setting(
    "image-pull-policy",
    "Indicates the image pull policy, for every built-in application.",
    "IfNotPresent",
    allow_blank=True,
)
INSTANCE_GENERAL_RESOURCES_OVERCOMMIT = _flag(
    "instance-general-resources-overcommit",
    "Indicates to overcommit instance general resources: a general unit then requests 800m CPU / 128Mi RAM, "
    "an accelerated unit 100m CPU / 128Mi RAM, and one eighth of the local storage.",
    default=True,
)
INSTANCE_SSH_SERVER_IMAGE = Setting(
    "instance-ssh-server-image",
    "Indicates the image of the SSH server sidecar of Instances.",
    "gpustack/ssh-server:v1.3.0",
    checks=(check_image_reference,),
)
INSTANCE_ACCESS_STATIC_ADDRESS = Setting(
    "instance-access-static-address",
    "Indicates the static address to reach every Instance; when unset, addresses come from host IPs.",
    allow_blank=True,
)
INSTANCE_ACCESS_WILDCARD_DNS = Setting(
    "instance-access-wildcard-dns",
    "Indicates the wildcard DNS (e.g. traefik.me) naming each Instance <host-ip>.<wildcard-dns>; "
    "only used when instance-access-static-address is unset.",
    allow_blank=True,
)
INSTANCE_PRIVILEGED_ALLOWED = _flag(
    "instance-privileged-allowed", "Indicates to allow Instances to request privileged mode.", default=False
)
NODE_MANAGEMENT_MANUAL = _flag(
    "node-management-manual",
    "Indicates to skip auto-managing nodes: when true an administrator labels them gpustack.ai/managed.",
    default=False,
)
INSTANCE_TYPE_MIXED_ON_NODE = _flag(
    "instance-type-mixed-on-node",
    "Indicates whether one node may surface both an accelerated and a CPU-only InstanceType.",
    default=True,
)
INSTANCE_TYPE_DERIVED_FROM_NODE = _flag(
    "instance-type-derived-from-node",
    "Indicates whether the operator derives InstanceTypes (and their ClusterQueues) from node hardware.",
    default=True,
)
INSTANCE_TYPE_DRAIN_WHEN_NO_FLAVORS = _flag(
    "instance-type-drain-when-no-flavors",
    "Indicates whether a ClusterQueue that lost all its ResourceFlavors is drained (HoldAndDrain) "
    "before its resource groups are emptied.",
    default=True,
)
INSTANCE_TYPE_AWARE_CPU_MANUFACTURER = _flag(
    "instance-type-aware-cpu-manufacturer",
    "Indicates whether derived ClusterQueues, InstanceTypes and InstanceTypeFlavors split by CPU maker.",
    default=False,
)

SETTINGS: Mapping[str, Setting] = {
    s.name: s
    for s in (
        CONTAINER_REGISTRY,
        CONTAINER_NAMESPACE,
        IMAGE_PULL_SECRETS,
        IMAGE_PULL_POLICY,
        INSTANCE_GENERAL_RESOURCES_OVERCOMMIT,
        INSTANCE_SSH_SERVER_IMAGE,
        INSTANCE_ACCESS_STATIC_ADDRESS,
        INSTANCE_ACCESS_WILDCARD_DNS,
        INSTANCE_PRIVILEGED_ALLOWED,
        NODE_MANAGEMENT_MANUAL,
        INSTANCE_TYPE_MIXED_ON_NODE,
        INSTANCE_TYPE_DERIVED_FROM_NODE,
        INSTANCE_TYPE_DRAIN_WHEN_NO_FLAVORS,
        INSTANCE_TYPE_AWARE_CPU_MANUFACTURER,
    )
}
"""Every setting by name, in display order."""


class SettingsEnvironmentError(ValueError):
    """One or more ``GPUSTACK_*`` variables hold values their settings do not admit (all are listed)."""

    def __init__(self, errors: list[SettingValueError]) -> None:
        self.errors = errors
        super().__init__("; ".join(str(e) for e in errors))


def initial_values(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every setting's first-install value by name; raises listing every bad ``GPUSTACK_*`` variable."""
    env = os.environ if environ is None else environ
    values, errors = {}, []
    for name, setting in SETTINGS.items():
        try:
            values[name] = setting.initial_value(env)
        except SettingValueError as e:
            errors.append(e)
    if errors:
        raise SettingsEnvironmentError(errors)
    return values
