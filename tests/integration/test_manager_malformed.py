"""A malformed object gets a Warning Event and a log line; the controller carries on with the others."""

from __future__ import annotations

import logging

import pytest
from prometheus_client import generate_latest

from gpustack_operator.kube import resources
from gpustack_operator.kube.client import Client
from tests.helpers import eventually
from tests.integration.manager_support import CM, DERIVED, annotated, derived, managed_cm, running_manager


async def test_bad_object_is_reported_and_skipped_while_others_converge(
    kube: Client, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="gpustack_operator.controllers")
    await kube.create(CM, managed_cm("bad", namespace, replicas="three"))
    await kube.create(CM, managed_cm("good-0", namespace, replicas="2"))
    async with running_manager(kube, namespace) as (manager, _):

        async def warned() -> list[dict[str, object]]:
            return [
                e
                for e in await kube.list(resources.EVENTS, namespace)
                if e["regarding"]["name"] == "bad" and e["reason"] == "InvalidSpec"
            ]

        [event] = await eventually(warned, timeout=60, what="an InvalidSpec Event about ConfigMap bad")
        assert event["type"] == "Warning"
        assert event["regarding"]["kind"] == "ConfigMap"
        assert "data.replicas: 'three' is not an integer" in event["note"]
        assert event["reportingController"] == "gpustack.ai/worker"
        assert any(
            f"{namespace}/bad" in r.getMessage() and "InvalidSpec" in r.getMessage() for r in caplog.records
        )
        terminal = (
            'gpustack_controller_reconcile_total{controller="derived-annotation",result="terminal"} 1.0'
        )
        assert terminal in generate_latest(manager.metrics.registry).decode(), "a terminal error was retried"

        # The controller keeps working: a new object converges, and fixing the bad one heals it.
        await kube.create(CM, managed_cm("good-1", namespace, replicas="5"))
        await kube.patch(CM, "bad", {"data": {"replicas": "3"}}, namespace=namespace)

        async def all_converged() -> bool:
            view = await annotated(kube, namespace)
            return view == {
                "bad": derived({"replicas": "3"}),
                "good-0": derived({"replicas": "2"}),
                "good-1": derived({"replicas": "5"}),
            }

        await eventually(all_converged, timeout=60, what="every ConfigMap annotated")
    final = await kube.get(CM, "bad", namespace)
    assert (final["metadata"].get("annotations") or {}).get(DERIVED) == derived({"replicas": "3"})
