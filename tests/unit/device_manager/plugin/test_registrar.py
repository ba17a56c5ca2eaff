"""Registration with a kubelet that behaves like 1.25+, plugin crashes, re-registration after a restart, and
retries that wait on the registrar's clock.

The kubelet side is the sandbox's stand-in registry, in process, on real unix sockets.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from gpustack_operator.device_manager.plugin.api import VERSION, pb, rpc
from gpustack_operator.device_manager.plugin.registrar import Registrar
from gpustack_operator.device_manager.plugin.server import ResourceServer
from gpustack_operator.runtime import Backoff, FakeClock, Supervisor
from gpustack_operator.sandbox.kubelet_registry import DeviceRegistry, is_extended_resource_name
from tests.helpers import eventually
from tests.unit.device_manager.allocator.builders import EXCLUSIVE, SHARED, inventory
from tests.unit.device_manager.plugin.conftest import RecordingHandler

FAST = Backoff(base=0.05, cap=0.2)


@contextlib.asynccontextmanager
async def kubelet(directory: Path, grace: float = 300.0) -> AsyncIterator[DeviceRegistry]:
    registry = DeviceRegistry(directory, lambda: None, grace_period=grace)
    await registry.start()
    try:
        yield registry
    finally:
        await registry.stop()


@contextlib.asynccontextmanager
async def plugins(directory: Path, handler: RecordingHandler, **options: Any) -> AsyncIterator[Registrar]:
    servers = [ResourceServer(spec, inventory(), handler, directory) for spec in (EXCLUSIVE, SHARED)]
    registrar = Registrar(servers, directory / "kubelet.sock", **{"poll": 0.05, "backoff": FAST, **options})
    async with Supervisor("test") as sup:
        sup.spawn("registrar", registrar.run)
        yield registrar


def listed(registry: DeviceRegistry) -> dict[str, tuple[int, int]] | None:
    done = {"nvidia.com/gpu", "nvidia.com/gpu.shared"} <= {
        n for n, e in registry.endpoints.items() if e.listed
    }
    return registry.capacity() if done else None


async def test_plugins_register_and_the_kubelet_counts_capacity_and_allocatable(
    sock_dir: Path, handler: RecordingHandler
) -> None:
    async with kubelet(sock_dir) as registry, plugins(sock_dir, handler) as registrar:

        async def counted() -> dict[str, tuple[int, int]] | None:
            return listed(registry)

        counts = await eventually(counted, timeout=30, interval=0.05, what="both resources listed")
        assert counts == {"nvidia.com/gpu": (2, 2), "nvidia.com/gpu.shared": (20, 20)}
        assert registrar.generation == 1
        options = registry.endpoints["nvidia.com/gpu"].options
        assert options.get_preferred_allocation_available


async def test_a_dead_plugin_keeps_capacity_loses_allocatable_then_drops_to_zero_after_grace(
    sock_dir: Path, handler: RecordingHandler
) -> None:
    async with kubelet(sock_dir, grace=0.3) as registry:
        async with plugins(sock_dir, handler):

            async def up() -> dict[str, tuple[int, int]] | None:
                return listed(registry)

            await eventually(up, timeout=30, interval=0.05, what="registered")

        async def unhealthy() -> bool:
            return registry.capacity().get("nvidia.com/gpu") in {(2, 0), (0, 0)}

        await eventually(unhealthy, timeout=30, interval=0.02, what="allocatable 0 after the plugin died")

        async def removed() -> bool:
            return registry.capacity() == {"nvidia.com/gpu": (0, 0), "nvidia.com/gpu.shared": (0, 0)}

        await eventually(removed, timeout=30, interval=0.05, what="capacity written 0 after the grace period")


async def test_a_restarted_kubelet_wipes_sockets_and_the_plugins_register_again(
    sock_dir: Path, handler: RecordingHandler
) -> None:
    async with plugins(sock_dir, handler) as registrar:
        async with kubelet(sock_dir) as first:

            async def on_first() -> dict[str, tuple[int, int]] | None:
                return listed(first)

            await eventually(on_first, timeout=30, interval=0.05, what="registered with the first kubelet")
        async with kubelet(sock_dir) as second:

            async def on_second() -> dict[str, tuple[int, int]] | None:
                return listed(second)

            counts = await eventually(on_second, timeout=30, interval=0.05, what="re-registered")
        assert counts["nvidia.com/gpu"] == (2, 2)
        assert registrar.generation >= 2


async def test_plugins_wait_for_a_kubelet_that_is_not_up_yet(
    sock_dir: Path, handler: RecordingHandler
) -> None:
    async with plugins(sock_dir, handler) as registrar:
        assert not registrar.registered.is_set()
        async with kubelet(sock_dir) as registry:

            async def up() -> dict[str, tuple[int, int]] | None:
                return listed(registry)

            await eventually(up, timeout=30, interval=0.05, what="registered once the kubelet came")


async def test_a_failed_registration_is_retried_after_the_backoff_on_the_registrars_clock(
    sock_dir: Path, handler: RecordingHandler, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    socket = sock_dir / "kubelet.sock"
    socket.write_text("")  # a kubelet.sock nothing listens on: registering is refused
    backoff = Backoff(base=5.0, cap=5.0)
    with caplog.at_level(logging.WARNING, logger="gpustack_operator.device_manager.plugin.registrar"):
        async with plugins(sock_dir, handler, poll=1.0, backoff=backoff, clock=clock) as registrar:

            async def backing_off() -> bool:
                return "failed, retrying in 5.0s" in caplog.text and clock.pending == 1

            await eventually(
                backing_off, timeout=30, interval=0.01, what="asleep on the clock after a failure"
            )
            socket.unlink()
            async with kubelet(sock_dir) as registry:
                await asyncio.sleep(0.2)  # real time passes; the registrar's does not
                assert not registrar.registered.is_set()
                assert not registry.endpoints
                clock.advance(5.0)

                async def up() -> dict[str, tuple[int, int]] | None:
                    return listed(registry)

                counts = await eventually(up, timeout=30, interval=0.05, what="registered after the backoff")
                assert counts["nvidia.com/gpu"] == (2, 2)
                assert registrar.generation == 1
    assert caplog.text.count("failed, retrying") == 1


@pytest.mark.parametrize(
    ("version", "resource", "message"),
    [("v1alpha1", "nvidia.com/gpu", "not supported by kubelet"),
     (VERSION, "gpu", "is invalid"), (VERSION, "kubernetes.io/gpu", "is invalid")],
    ids=["old-version", "no-domain", "kubernetes-namespace"],
)  # fmt: skip
async def test_the_kubelet_refuses_bad_registrations_with_its_messages(
    sock_dir: Path, version: str, resource: str, message: str
) -> None:
    async with (
        kubelet(sock_dir),
        grpc.aio.insecure_channel(f"unix://{sock_dir / 'kubelet.sock'}") as channel,
    ):
        request = pb.RegisterRequest(version=version, endpoint="x.sock", resource_name=resource)
        with pytest.raises(grpc.aio.AioRpcError, match=message):
            await rpc.RegistrationStub(channel).Register(request, timeout=10)


def test_extended_resource_names_follow_the_kubelets_rule() -> None:
    assert is_extended_resource_name("nvidia.com/gpu.shared")
    assert is_extended_resource_name("device.gpustack.ai/nvidia.visibility")
    assert not is_extended_resource_name("cpu")
    assert not is_extended_resource_name("requests.nvidia.com/gpu")
