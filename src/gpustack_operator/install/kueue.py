"""The Kueue subchart's values: Kueue's Configuration for a cluster, from the rules the sandbox's Kueue runs.

Kueue's Helm chart takes its whole Configuration as one YAML string
(`managerConfig.controllerManagerConfigYaml`) and writes it into the `kueue-manager-config` ConfigMap (the
name, with `fullnameOverride: kueue`, is the one the worker reads back to check the transformations are
there). Ours is rules.capacity.kueueconfig's
`manager_configuration` (integrations, resource transformations and exclusions, client tuning) plus what
Kueue's own chart sets for a Deployment: probe and metrics ports, the webhook port, leader election. The
chart leaves `internalCertManagement` to the subchart, which names its own Service and Secret.

Manufacturers come from the built-in table (no `GPUSTACK_*` override of the machine that generates the chart
leaks in): every manufacturer's transformations are there whether or not the chart runs its device manager,
which costs nothing, since a resource no Pod asks for is never transformed.
"""

from __future__ import annotations

from typing import Any, Final

import yaml

from gpustack_operator.rules.capacity.kueueconfig import manager_configuration

__all__ = ["FULLNAME", "kueue_configuration", "kueue_values", "kueue_values_block"]

FULLNAME: Final = "kueue"
"""The subchart's fullnameOverride: objects named kueue-*, as in Kueue's own release manifests."""
_IN_CLUSTER: Final = {
    "health": {"healthProbeBindAddress": ":8081"},
    "metrics": {"bindAddress": ":8443"},
    "webhook": {"port": 9443},
    "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
}
"""What Kueue v0.17's chart configures for its Deployment (its default controllerManagerConfigYaml)."""


def kueue_configuration() -> dict[str, Any]:
    """Kueue's Configuration as the chart installs it."""
    return {**manager_configuration(environ={}), **_IN_CLUSTER}


def kueue_values() -> dict[str, Any]:
    """The `kueue:` values of our chart."""
    return {
        "enabled": True,
        "fullnameOverride": FULLNAME,
        "managerConfig": {
            "controllerManagerConfigYaml": yaml.safe_dump(kueue_configuration(), sort_keys=False)
        },
    }


class _LiteralDumper(yaml.SafeDumper):
    """Writes multi-line strings as `|` blocks, so the embedded Configuration reads as YAML in values.yaml."""


def _text(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None)


_LiteralDumper.add_representer(str, _text)


def kueue_values_block() -> str:
    """The lines between values.yaml's generated-block markers."""
    body = yaml.dump({"kueue": kueue_values()}, Dumper=_LiteralDumper, sort_keys=False, width=120)
    return (
        "# Kueue as a subchart (kueue.enabled); its Configuration is generated from the operator's code:\n"
        "# the integrations and the per-manufacturer credit transformations the GPU pools depend on.\n"
        "# Installing Kueue yourself? Run it with this Configuration (README, Install on a cluster).\n" + body
    )
