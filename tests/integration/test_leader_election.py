"""Two real worker processes: exactly one leads; the other takes over when it dies, or at once when it stops.

A SIGKILLed leader cannot release its lease, so the standby must wait until the lease expires (15 s after
the last renewal it saw) and not a moment before: taking over earlier would mean two leaders. A leader
stopped with SIGTERM releases the lease on its way out, so a standby takes over at its next attempt.
"""

from __future__ import annotations

import signal
import time
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path

import pytest_asyncio

from gpustack_operator.kube.client import Client
from gpustack_operator.sandbox.cluster import Sandbox
from tests.helpers import eventually
from tests.integration.worker_support import Workers, holder, leader_gauge, lease_spec, ready, worker_pool

LEASE_DURATION = 15.0


@pytest_asyncio.fixture(loop_scope="session")
async def pool(sandbox: Sandbox, kube: Client, tmp_path: Path) -> AsyncIterator[Workers]:
    async with worker_pool(sandbox, kube, tmp_path) as workers:
        yield workers


def micro_time(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()


async def test_one_leads_a_killed_leader_is_replaced_after_expiry_a_stopped_one_at_once(
    kube: Client, pool: Workers
) -> None:
    system_namespace = pool.namespace
    workers = {name: await pool.start(name) for name in ("worker-a", "worker-b")}

    async def elected() -> str:
        return await holder(kube, system_namespace)

    first = await eventually(elected, timeout=120, what="a leader elected")
    leader, standby = workers[first], workers[next(n for n in workers if n != first)]

    async def gauges() -> tuple[float | None, float | None]:
        pair = (leader_gauge(await leader.metrics()), leader_gauge(await standby.metrics()))
        return pair if None not in pair else None  # type: ignore[return-value]

    assert await eventually(gauges, timeout=60, what="both serving metrics") == (1.0, 0.0), (
        "exactly one leads"
    )
    await eventually(lambda: ready(standby), timeout=120, what="a standby is ready (prepared, caches synced)")

    # SIGKILL: no release. The standby takes over once the lease expired, never before.
    leader.signal(signal.SIGKILL)
    await leader.wait()
    killed_at = time.monotonic()
    last_renewal = micro_time((await lease_spec(kube, system_namespace))["renewTime"])

    async def taken_over() -> bool:
        return await holder(kube, system_namespace) == standby.name

    await eventually(taken_over, timeout=LEASE_DURATION + 90, what=f"{standby.name} takes over")
    takeover_s = time.monotonic() - killed_at
    spec = await lease_spec(kube, system_namespace)
    waited = micro_time(spec["acquireTime"]) - last_renewal
    print(
        f"\n[leader election] takeover {takeover_s:.1f}s after SIGKILL; {waited:.1f}s after the last renewal"
    )
    assert waited >= LEASE_DURATION - 0.5, "took over before the lease expired: two leaders were possible"
    assert spec["leaseTransitions"] >= 1

    # SIGTERM: the leader releases the lease as it exits 0, and a new standby takes it at its next try.
    third = await pool.start("worker-c")
    await eventually(lambda: ready(third), timeout=120, what="worker-c ready")
    standby.signal(signal.SIGTERM)
    assert await standby.wait() == 0, "SIGTERM must stop the worker cleanly"
    assert await holder(kube, system_namespace) in ("", third.name), "the stopped leader kept its lease"

    async def third_leads() -> bool:
        return await holder(kube, system_namespace) == third.name

    t0 = time.monotonic()
    await eventually(third_leads, timeout=LEASE_DURATION + 60, what="worker-c takes over")
    print(
        f"[leader election] takeover {time.monotonic() - t0:.1f}s after a SIGTERMed leader released the lease"
    )
