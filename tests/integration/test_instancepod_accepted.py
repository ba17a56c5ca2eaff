"""Every Pod shape an Instance renders is one kube-apiserver and Kueue's webhook accept (server dry-run).

The unit tests pin the fields; only the real API server can say the whole object is a valid Pod (port
names, extended-resource rules, volume sources, owner references, security context).
"""

from __future__ import annotations

from typing import Any

import pytest

from gpustack_operator.kube import resources
from gpustack_operator.kube.client import Client
from gpustack_operator.rules.instance.pod import PodSettings, render_pod
from tests.unit.rules.instance.test_pod import cpu_only, h100, instance, sliceable_a10

pytestmark = pytest.mark.asyncio(loop_scope="session")

SLICE = {
    "cpu": "2",
    "ram": "8Gi",
    "localStorage": "15Gi",
    "accelerator": "1",
    "acceleratorSlicedMemoryPercentage": 25,
    "acceleratorSlicedCoresPercentage": 50,
}
FULL = {
    "sshPublicKey": {"name": "alice-key"},
    "imagePullSecret": {"name": "cred"},
    "ports": [{"port": 8888, "name": "jupyter"}, {"port": 5353, "protocol": "UDP"}],
    "env": [{"name": "A", "value": "1"}],
    "command": ["sleep", "infinity"],
    "privileged": True,
}


@pytest.mark.parametrize(
    ("spec", "kind"),
    [
        pytest.param(FULL, h100(), id="two whole cards, ssh, pull secret, ports, privileged"),
        pytest.param({**FULL, "resources": SLICE}, sliceable_a10(), id="a slice with ssh"),
        pytest.param(
            {
                "resources": {"cpu": "500m", "ram": "1Gi", "localStorage": "1Gi"},
                "volume": {"persistent": {"name": "data"}},
                "sshPublicKey": {"name": "k"},
            },
            cpu_only(),
            id="CPU-only half a core, persistent workspace, ssh",
        ),
    ],
)
@pytest.mark.parametrize("overcommit", [True, False], ids=["overcommit", "exact"])
async def test_rendered_pod_is_accepted(
    kube: Client, kueue_namespace: str, spec: dict[str, Any], kind: dict[str, Any], overcommit: bool
) -> None:
    inst = instance(**spec)
    inst["metadata"]["namespace"] = kueue_namespace
    pod = render_pod(
        inst, kind, PodSettings(overcommit=overcommit, ssh_server_image="gpustack/ssh-server:v1.3.0")
    )
    accepted = await kube.create(resources.PODS, pod, dry_run=True)
    assert accepted["metadata"]["name"] == "alice-ws"
    assert [c["resources"] for c in accepted["spec"]["containers"]] == [
        c.get("resources", {}) for c in pod["spec"]["containers"]
    ]
