"""Leader election on a coordination.k8s.io Lease, so that one worker replica reconciles at a time.

The worker runs with more than one replica for availability; two replicas reconciling the same objects
would race each other's writes. Replicas compete for one Lease (`worker.gpustack.ai` in the system
namespace): the holder renews it every `retry_period`; the others retry every `retry_period` and may take
it only once it has gone `lease_duration` without a change, or once the holder released it.

Expiry is judged by *our* monotonic clock from the moment we last saw the record change, never by
comparing the timestamps in the record with our wall clock, so clock skew between nodes cannot produce two
leaders. Every write carries the resourceVersion we read, so two candidates racing for an expired lease
cannot both win. A leader that fails to renew for `renew_deadline` (shorter than `lease_duration`) gives
up leadership before anyone else may take it: that gap is the fence that lets it stop reconciling first.
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gpustack_operator.api.json import JSONObj
from gpustack_operator.kube import errors
from gpustack_operator.kube.resources import LEASES
from gpustack_operator.kube.verbs import ObjectVerbs
from gpustack_operator.runtime import Clock, MonotonicClock

__all__ = ["LeaderElector", "LeaseClient", "LeaseConfig", "micro_time"]

log = logging.getLogger(__name__)


def micro_time(when: datetime | None = None) -> str:
    """A Kubernetes MicroTime (`2006-01-02T15:04:05.000000Z`)."""
    return (when or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


LeaseClient = ObjectVerbs
"""The verbs this module needs; kube.client.Client has them."""


@dataclass(frozen=True)
class LeaseConfig:
    """Which Lease, who we are, and the timing (client-go's defaults are 15/10/2 s as well)."""

    namespace: str
    identity: str
    name: str = "worker.gpustack.ai"
    lease_duration: float = 15.0
    """Seconds a candidate waits after the last change it saw before taking the lease."""
    renew_deadline: float = 10.0
    """Seconds a leader keeps retrying a renewal before it gives up leadership."""
    retry_period: float = 2.0
    """Seconds between attempts, to acquire or to renew."""

    def __post_init__(self) -> None:
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError("leader election needs 0 < retry_period < renew_deadline < lease_duration")


class LeaderElector:
    """Acquire, hold and release one Lease; `is_leader` is true only between acquire and loss."""

    def __init__(self, client: LeaseClient, config: LeaseConfig, *, clock: Clock | None = None) -> None:
        self.config = config
        self._client = client
        self._clock: Clock = clock or MonotonicClock()
        self._leader = False
        self._seen: JSONObj | None = None  # the last spec we observed, and when (our clock)
        self._seen_at = 0.0
        self._rv: str | None = None

    @property
    def is_leader(self) -> bool:
        return self._leader

    @property
    def where(self) -> str:
        return f"{self.config.namespace}/{self.config.name}"

    async def acquire(self) -> None:
        """Return once we hold the lease (retrying every `retry_period`, slightly jittered)."""
        log.info("Lease %s: %s is waiting to lead", self.where, self.config.identity)
        while not await self._attempt("acquire"):
            await self._clock.sleep(self.config.retry_period * (1 + 0.2 * random.random()))
        self._leader = True
        log.info("Lease %s: %s became the leader", self.where, self.config.identity)

    async def hold(self) -> None:
        """Renew the lease until a renewal fails for `renew_deadline`; return having lost leadership.

        Cancelling it (shutdown) keeps `is_leader` true, so that `release()` can give the lease up.
        """
        while await self._renew_within_deadline():
            await self._clock.sleep(self.config.retry_period)
        self._leader = False
        log.warning("Lease %s: %s lost leadership", self.where, self.config.identity)

    async def release(self) -> None:
        """Give the lease up now (on shutdown) so that a standby need not wait for it to expire."""
        if not self._leader:
            return
        self._leader = False
        patch = {
            "metadata": {"resourceVersion": self._rv},
            "spec": {"holderIdentity": None, "leaseDurationSeconds": 1, "renewTime": micro_time()},
        }
        try:
            # Bounded: shutdown must not wait out the client's retries; an unreleased lease just expires.
            async with asyncio.timeout(self.config.retry_period):
                await self._client.patch(LEASES, self.config.name, patch, namespace=self.config.namespace)
        except (errors.KubeError, TimeoutError) as e:
            log.warning(
                "Lease %s: %s could not release it (it will expire): %s",
                self.where,
                self.config.identity,
                e or "timed out",
            )
            return
        self._seen = None
        log.info("Lease %s: %s released it", self.where, self.config.identity)

    async def _renew_within_deadline(self) -> bool:
        deadline = self._clock.now() + self.config.renew_deadline
        while True:
            try:
                async with asyncio.timeout(max(0.0, deadline - self._clock.now())):
                    if await self._attempt("renew"):
                        return True
            except TimeoutError:
                return False
            if (self._seen or {}).get("holderIdentity") != self.config.identity:
                return False  # someone else holds it now: no point retrying
            if self._clock.now() + self.config.retry_period >= deadline:
                return False
            await self._clock.sleep(self.config.retry_period)

    async def _attempt(self, what: str) -> bool:
        try:
            return await self.try_acquire_or_renew()
        except errors.KubeError as e:
            log.info("Lease %s: %s by %s failed: %s", self.where, what, self.config.identity, e)
            return False

    async def try_acquire_or_renew(self) -> bool:
        """One attempt: create the lease, renew ours, or take an expired or released one; True if held."""
        cfg, now = self.config, micro_time()
        lease = await self._client.get_or_none(LEASES, cfg.name, cfg.namespace)
        if lease is None:
            spec = self._spec(acquired=now, renewed=now, transitions=0)
            body = {"metadata": {"name": cfg.name, "namespace": cfg.namespace}, "spec": spec}
            try:
                return self._observe(await self._client.create(LEASES, body, cfg.namespace))
            except errors.AlreadyExists:
                return False
        held = self._observe(lease)
        spec = lease.get("spec") or {}
        if not held and spec.get("holderIdentity") and not self._expired(spec):
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        acquired = spec.get("acquireTime") if held else now
        new_spec = self._spec(acquired=acquired, renewed=now, transitions=transitions + (not held))
        patch = {"metadata": {"resourceVersion": self._rv}, "spec": new_spec}
        try:
            updated = await self._client.patch(LEASES, cfg.name, patch, namespace=cfg.namespace)
        except errors.Conflict:
            return False
        return self._observe(updated)

    def _spec(self, *, acquired: Any, renewed: str, transitions: int) -> JSONObj:
        return {
            "holderIdentity": self.config.identity,
            "leaseDurationSeconds": round(self.config.lease_duration),
            "acquireTime": acquired,
            "renewTime": renewed,
            "leaseTransitions": transitions,
        }

    def _observe(self, lease: JSONObj) -> bool:
        """Remember the record (restarting the expiry clock if it changed); True if we hold it."""
        spec = lease.get("spec") or {}
        if spec != self._seen:
            self._seen, self._seen_at = dict(spec), self._clock.now()
        self._rv = lease.get("metadata", {}).get("resourceVersion")
        return bool(spec.get("holderIdentity") == self.config.identity)

    def _expired(self, spec: JSONObj) -> bool:
        duration = float(spec.get("leaseDurationSeconds") or self.config.lease_duration)
        return self._clock.now() >= self._seen_at + duration
