"""Keep every resource server registered with the kubelet, across kubelet and plugin restarts.

A restarting kubelet deletes every socket in the device-plugin directory and forgets its plugins; nothing
reconnects on the plugin's behalf. So, in generations: start all servers, register each (awaiting the
kubelet's answer), then watch the directory - a new `kubelet.sock` inode, or one of our sockets gone, ends
the generation, and the next one starts fresh servers and registers again. Registration failures are
retried with backoff; a kubelet that has not created its socket yet is waited for. Every wait (the
directory poll, the backoff) is on an injectable Clock, so tests move its time.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Sequence
from pathlib import Path

import grpc

from gpustack_operator.device_manager.plugin.server import ResourceServer
from gpustack_operator.runtime import Backoff, Clock, MonotonicClock

log = logging.getLogger(__name__)

RETRY = Backoff(base=0.5, cap=30.0, jitter=0.2)


def _inode(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:
        return None


class Registrar:
    """Runs the generations of a set of resource servers against one kubelet socket."""

    def __init__(
        self,
        servers: Sequence[ResourceServer],
        kubelet_socket: Path,
        *,
        poll: float = 1.0,
        backoff: Backoff = RETRY,
        clock: Clock | None = None,
    ) -> None:
        self.servers = list(servers)
        self.kubelet_socket = kubelet_socket
        self.poll = poll
        self.backoff = backoff
        self.clock: Clock = clock or MonotonicClock()
        self.generation = 0
        self.registered = asyncio.Event()

    async def run(self) -> None:
        """Serve and register forever; on cancellation stop every server."""
        try:
            while True:
                inode = await self._start_generation()
                await self._wait_for_restart(inode)
                self.registered.clear()
                log.info("kubelet socket changed; re-registering generation=%d", self.generation + 1)
        finally:
            await asyncio.gather(*(server.stop() for server in self.servers))

    async def _start_generation(self) -> int | None:
        attempts = self.backoff.attempts()
        while True:
            inode = await self._wait_for_kubelet()
            try:
                for server in self.servers:
                    await server.start()
                for server in self.servers:
                    await server.register(self.kubelet_socket)
            except (grpc.aio.AioRpcError, OSError, TimeoutError, RuntimeError) as err:
                delay = attempts.next_delay()
                log.warning(
                    "registration with kubelet=%s failed, retrying in %.1fs: %s",
                    self.kubelet_socket,
                    delay,
                    err,
                )
                await self.clock.sleep(delay)
                continue
            self.generation += 1
            self.registered.set()
            log.info(
                "generation=%d registered resources=%s",
                self.generation,
                ",".join(s.resource.name for s in self.servers),
            )
            return inode

    async def _wait_for_kubelet(self) -> int:
        announced = False
        while (inode := _inode(self.kubelet_socket)) is None:
            if not announced:
                log.info("waiting for the kubelet socket %s", self.kubelet_socket)
                announced = True
            await self.clock.sleep(self.poll)
        return inode

    async def _wait_for_restart(self, inode: int | None) -> None:
        while True:
            await self.clock.sleep(self.poll)
            if _inode(self.kubelet_socket) != inode:
                return
            lost = [s.resource.name for s in self.servers if not s.socket.exists()]
            if lost:
                log.info("plugin sockets removed resources=%s", ",".join(lost))
                return
