"""Readiness probes: poll a component's health endpoint until it answers 200 or its process dies.

A component without a health endpoint of its own on loopback (nfd-master) is probed through what it
does instead: the probe reads an apiserver URL and a predicate decides from the body whether it is ready.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from gpustack_operator.sandbox import process


class NotReadyError(RuntimeError):
    """A component did not become ready in time (or exited); the message carries its log tail."""


@dataclass(frozen=True)
class Probe:
    """Where a component says it is healthy, and how to reach it."""

    url: str
    ca: Path | None = None
    client_cert: tuple[Path, Path] | None = None
    ready: Callable[[str], bool] | None = None
    """When set, a 200 answer counts only if this holds for its body."""

    def ssl_context(self) -> ssl.SSLContext | bool:
        if not self.url.startswith("https"):
            return False
        if self.ca is None:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        else:
            ctx = ssl.create_default_context(cafile=str(self.ca))
        if self.client_cert:
            ctx.load_cert_chain(str(self.client_cert[0]), str(self.client_cert[1]))
        return ctx


async def check(probe: Probe, timeout: float = 2.0) -> tuple[bool, str]:
    """One probe: (healthy, what it answered)."""
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session,
            session.get(probe.url, ssl=probe.ssl_context()) as resp,
        ):
            body = await resp.text()
            if resp.status == 200 and probe.ready is not None:
                ready = probe.ready(body)
                return ready, "ready (judged from what it wrote)" if ready else "not ready yet"
            return resp.status == 200, f"{resp.status} {body[:200].strip()}"
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        return False, f"{type(exc).__name__}: {exc}"


async def wait_ready(name: str, probe: Probe, started: process.Started, timeout: float = 120.0) -> float:
    """Poll until healthy; return the seconds it took. Raises NotReady with the log tail on failure."""
    t0 = time.monotonic()
    answer = ""
    while time.monotonic() - t0 < timeout:
        if not process.alive(started.pid, started.started_at):
            raise NotReadyError(
                f"{name} exited during start-up; last log lines ({started.log}):\n{process.tail(started.log)}"
            )
        ok, answer = await check(probe)
        if ok:
            return time.monotonic() - t0
        await asyncio.sleep(0.2)
    raise NotReadyError(
        f"{name} not ready after {timeout:.0f}s (last answer: {answer}); last log lines "
        f"({started.log}):\n{process.tail(started.log)}"
    )
