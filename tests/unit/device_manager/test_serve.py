"""serve's ledger writer is the one writer of Devices.status (conditional writes, rebuilt when the spec
moved, retried on the injected clock), pod events move it and free what gone pods held, the
health-recovery flag says what it does, and `--manufacturer X` holds detection back until X answers unless
`--no-fast-failed`."""

from __future__ import annotations

import argparse
import asyncio
import copy
from pathlib import Path
from typing import Any, cast

import pytest

from gpustack_operator.device_manager import command, ledger
from gpustack_operator.device_manager.allocator.pods import node_field_selector
from gpustack_operator.device_manager.allocator.sources import KubePods, pod_informer
from gpustack_operator.device_manager.serve import LedgerWriter, PodEvents, add_flags, options_from_args
from gpustack_operator.kube import errors
from gpustack_operator.kube.client import Client
from gpustack_operator.runtime import FakeClock
from gpustack_operator.settings.environment import Environment
from tests.helpers import eventually
from tests.unit.device_manager.allocator.builders import EXCLUSIVE, container, device_id, pod, whole
from tests.unit.device_manager.allocator.conftest import FakeCluster, make_allocator


def accelerator(index: int) -> dict[str, Any]:
    return {"id": f"GPU-{index}", "index": index, "physicalIndexes": [index], "status": {"unhealthy": False}}


def devices(cards: int, version: int) -> dict[str, Any]:
    group = {"id": "a10", "manufacturer": "nvidia", "accelerators": [accelerator(i) for i in range(cards)]}
    return {"metadata": {"name": "node-a", "resourceVersion": str(version)}, "spec": {"groups": [group]}}


class DevicesApi:
    """One node's Devices as the API server keeps it: a status patch whose resourceVersion is not the
    object's current one is answered 409. `on_list` runs while the writer lists pods (mid-rebuild); `pods`
    are the node's pods it lists."""

    def __init__(self, cards: int) -> None:
        self.devices = devices(cards, 1)
        self.pods: list[dict[str, Any]] = []
        self.patches: list[dict[str, Any]] = []
        self.selectors: list[str | None] = []
        self.on_list = lambda: None

    def spec_reported(self, cards: int) -> None:
        """The detect loop's Reporter writes a new spec: the object's version moves on."""
        version = int(self.devices["metadata"]["resourceVersion"]) + 1
        self.devices = {**devices(cards, version), "status": self.devices.get("status")}

    async def get_or_none(self, res: Any, name: str, namespace: str | None = None) -> dict[str, Any]:
        return copy.deepcopy(self.devices)

    async def list(self, res: Any, namespace: str | None = None, **selectors: str | None) -> list[Any]:
        self.selectors.append(selectors.get("field_selector"))
        self.on_list()
        return copy.deepcopy(self.pods)

    async def patch(self, res: Any, name: str, patch: dict[str, Any], **kw: Any) -> dict[str, Any]:
        self.patches.append(patch)
        if patch["metadata"]["resourceVersion"] != self.devices["metadata"]["resourceVersion"]:
            raise errors.Conflict(status=409, reason="Conflict", message="the object has been modified")
        version = int(self.devices["metadata"]["resourceVersion"]) + 1
        self.devices["metadata"]["resourceVersion"] = str(version)
        self.devices["status"] = patch["status"]
        return self.devices


def ledger_cards(api: DevicesApi) -> list[str]:
    status = api.devices.get("status") or {"groups": [{}]}
    return [entry["id"] for entry in status["groups"][0].get("accelerators", [])]


async def test_a_status_write_carries_the_version_it_was_rebuilt_from() -> None:
    api = DevicesApi(cards=2)
    await ledger.sync_status(cast(Client, api), "node-a")
    assert [patch["metadata"] for patch in api.patches] == [{"resourceVersion": "1"}]
    assert ledger_cards(api) == ["GPU-0", "GPU-1"]
    assert api.selectors == [node_field_selector("node-a")] == ["spec.nodeName=node-a"]


async def test_a_spec_reported_mid_rebuild_makes_the_writer_rebuild_against_it() -> None:
    api = DevicesApi(cards=2)
    api.on_list = lambda: api.spec_reported(cards=1) if len(api.selectors) == 1 else None
    writer = LedgerWriter(cast(Client, api), "node-a")
    task = asyncio.ensure_future(writer.run())
    try:
        writer.kick()
        await eventually(lambda: ledger_cards(api) == ["GPU-0"])
    finally:
        task.cancel()
    assert [patch["metadata"]["resourceVersion"] for patch in api.patches] == ["1", "2"]
    assert len(api.selectors) == 2, "the refused write was rebuilt from a fresh read, not retried as is"


async def test_a_failed_ledger_write_is_retried_after_a_pause_on_the_writers_clock() -> None:
    api = DevicesApi(cards=2)
    outage = [errors.KubeError(status=503, reason="ServiceUnavailable", message="apiserver restarting")]

    async def patch(res: Any, name: str, body: dict[str, Any], **kw: Any) -> dict[str, Any]:
        if outage:
            raise outage.pop()
        return await DevicesApi.patch(api, res, name, body, **kw)

    api.patch = patch  # type: ignore[method-assign]
    clock = FakeClock()
    writer = LedgerWriter(cast(Client, api), "node-a", clock, retry=5.0)
    task = asyncio.ensure_future(writer.run())
    try:
        writer.kick()
        await eventually(lambda: clock.pending == 1)
        assert ledger_cards(api) == [], "the write failed and is not retried before the pause"
        clock.advance(5.0)
        await eventually(lambda: ledger_cards(api) == ["GPU-0", "GPU-1"])
    finally:
        task.cancel()


def serve_flags(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_flags(parser)
    return parser.parse_args(list(argv))


def test_health_recovery_checks_default_to_three_and_must_be_at_least_one() -> None:
    assert serve_flags().health_recovery_checks == 3
    assert serve_flags("--health-recovery-checks", "1").health_recovery_checks == 1
    with pytest.raises(argparse.ArgumentError, match="at least 1"):
        serve_flags("--health-recovery-checks", "0")
    parser = argparse.ArgumentParser()
    add_flags(parser)
    assert "--health-recovery-checks N" in parser.format_help()


@pytest.mark.parametrize(
    ("flags", "awaited"),
    [
        (["--manufacturer", "nvidia"], "nvidia"),
        (["--manufacturer", "ascend", "--manufacturer", "ascend"], "ascend"),
        (["--manufacturer", "nvidia", "--no-fast-failed"], None),
        (["--manufacturer", "nvidia", "--manufacturer", "amd"], None),
        ([], None),
    ],
    ids=["one-manufacturer", "one-named-twice", "no-fast-failed", "two-manufacturers", "all-nine"],
)
def test_serve_waits_for_the_one_manufacturer_it_is_told_unless_no_fast_failed(
    flags: list[str], awaited: str | None
) -> None:
    parser = argparse.ArgumentParser()
    command.register(parser.add_subparsers())
    args = parser.parse_args(["device-manager", "serve", "--node-name", "node-a", *flags])
    assert options_from_args(args, Environment.from_environ()).awaited == awaited


def test_the_pod_informer_watches_the_pods_bound_to_the_node() -> None:
    informer = pod_informer(cast(Client, DevicesApi(cards=1)), "node-a")
    assert informer.field_selector == node_field_selector("node-a")


class Kicks:
    """Stands in for the LedgerWriter: counts kicks."""

    def __init__(self) -> None:
        self.count = 0

    def kick(self) -> None:
        self.count += 1


async def test_pods_arriving_with_allocations_or_going_move_the_ledger_and_free_reservations(
    tmp_path: Path,
) -> None:
    cluster = FakeCluster()
    allocator = make_allocator(cluster, tmp_path)
    kicks = Kicks()
    events = PodEvents(allocator, cast(KubePods, cluster), cast(LedgerWriter, kicks))
    events.on_add(pod("bare", container()))
    assert kicks.count == 0, "a pod holding nothing leaves the ledger as it is"
    events.on_add(pod("held", container(), phase="Running", allocations={"main": whole(0)}))
    assert kicks.count == 1, "e.g. the cache's first list after a restart"

    cluster.add(pod("p", container("main", {"nvidia.com/gpu": "1"}), uid="uid-p"))
    await allocator.allocate(EXCLUSIVE, [device_id(0)])
    events.on_delete(cluster.pods[0])  # also what a relist tells when the name came back with a new UID
    assert allocator.reservations.get("uid-p") is None
    assert kicks.count == 2
