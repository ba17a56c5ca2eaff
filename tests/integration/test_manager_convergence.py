"""A controller converges 1,000 objects with one write each, then stays quiet: no hot loop."""

from __future__ import annotations

import asyncio
import time

from gpustack_operator.kube.client import Client
from tests.helpers import consistently, eventually
from tests.integration.manager_support import CM, SELECTOR, annotated, derived, managed_cm, running_manager

OBJECTS = 1000
QUIET = 10.0
"""Seconds of observation after convergence in which nothing may be written or reconciled."""


async def create_many(kube: Client, namespace: str) -> None:
    semaphore = asyncio.Semaphore(20)

    async def create(n: int) -> None:
        async with semaphore:
            await kube.create(CM, managed_cm(f"cm-{n:04d}", namespace, n=str(n)))

    await asyncio.gather(*(create(n) for n in range(OBJECTS)))


async def versions(kube: Client, namespace: str) -> dict[str, str]:
    items = await kube.list(CM, namespace, label_selector=SELECTOR)
    return {cm["metadata"]["name"]: cm["metadata"]["resourceVersion"] for cm in items}


async def test_thousand_objects_converge_with_one_write_each_and_then_nothing_moves(
    kube: Client, namespace: str
) -> None:
    await create_many(kube, namespace)
    t0 = time.monotonic()
    async with running_manager(kube, namespace) as (manager, reconciler):

        async def all_annotated() -> bool:
            view = await annotated(kube, namespace)
            done = sum(1 for name, value in view.items() if value == derived({"n": str(int(name[3:]))}))
            return done == OBJECTS

        await eventually(all_annotated, timeout=600, interval=1.0, what=f"{OBJECTS} ConfigMaps annotated")
        converge_s = time.monotonic() - t0
        controller = manager.controllers["derived-annotation"]

        async def idle() -> bool:
            queue = controller.queue
            return queue is not None and queue.depth == 0 and queue.in_flight == 0 and queue.delayed == 0

        await eventually(idle, timeout=120, what="work queue drained")
        before = await versions(kube, namespace)
        reconciles, writes = reconciler.reconciles, reconciler.writes
        await consistently(
            lambda: reconciler.reconciles == reconciles and reconciler.writes == writes,
            duration=QUIET,
            what="no reconcile or write after convergence",
        )
        after = await versions(kube, namespace)
        print(
            f"\n[convergence] {OBJECTS} objects in {converge_s:.1f}s: {reconciler.reconciles} reconciles, "
            f"{reconciler.writes} writes, {reconciler.conflicts} conflicts"
        )
    assert writes == OBJECTS, "each object needs exactly one write to converge"
    assert reconciler.writes == writes, "wrote again after convergence"
    assert reconciler.reconciles == reconciles, "kept reconciling after convergence (hot loop)"
    assert after == before, "objects changed after convergence"
