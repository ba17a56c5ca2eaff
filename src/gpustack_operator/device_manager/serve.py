"""`device-manager serve`: the per-node agent the DaemonSet runs.

It wires the parts together: the detect loop (publishes NodeFeature/Devices, feeds the plugin
inventories, holds a faulted card unhealthy until it has read healthy `--health-recovery-checks` times in
a row; with `--manufacturer` naming one manufacturer it publishes nothing until that one's cards have
answered once, unless `--no-fast-failed`, see monitor.py), one resource server per (manufacturer, mode)
kept registered with the kubelet for every manufacturer that has cards now (plugin/vendors.py: a driver
that loads late gets its servers, a vendor whose cards all go has them stopped), the node's
allocator over an informer of the node's pods, and a ledger writer that rebuilds Devices.status whenever
an allocation is recorded, a pod comes or goes, or the detect loop reports: it is the only writer of
Devices.status, and each write is conditional on the resourceVersion it was rebuilt from, so a spec
reported meanwhile makes it rebuild rather than leave a ledger of the old cards. The metrics (metrics.py)
are fed from the same places: the allocator times each Allocate, the detect loop's listener counts the
cards by health, the ledger writer the holders and oversold cards. Everything runs as named
tasks under one Supervisor, so SIGTERM stops it cleanly and a crashed task is restarted with backoff;
every wait between periods is on an injectable Clock.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpustack_operator.api.types.devices import DeviceAllocationMode, DevicesGroup
from gpustack_operator.device_manager import ledger
from gpustack_operator.device_manager.allocator import audit
from gpustack_operator.device_manager.allocator import pods as p
from gpustack_operator.device_manager.allocator.allocator import Allocator, AllocatorConfig
from gpustack_operator.device_manager.allocator.annotation import ANNOTATION
from gpustack_operator.device_manager.allocator.sources import KubePods, KubePodWriter, pod_informer
from gpustack_operator.device_manager.allocator.workdirs import HostPaths
from gpustack_operator.device_manager.health import DEFAULT_RECOVERY_CHECKS, HealthGate
from gpustack_operator.device_manager.metrics import DeviceMetrics, parse_bind_address, serve_metrics
from gpustack_operator.device_manager.model import Backend
from gpustack_operator.device_manager.monitor import DetectLoop
from gpustack_operator.device_manager.plugin.api import KUBELET_SOCKET
from gpustack_operator.device_manager.plugin.handler import ResourceSpec
from gpustack_operator.device_manager.plugin.inventory import Inventory
from gpustack_operator.device_manager.plugin.server import ResourceServer
from gpustack_operator.device_manager.plugin.vendors import VendorPlugins
from gpustack_operator.device_manager.podresources.api import POD_RESOURCES_SOCKET
from gpustack_operator.device_manager.podresources.client import PodResourcesClient
from gpustack_operator.device_manager.reporting import Reporter
from gpustack_operator.kube.client import Client, connect
from gpustack_operator.kube.errors import Conflict, KubeError
from gpustack_operator.rules.naming.manufacturers import known_manufacturers
from gpustack_operator.rules.naming.resources import (
    CARD_MODE_KINDS,
    acceleratable_resource_name,
    is_known_acceleratable_resource_name,
    visibility_resource_name,
)
from gpustack_operator.runtime import Clock, MonotonicClock, Supervisor, run_until_signal
from gpustack_operator.settings.environment import Environment

log = logging.getLogger(__name__)

_DURATION = re.compile(r"(?P<n>\d+(?:\.\d+)?)(?P<unit>ms|s|m|h)?")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}
GC_PERIOD = 300.0
"""Most seconds between sweeps of ghost reservations and per-pod work directories; sweeps come every retry
window of the allocator when that is shorter (a deleted pod's directory goes with the next one)."""
DEFAULT_METRICS_ADDRESS = "127.0.0.1:9402"


def parse_duration(text: str) -> float:
    """Seconds in `15s`, `500ms`, `2m`, `1h` or a bare number of seconds."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 15s, 500ms or 2m")
    return float(match["n"]) * _UNIT_SECONDS[match["unit"]]


def _bind_address(text: str) -> str:
    """A `--metrics-bind-address` value, checked (argparse type)."""
    try:
        parse_bind_address(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from err
    return text


def positive_int(text: str) -> int:
    """An integer of at least 1 (argparse type)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return value


def add_flags(parser: argparse.ArgumentParser) -> None:
    """`serve`'s own flags (the backend flags come from the command module)."""
    parser.add_argument("--no-sliced", action="store_true", help="do not serve <base>.sliced")
    parser.add_argument("--no-shared", action="store_true", help="do not serve <base>.shared")
    parser.add_argument(
        "--kube-socket",
        type=Path,
        default=Path(KUBELET_SOCKET),
        help="the kubelet's device-plugin registration socket (default: %(default)s)",
    )
    parser.add_argument(
        "--device-plugin-dir", type=Path, help="where plugin sockets go (default: the kube socket's dir)"
    )
    parser.add_argument(
        "--pod-resources-socket",
        type=Path,
        default=Path(POD_RESOURCES_SOCKET),
        help="the kubelet's PodResources socket, asked on every Allocate which pod the kubelet is admitting; "
        "when it is missing, Allocate guesses the oldest pending pod (default: %(default)s)",
    )
    parser.add_argument(
        "--monitor-period",
        type=parse_duration,
        default=15.0,
        help="how often to re-detect cards and their health, e.g. 15s or 1m (default: 15s)",
    )
    parser.add_argument(
        "--health-recovery-checks",
        type=positive_int,
        default=DEFAULT_RECOVERY_CHECKS,
        metavar="N",
        help="a card that turned unhealthy (ECC error, lost, gone from the bus) is reported healthy again, "
        "to the kubelet and in its Devices object, once N detections in a row read it healthy; 1 heals it "
        "at the first healthy reading. A fault is always reported at once (default: %(default)s)",
    )
    parser.add_argument(
        "--no-fast-failed",
        action="store_true",
        help="with --manufacturer naming one manufacturer, a first detection that finds none of its cards "
        "(driver not loaded yet) is normally held back: nothing is published or served and detection "
        "repeats every period, logged as an error each time. This flag publishes that empty result like "
        "any other. Neither ends the process",
    )
    parser.add_argument("--kubeconfig", type=Path, help="kubeconfig (default: in-cluster)")
    parser.add_argument(
        "--metrics-bind-address",
        type=_bind_address,
        default=DEFAULT_METRICS_ADDRESS,
        metavar="HOST:PORT",
        help="where to serve Prometheus /metrics (Allocate latency and refusals, cards by health, ledger "
        "holders, oversold cards); `:9402` listens on "
        "every interface, 0 turns it off (default: %(default)s)",
    )


@dataclass(frozen=True)
class ServeOptions:
    node: str
    manufacturers: Sequence[str]
    kube_socket: Path
    plugin_dir: Path
    pod_resources_socket: Path
    monitor_period: float
    paths: HostPaths
    namespace: str
    no_shared: bool = False
    no_sliced: bool = False
    kubeconfig: Path | None = None
    fast_failed: bool = True
    """False with `--no-fast-failed`: publish a first detection that found none of the cards asked for."""
    health_recovery_checks: int = DEFAULT_RECOVERY_CHECKS
    metrics_address: str = "0"
    """`--metrics-bind-address` (`0`: no metrics server)."""

    @property
    def awaited(self) -> str | None:
        """The manufacturer whose cards must be detected once before anything is published: the one
        manufacturer served, unless `--no-fast-failed` (None: publish from the first detection)."""
        named = set(self.manufacturers)
        return next(iter(named)) if self.fast_failed and len(named) == 1 else None


def resource_specs(manufacturer: str, inventory: Inventory, opts: ServeOptions) -> list[ResourceSpec]:
    """The resources one manufacturer's cards are served as (sliced only when its cards can be)."""
    specs = []
    for mode, kind in CARD_MODE_KINDS.items():
        skip = (mode is DeviceAllocationMode.SHARED and opts.no_shared) or (
            mode is DeviceAllocationMode.SLICED
            and (opts.no_sliced or not any(c.max_slices > 0 for c in inventory.cards()))
        )
        name = acceleratable_resource_name(manufacturer, kind)
        if not skip and name is not None:
            specs.append(ResourceSpec(name, manufacturer, mode))
    visibility = visibility_resource_name(manufacturer)
    return [*specs, ResourceSpec(visibility, manufacturer, DeviceAllocationMode.VISIBILITY)]


class LedgerWriter:
    """Rebuilds Devices.status after each kick; kicks that arrive while it works coalesce into one. Each
    rebuild sets the ledger-holders and oversold-cards gauges, and a change in which cards are oversold is
    logged."""

    def __init__(
        self,
        client: Client,
        node: str,
        clock: Clock | None = None,
        retry: float = 1.0,
        metrics: DeviceMetrics | None = None,
    ) -> None:
        self.client, self.node = client, node
        self.clock: Clock = clock or MonotonicClock()
        self.retry = retry
        self.metrics = metrics or DeviceMetrics()
        self._kicked = asyncio.Event()
        self._oversold: list[str] = []

    def _observe(self, result: ledger.Rebuild | None) -> None:
        oversold = result.oversold if result is not None else []
        self.metrics.observe_ledger(self.node, result.holders if result is not None else 0, len(oversold))
        if oversold != self._oversold:
            if oversold:
                log.warning(
                    "node=%s cards oversold (their holders were given more than the card has; they give "
                    "nothing until enough holders finish): %s",
                    self.node,
                    ", ".join(oversold),
                )
            else:
                log.info("node=%s no card is oversold any more", self.node)
            self._oversold = oversold

    def kick(self) -> None:
        self._kicked.set()

    async def run(self) -> None:
        while True:
            await self._kicked.wait()
            self._kicked.clear()
            try:
                self._observe(await ledger.sync_status(self.client, self.node))
            except Conflict:
                log.info("node=%s Devices changed while the ledger was rebuilt; rebuilding", self.node)
                self._kicked.set()
            except KubeError as err:
                log.warning("node=%s ledger write failed, retrying: %s", self.node, err)
                await self.clock.sleep(self.retry)
                self._kicked.set()


class PodEvents:
    """Informer handler: a pod gone or finished frees its reservations and moves the ledger (its work dir
    goes with the next sweep); one that arrives holding an allocation (recorded before this process, or
    elsewhere) moves it too."""

    def __init__(self, allocator: Allocator, pods: KubePods, writer: LedgerWriter) -> None:
        self.allocator, self.pods, self.writer = allocator, pods, writer

    def on_add(self, obj: dict[str, Any]) -> None:
        if p.is_active(obj) and ANNOTATION in (p.meta(obj).get("annotations") or {}):
            self.allocator.publish_held_soon()
            self.writer.kick()

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        if p.is_active(old) and not p.is_active(new):
            self.allocator.release(new)
            self.writer.kick()

    def on_delete(self, obj: dict[str, Any]) -> None:
        self.allocator.release(obj)
        self.writer.kick()


def options_from_args(args: argparse.Namespace, environment: Environment) -> ServeOptions:
    """ServeOptions from the parsed flags (backend flags included); ValueError when one is missing."""
    if not args.node_name:
        raise ValueError("serve needs --node-name (or KUBERNETES_NODE_NAME)")
    return ServeOptions(
        node=args.node_name,
        manufacturers=args.manufacturer or list(known_manufacturers()),
        kube_socket=args.kube_socket,
        plugin_dir=args.device_plugin_dir or args.kube_socket.parent,
        pod_resources_socket=args.pod_resources_socket,
        monitor_period=args.monitor_period,
        paths=HostPaths(data_dir=environment.data_dir),
        namespace=environment.pod_namespace,
        no_shared=args.no_shared,
        no_sliced=args.no_sliced,
        kubeconfig=args.kubeconfig,
        fast_failed=not args.no_fast_failed,
        health_recovery_checks=args.health_recovery_checks,
        metrics_address=args.metrics_bind_address,
    )


async def serve(opts: ServeOptions, backend: Backend, clock: Clock | None = None) -> int:
    """Run the agent until SIGTERM; returns the process exit code."""
    clock = clock or MonotonicClock()
    client = await connect(opts.kubeconfig)
    inventories = {mfr: Inventory(mfr) for mfr in opts.manufacturers}
    metrics = DeviceMetrics()
    writer = LedgerWriter(client, opts.node, clock, metrics=metrics)
    informer = pod_informer(client, opts.node)
    pods = KubePods(client, informer, opts.node)
    kubelet_pods = PodResourcesClient(opts.pod_resources_socket)
    allocator = Allocator(
        inventories,
        pods,
        KubePodWriter(client),
        AllocatorConfig(opts.node, paths=opts.paths),
        writer.kick,
        clock=clock,
        kubelet=kubelet_pods,
        on_refused=metrics.allocate_refused,
        on_finished=metrics.allocate_finished,
    )
    informer.add_handler(PodEvents(allocator, pods, writer))
    plugins = VendorPlugins(
        inventories,
        lambda mfr, inventory: resource_specs(mfr, inventory, opts),
        lambda spec, inventory: ResourceServer(spec, inventory, allocator, opts.plugin_dir),
        opts.kube_socket,
        clock=clock,
    )

    def on_groups(groups: Sequence[DevicesGroup]) -> None:
        metrics.observe_cards(opts.node, groups)
        for inventory in inventories.values():
            inventory.update(groups)
        plugins.refresh()

    detect = DetectLoop(
        backend,
        Reporter(client, opts.node, opts.namespace),
        period=opts.monitor_period,
        rebuild_ledger=False,
        after_report=writer.kick,
        listeners=[on_groups],
        health=HealthGate(opts.health_recovery_checks),
        clock=clock,
        awaited=opts.awaited,
    )

    async def collect() -> None:
        """Ghost reservations; work dirs of pods deleted while this process was down, or missed; records
        that disagree with what the kubelet committed."""
        await informer.wait_synced()
        while True:
            await allocator.collect(pods.cached())
            if (kubelet := await kubelet_pods.active()) is not None:
                found = audit.mismatches(kubelet, pods.cached(), is_known_acceleratable_resource_name)
                audit.report(found, opts.node)
            await clock.sleep(min(GC_PERIOD, max(allocator.config.retry_window, 1.0)))

    async def setup(sup: Supervisor) -> None:
        sup.spawn("informer:pods", informer.run, restart="on-failure")
        sup.spawn("work-dir-gc", collect, restart="on-failure")
        sup.spawn("detect-loop", detect.run, restart="on-failure")
        sup.spawn("ledger-writer", writer.run, restart="on-failure")
        sup.spawn("device-plugins", plugins.run, restart="on-failure")
        writer.kick()

    stop_metrics = None
    try:
        if (address := parse_bind_address(opts.metrics_address)) is not None:
            try:
                stop_metrics = serve_metrics(metrics, address)
            except OSError as err:  # a GPU agent does not stop over its metrics
                log.error("cannot serve metrics on %s:%d, running without them: %s", *address, err)
        return await run_until_signal(setup)
    finally:
        if stop_metrics is not None:
            await asyncio.to_thread(stop_metrics)
        await kubelet_pods.close()
        await client.close()
