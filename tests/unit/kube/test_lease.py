"""Leader election timing and fencing, on an in-memory Lease with the apiserver's optimistic concurrency.

`LeaseApi` keeps one Lease and refuses a write whose resourceVersion is stale (409), as kube-apiserver
does; a FakeClock makes "15 seconds later" exact. The real Lease API is exercised in
tests/integration/test_leader_election.py.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from gpustack_operator.api.json import JSONObj
from gpustack_operator.kube import errors
from gpustack_operator.kube.lease import LeaderElector, LeaseConfig
from gpustack_operator.kube.resources import LEASES, Resource
from gpustack_operator.runtime import FakeClock
from tests.helpers import eventually, yield_to_loop


class LeaseApi:
    def __init__(self) -> None:
        self.lease: JSONObj | None = None
        self.rv = 0
        self.down = False

    def _check(self, res: Resource) -> None:
        assert res == LEASES
        if self.down:
            raise errors.Unavailable(status=503, reason="ServiceUnavailable", message="down")

    async def get_or_none(self, res: Resource, name: str, namespace: str | None = None) -> JSONObj | None:
        self._check(res)
        return copy.deepcopy(self.lease)

    async def create(
        self, res: Resource, obj: JSONObj, namespace: str | None = None, dry_run: bool = False
    ) -> JSONObj:
        self._check(res)
        if self.lease is not None:
            raise errors.AlreadyExists(status=409, reason="AlreadyExists", message="exists")
        self.rv += 1
        self.lease = copy.deepcopy(obj)
        self.lease["metadata"]["resourceVersion"] = str(self.rv)
        return copy.deepcopy(self.lease)

    async def patch(self, res: Resource, name: str, patch: Any, **_: Any) -> JSONObj:
        self._check(res)
        assert self.lease is not None
        if patch["metadata"]["resourceVersion"] != self.lease["metadata"]["resourceVersion"]:
            raise errors.Conflict(status=409, reason="Conflict", message="the object has been modified")
        self.rv += 1
        spec = self.lease["spec"]
        for field, value in patch["spec"].items():
            if value is None:
                spec.pop(field, None)
            else:
                spec[field] = value
        self.lease["metadata"]["resourceVersion"] = str(self.rv)
        return copy.deepcopy(self.lease)

    @property
    def holder(self) -> str | None:
        return None if self.lease is None else self.lease["spec"].get("holderIdentity")


def elector(api: LeaseApi, clock: FakeClock, identity: str) -> LeaderElector:
    return LeaderElector(api, LeaseConfig("gpustack-system", identity), clock=clock)


async def test_the_first_candidate_creates_the_lease_and_leads() -> None:
    api, clock = LeaseApi(), FakeClock()
    a = elector(api, clock, "a")
    await a.acquire()
    assert a.is_leader
    assert api.lease is not None
    assert api.lease["metadata"] == {
        "name": "worker.gpustack.ai",
        "namespace": "gpustack-system",
        "resourceVersion": "1",
    }
    assert api.holder == "a"
    assert api.lease["spec"]["leaseDurationSeconds"] == 15
    assert api.lease["spec"]["leaseTransitions"] == 0


async def test_a_standby_takes_over_only_after_the_leader_stops_renewing_for_the_lease_duration() -> None:
    api, clock = LeaseApi(), FakeClock()
    a, b = elector(api, clock, "a"), elector(api, clock, "b")
    await a.acquire()

    # The standby sees the record now; the leader renews for a while, then dies silently.
    async def campaign() -> None:
        await b.acquire()

    task = asyncio.ensure_future(campaign())
    await yield_to_loop()
    for _ in range(10):  # a renews every 2 s for 20 s: b must keep waiting
        assert await a.try_acquire_or_renew()
        clock.advance(2.0)
        await yield_to_loop()
    assert not b.is_leader
    assert api.holder == "a"
    died_at = clock.now()
    while clock.now() < died_at + 14.0:
        clock.advance(0.5)
        await yield_to_loop()
    assert not b.is_leader, "took over before the lease duration passed"
    while not task.done():
        clock.advance(0.5)
        await yield_to_loop()
    assert b.is_leader
    assert api.holder == "b"
    assert clock.now() - died_at <= 15.0 + 2.0 * 1.2 + 2.0  # duration + one jittered retry + observation lag
    assert api.lease is not None
    assert api.lease["spec"]["leaseTransitions"] == 1


async def test_a_released_lease_is_taken_at_the_next_attempt() -> None:
    api, clock = LeaseApi(), FakeClock()
    a, b = elector(api, clock, "a"), elector(api, clock, "b")
    await a.acquire()
    assert not await b.try_acquire_or_renew()
    await a.release()
    assert api.holder is None
    assert not a.is_leader
    assert await b.try_acquire_or_renew()
    assert api.holder == "b"


async def test_release_by_a_non_leader_writes_nothing() -> None:
    api, clock = LeaseApi(), FakeClock()
    a, b = elector(api, clock, "a"), elector(api, clock, "b")
    await a.acquire()
    assert not await b.try_acquire_or_renew()
    await b.release()
    assert api.holder == "a"


async def test_a_leader_that_cannot_renew_gives_up_before_anyone_may_take_over() -> None:
    api, clock = LeaseApi(), FakeClock()
    a = elector(api, clock, "a")
    await a.acquire()
    last_renewal = clock.now()
    api.down = True
    holding = asyncio.ensure_future(a.hold())
    while not holding.done():
        clock.advance(0.5)
        await yield_to_loop()
    assert not a.is_leader
    assert clock.now() - last_renewal <= 10.0 + 2.0 + 0.5, "held on past the renew deadline (+ one period)"
    assert clock.now() - last_renewal < 15.0, "a standby could already have taken over"


async def test_a_leader_whose_lease_was_taken_stops_at_once() -> None:
    api, clock = LeaseApi(), FakeClock()
    a = elector(api, clock, "a")
    await a.acquire()
    assert api.lease is not None
    api.lease["spec"]["holderIdentity"] = "usurper"
    holding = asyncio.ensure_future(a.hold())
    await eventually(holding.done)
    assert not a.is_leader


async def test_two_candidates_racing_for_an_expired_lease_cannot_both_win() -> None:
    api, clock = LeaseApi(), FakeClock()
    a, b, c = elector(api, clock, "a"), elector(api, clock, "b"), elector(api, clock, "c")
    await a.acquire()
    assert not await b.try_acquire_or_renew()
    assert not await c.try_acquire_or_renew()
    clock.advance(16.0)
    stale = copy.deepcopy(api.lease)
    api_get = api.get_or_none

    async def both_read_the_same_version(
        res: Resource, name: str, namespace: str | None = None
    ) -> JSONObj | None:
        return copy.deepcopy(stale)

    api.get_or_none = both_read_the_same_version  # type: ignore[method-assign]
    won = [await b.try_acquire_or_renew(), await c.try_acquire_or_renew()]
    api.get_or_none = api_get  # type: ignore[method-assign]
    assert won == [True, False]
    assert api.holder == "b"


@pytest.mark.parametrize(
    ("duration", "deadline", "period"),
    [
        pytest.param(15.0, 15.0, 2.0, id="renew deadline must be shorter than the lease"),
        pytest.param(15.0, 10.0, 10.0, id="retry period must be shorter than the renew deadline"),
        pytest.param(15.0, 10.0, 0.0, id="retry period must be positive"),
    ],
)
def test_timings_that_would_allow_two_leaders_are_refused(
    duration: float, deadline: float, period: float
) -> None:
    with pytest.raises(ValueError, match="leader election needs"):
        LeaseConfig("ns", "me", lease_duration=duration, renew_deadline=deadline, retry_period=period)
