"""Two writers on one object: the controller's stale writes conflict and are retried, nobody's update is lost.

Another client keeps changing the ConfigMap's data while the controller derives an annotation from it. The
controller's first write is made deliberately stale (it waits, after reading its cache, until the other
writer has written), so the apiserver must refuse it with 409; the manager retries, and in the end the
annotation matches the other writer's last data, which the controller never overwrote.
"""

from __future__ import annotations

import asyncio

from prometheus_client import generate_latest

from gpustack_operator.kube.client import Client
from tests.helpers import eventually
from tests.integration.manager_support import CM, DERIVED, derived, managed_cm, running_manager

WRITES = 30


async def test_a_controller_and_another_writer_both_win(kube: Client, namespace: str) -> None:
    paused, resume = asyncio.Event(), asyncio.Event()
    async with running_manager(kube, namespace, concurrency=1) as (manager, reconciler):

        async def stale_first_write(key: str) -> None:
            if not paused.is_set():  # first write: the cache was read; let the other writer go first
                paused.set()
                await asyncio.wait_for(resume.wait(), timeout=120)

        reconciler.before_write = stale_first_write
        await kube.create(CM, managed_cm("contested", namespace, counter="0"))
        await asyncio.wait_for(paused.wait(), timeout=120)
        for n in range(1, WRITES + 1):
            await kube.patch(CM, "contested", {"data": {"counter": str(n)}}, namespace=namespace)
            resume.set()
            await asyncio.sleep(0.05)  # pace the other writer so both interleave

        async def settled() -> bool:
            cm = await kube.get(CM, "contested", namespace)
            return (cm["metadata"].get("annotations") or {}).get(DERIVED) == derived(cm["data"])

        await eventually(settled, timeout=120, what="annotation derived from the final data")
        metrics = generate_latest(manager.metrics.registry).decode()
    final = await kube.get(CM, "contested", namespace)
    assert final["data"] == {"counter": str(WRITES)}, "the other writer's last update was lost"
    assert reconciler.conflicts >= 1, "the stale write was not refused"
    assert 'result="conflict"' in metrics
    print(
        f"\n[conflicts] {reconciler.conflicts} conflicts, {reconciler.writes} writes, "
        f"{reconciler.reconciles} reconciles"
    )
