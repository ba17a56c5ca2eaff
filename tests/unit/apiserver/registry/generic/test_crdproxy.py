"""How the CRD proxy names a write's field manager when the caller names none (kube's User-Agent rule)."""

from __future__ import annotations

import pytest

from gpustack_operator.apiserver.registry.generic.crdproxy import manager_from_user_agent


@pytest.mark.parametrize(
    ("agent", "manager"),
    [
        ("kubectl/v1.37.2 (linux/amd64) kubernetes/abcdef", "kubectl"),
        ("team-tool", "team-tool"),
        ("", ""),
        ("bad\x00name\x07/1.0", "badname"),
        ("x" * 300 + "/1", "x" * 128),
    ],
)
def test_the_manager_is_the_user_agent_up_to_its_first_slash(agent: str, manager: str) -> None:
    assert manager_from_user_agent(agent) == manager
