"""Bring a whole local control plane up, report its health, and take it down again by PID.

Order matters (shared/guides/control-plane.md): etcd, then kube-apiserver; CRDs before the controllers that
watch them; kwok's nodes before anything schedules; Kueue's namespace, cert Secret, route and webhook
configurations before Kueue starts, because its cert rotator blocks until it can inject its CA into them;
the nfd-worker stand-in's NodeFeatures before nfd-master, so its first pass labels every node.
The state file remembers every PID and port, so `down` in another shell stops exactly what `up` started.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import time
from collections.abc import Callable, Coroutine
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpustack_operator.api import crds as our_crds
from gpustack_operator.api.keys import DEFAULT_SYSTEM_NAMESPACE
from gpustack_operator.kube import definitions, errors, resources
from gpustack_operator.kube.client import Client, connect
from gpustack_operator.kube.conditions import is_true
from gpustack_operator.rules.capacity.kueueconfig import RELEASE_TUNING, Tuning
from gpustack_operator.sandbox import (
    build,
    components,
    health,
    inventory,
    kueue,
    kwok,
    nfdworker,
    nodeagents,
    process,
)
from gpustack_operator.sandbox.pki import ClusterPKI, generate, write_kubeconfig

log = logging.getLogger(__name__)
STATE_FILE = "state.json"
NFD_CRDS = "deployment/base/nfd-crds/nfd-api-crds.yaml"


class SandboxError(RuntimeError):
    """The sandbox could not be started or is in an unexpected state."""


@dataclass
class State:
    """What `up` started: PIDs in start order, ports, and the kubeconfig to use."""

    run_dir: str
    kubeconfig: str
    ports: dict[str, int]
    pids: dict[str, int] = field(default_factory=dict)
    process_starts: dict[str, int | None] = field(default_factory=dict)
    """Each PID's start time, so a PID reused by another process after a crash or reboot is left alone."""
    argv: dict[str, list[str]] = field(default_factory=dict)
    started_at: float = field(default_factory=time.time)
    agent_probes: dict[str, str] = field(default_factory=dict)
    """Readiness URLs of the per-node agents (kubelet stand-ins, device managers) by process name."""
    agent_metrics: dict[str, str] = field(default_factory=dict)
    """Prometheus endpoints of the per-node agents that serve one (the device managers) by process name."""

    def save(self) -> None:
        (Path(self.run_dir) / STATE_FILE).write_text(json.dumps(asdict(self), indent=2))

    def alive(self, name: str) -> bool:
        """The component we started under this name is still running."""
        return process.alive(self.pids[name], self.process_starts.get(name))

    def stop(self, name: str, grace: float = 10.0) -> bool:
        """Stop that component (its whole process group); True if it had to be killed."""
        return process.stop(self.pids[name], grace, self.process_starts.get(name))

    @classmethod
    def load(cls, run_dir: Path) -> State | None:
        path = run_dir / STATE_FILE
        if not path.exists():
            return None
        return cls(**json.loads(path.read_text()))


def _allocate_ports() -> components.Ports:
    names = components.Ports.__dataclass_fields__
    taken: set[int] = set()
    chosen: dict[str, int] = {}
    for name in names:
        port = process.free_port()
        while port in taken:
            port = process.free_port()
        taken.add(port)
        chosen[name] = port
    return components.Ports(**chosen)


class Sandbox:
    """A local cluster in run_dir, built from the cached control-plane binaries (or those in bin_dir)."""

    def __init__(
        self,
        run_dir: Path,
        *,
        inventory_file: Path = inventory.DEFAULT_INVENTORY,
        bin_dir: Path | None = None,
        progress: Callable[[str], None] = print,
        kueue_tuning: Tuning = RELEASE_TUNING,
        api_only: bool = False,
    ) -> None:
        """`kueue_tuning`: Kueue's client rate and workers (its release manifests' by default). `api_only`:
        etcd and kube-apiserver alone, no CRD, node or controller: a cluster without Kueue or NFD, as an
        admin may point the worker at, or a second cluster beside the first."""
        self.run_dir = run_dir.resolve()
        self.api_only = api_only
        self.kueue_tuning = kueue_tuning
        self.inventory_file = inventory_file
        self.bin_dir = bin_dir
        self.progress = progress
        self.certs = ClusterPKI(self.run_dir / "pki")
        self.kubeconfig = self.run_dir / "kubeconfig"
        self.state: State | None = State.load(self.run_dir)

    @property
    def container_log(self) -> Path:
        """The log every fake container has (CRI format; kwok.append_container_log adds a line)."""
        return self.run_dir / "kwok" / kwok.CONTAINER_LOG

    # ---- helpers -------------------------------------------------------------------------------------------
    def _binary(self, name: str) -> Path:
        path = self.bin_dir / name if self.bin_dir else build.binary_path(name)
        if not path.is_file():
            raise SandboxError(
                f"{path} is missing: run `gpustack-operator sandbox build` (or make control-plane)"
            )
        return path

    def _start(self, name: str, argv: list[str]) -> process.Started:
        assert self.state is not None
        started = process.spawn(name, argv, self.run_dir / "logs")
        self.state.pids[name] = started.pid
        self.state.process_starts[name] = started.started_at
        self.state.argv[name] = list(argv)
        self.state.save()
        return started

    def probes(self, ports: components.Ports) -> dict[str, health.Probe]:
        admin = (self.certs.admin_crt, self.certs.admin_key)
        return {
            "etcd": health.Probe(f"http://127.0.0.1:{ports.etcd}/health"),
            "kube-apiserver": health.Probe(
                f"https://127.0.0.1:{ports.apiserver}/readyz", self.certs.ca_crt, admin
            ),
            "kube-controller-manager": health.Probe(f"https://127.0.0.1:{ports.controller_manager}/healthz"),
            "kube-scheduler": health.Probe(f"https://127.0.0.1:{ports.scheduler}/readyz"),
            "kwok": health.Probe(f"http://127.0.0.1:{ports.kwok}/healthz"),
            "kueue": health.Probe(f"http://127.0.0.1:{ports.kueue_health}/readyz"),
            "nfd-master": health.Probe(
                f"https://127.0.0.1:{ports.apiserver}/api/v1/nodes?labelSelector=type%3Dkwok",
                self.certs.ca_crt,
                admin,
                ready=nfdworker.every_node_published,
            ),
            **{
                name: health.Probe(url)
                for name, url in (self.state.agent_probes if self.state else {}).items()
            },
        }

    async def _launch(self, name: str, argv: list[str], probe: health.Probe, timeout: float = 120.0) -> None:
        t0 = time.monotonic()
        started = self._start(name, argv)
        await health.wait_ready(name, probe, started, timeout)
        self.progress(f"[sandbox] {name:<24} ready in {time.monotonic() - t0:4.1f}s (pid {started.pid})")

    # ---- up ------------------------------------------------------------------------------------------------
    async def up(self) -> State:
        """Start every component and wait until all are ready; stops what it started if anything fails."""
        if self.state and any(self.state.alive(name) for name in self.state.pids):
            raise SandboxError(f"a sandbox is already running in {self.run_dir}; run `sandbox down` first")
        missing = build.missing_binaries(self.bin_dir)
        if missing:
            raise SandboxError(
                f"binaries missing in {self.bin_dir or build.CACHE_ROOT}: {', '.join(missing)}; "
                "run `gpustack-operator sandbox build`"
            )
        problem = nodeagents.socket_path_problem(self.run_dir, inventory.load(self.inventory_file))
        if problem:
            raise SandboxError(problem)
        t0 = time.monotonic()
        for sub in (
            "etcd",
            "logs",
            "kueue-certs",
            "apiserver-certs",
            "kcm-certs",
            "scheduler-certs",
            "nodes",
        ):
            shutil.rmtree(self.run_dir / sub, ignore_errors=True)
            (self.run_dir / sub).mkdir(parents=True)
        generate(self.certs.directory)
        ports = _allocate_ports()
        self.state = State(str(self.run_dir), str(self.kubeconfig), asdict(ports))
        self.state.save()
        try:
            await self._up(ports)
        except BaseException:
            await self.down()
            raise
        self.progress(f"[sandbox] all components ready in {time.monotonic() - t0:.1f}s")
        return self.state

    async def _up(self, ports: components.Ports) -> None:
        probes = self.probes(ports)
        kueue_mod = build.module_source("sigs.k8s.io/kueue", build.KUEUE_VERSION)
        kwok_mod = build.module_source("sigs.k8s.io/kwok", build.KWOK_VERSION)
        nfd_mod = build.module_source("sigs.k8s.io/node-feature-discovery", build.NFD_VERSION)
        await self._launch(
            "etcd", components.etcd(self._binary("etcd"), self.run_dir / "etcd", ports), probes["etcd"]
        )
        await self._launch(
            "kube-apiserver",
            components.apiserver(
                self._binary("kube-apiserver"), self.certs, ports, self.run_dir / "apiserver-certs"
            ),
            probes["kube-apiserver"],
        )
        write_kubeconfig(self.kubeconfig, f"https://127.0.0.1:{ports.apiserver}", self.certs)
        if self.api_only:
            return
        kwok.start_container_log(self.container_log)
        (self.run_dir / "kwok.yaml").write_text(kwok.configuration(kwok_mod, self.container_log))
        client = await connect(self.kubeconfig)
        try:
            crds = kueue.crds(kueue_mod, ports.kueue_webhook) + [
                d for d in yaml.safe_load_all((nfd_mod / NFD_CRDS).read_text()) if d
            ]
            crds += our_crds.custom_resource_definitions()
            await _together(
                self._launch(
                    "kube-controller-manager",
                    components.controller_manager(
                        self._binary("kube-controller-manager"),
                        self.certs,
                        self.kubeconfig,
                        ports,
                        self.run_dir / "kcm-certs",
                    ),
                    probes["kube-controller-manager"],
                ),
                self._launch(
                    "kube-scheduler",
                    components.scheduler(
                        self._binary("kube-scheduler"),
                        self.kubeconfig,
                        ports,
                        self.run_dir / "scheduler-certs",
                    ),
                    probes["kube-scheduler"],
                ),
                self._launch(
                    "kwok",
                    components.kwok(
                        self._binary("kwok"), self.certs, self.kubeconfig, self.run_dir / "kwok.yaml", ports
                    ),
                    probes["kwok"],
                ),
                definitions.apply_and_wait(client, crds, timeout=60.0),
                self._install_kueue_prerequisites(client, kueue_mod, ports),
            )
            kueue_config = yaml.safe_dump(
                kueue.configuration(
                    ports.kueue_webhook,
                    ports.kueue_health,
                    self.run_dir / "kueue-certs",
                    tuning=self.kueue_tuning,
                )
            )
            (self.run_dir / "kueue.yaml").write_text(kueue_config)
            await client.apply(resources.CONFIGMAPS, kueue.manager_config_map(kueue_config))
            await _together(
                self._launch(
                    "kueue",
                    components.kueue(self._binary("kueue"), self.kubeconfig, self.run_dir / "kueue.yaml"),
                    probes["kueue"],
                ),
                self._mount_kueue_certs(client),
                self._create_nodes(client),
            )
            await _together(self._wait_kueue_webhook(client), self._start_nfd(client))
            await self._start_node_agents(client)
        finally:
            await client.close()

    async def _start_node_agents(self, client: Client) -> None:
        """A kubelet stand-in, then a device manager, for every GPU node (see sandbox/nodeagents.py)."""
        assert self.state is not None
        await client.apply(resources.NAMESPACES, {"metadata": {"name": DEFAULT_SYSTEM_NAMESPACE}})
        pairs = [
            nodeagents.agents(self.run_dir, self.kubeconfig, self.inventory_file, node)
            for node in inventory.load(self.inventory_file)
            if node.gpus
        ]
        for pair in pairs:
            self.state.agent_probes.update({agent.name: agent.probe for agent in pair})
            self.state.agent_metrics.update({agent.name: agent.metrics for agent in pair if agent.metrics})

        async def start(pair: tuple[nodeagents.Agent, nodeagents.Agent]) -> None:
            for agent in pair:
                await self._launch(agent.name, agent.argv, health.Probe(agent.probe))

        await _together(*(start(pair) for pair in pairs))

    async def _start_nfd(self, client: Client) -> None:
        """What NFD's worker would report for every node (sandbox/nfdworker.py), then nfd-master over it."""
        assert self.state is not None
        nodes = inventory.load(self.inventory_file)
        if not nodes:
            self.progress("[sandbox] no inventory nodes: nfd-master not started")
            return
        await nfdworker.publish(client, nodes)
        argv = components.nfd_master(
            self._binary("nfd-master"), self.kubeconfig, nfdworker.NAMESPACE, nodes[0].name
        )
        probe = self.probes(components.Ports.saved(self.state.ports))["nfd-master"]
        await self._launch("nfd-master", argv, probe)

    async def _install_kueue_prerequisites(
        self, client: Client, module: Path, ports: components.Ports
    ) -> None:
        for obj in kueue.support_objects() + kueue.webhook_configurations(module, ports.kueue_webhook):
            await client.apply(resources.for_kind(obj["apiVersion"], obj["kind"]), obj)

    async def _mount_kueue_certs(self, client: Client, timeout: float = 60.0) -> None:
        """Play the kubelet's part of a Secret volume: copy the cert Kueue's rotator wrote into its certDir.

        Kueue's cert rotator writes the webhook cert to a Secret and then waits for it to appear as files,
        as a mounted volume would; a local process has no kubelet doing that.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            secret = await client.get(resources.SECRETS, kueue.WEBHOOK_SECRET, kueue.NAMESPACE)
            data = secret.get("data") or {}
            if data.get("tls.crt") and data.get("tls.key"):
                kueue.write_cert_dir(self.run_dir / "kueue-certs", data)
                return
            await asyncio.sleep(0.2)
        raise SandboxError(f"Kueue did not write its webhook cert Secret within {timeout:.0f}s")

    async def _create_nodes(self, client: Client, timeout: float = 90.0) -> None:
        t0 = time.monotonic()
        nodes = inventory.load(self.inventory_file)
        for node in nodes:
            manifest = inventory.node_manifest(node)
            try:
                await client.create(resources.NODES, manifest)
            except errors.AlreadyExists:
                await client.patch(
                    resources.NODES, node.name, {"status": manifest["status"]}, subresource="status"
                )
        pending = {n.name for n in nodes}
        while pending and time.monotonic() - t0 < timeout:
            for node_obj in await client.list(resources.NODES, label_selector="type=kwok"):
                if _node_schedulable(node_obj):
                    pending.discard(node_obj["metadata"]["name"])
            if pending:
                await asyncio.sleep(0.3)
        if pending:
            raise SandboxError(f"kwok nodes not Ready and untainted after {timeout:.0f}s: {sorted(pending)}")
        self.progress(f"[sandbox] {len(nodes)} kwok nodes Ready in {time.monotonic() - t0:4.1f}s")

    async def _wait_kueue_webhook(self, client: Client, timeout: float = 60.0) -> None:
        """Prove Kueue's pod webhook answers: a dry-run queued Pod comes back with Kueue's scheduling gate."""
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "generateName": "probe-",
                "namespace": "default",
                "labels": {"kueue.x-k8s.io/queue-name": "sandbox-probe"},
            },
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        }
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            try:
                created = await client.create(resources.PODS, pod, dry_run=True)
                gates = [g["name"] for g in created["spec"].get("schedulingGates", [])]
                if "kueue.x-k8s.io/admission" in gates:
                    return
                last = f"no Kueue scheduling gate (gates: {gates})"
            except errors.KubeError as err:
                last = str(err)
            await asyncio.sleep(0.3)
        raise SandboxError(f"Kueue's pod webhook is not answering: {last}")

    async def restart(self, name: str, *, kill: bool = False) -> float:
        """Stop one component (SIGTERM, or SIGKILL when kill) and start it again with the same command line.

        Tests use this to prove clients survive an apiserver restart; returns seconds until ready again.
        """
        state = self.state
        if state is None or name not in state.pids:
            raise SandboxError(f"{name} is not running in {self.run_dir}")
        stopped_at = time.time()
        await asyncio.to_thread(state.stop, name, 0.0 if kill else 10.0)
        t0 = time.monotonic()
        probe = self.probes(components.Ports.saved(state.ports))[name]
        if name in state.agent_probes and "?" in probe.url:
            # A device manager is ready again only once the stand-in saw it register anew, not on the
            # old registration the stand-in may not have dropped yet.
            probe = health.Probe(f"{probe.url}&since={stopped_at}")
        await self._launch(name, state.argv[name], probe)
        return time.monotonic() - t0

    async def __aenter__(self) -> Sandbox:
        """`async with Sandbox(...) as box:` runs `up`, and `down` on the way out, whatever happened."""
        await self.up()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.down()

    # ---- down / status -------------------------------------------------------------------------------------
    async def down(self) -> list[str]:
        """Stop every process the state file names, newest first; returns what was stopped."""
        state = self.state or State.load(self.run_dir)
        if state is None:
            return []
        stopped: list[str] = []
        for name, pid in reversed(list(state.pids.items())):
            if state.alive(name):
                killed = await asyncio.to_thread(state.stop, name)
                stopped.append(f"{name} (pid {pid}{', killed' if killed else ''})")
        (self.run_dir / STATE_FILE).unlink(missing_ok=True)
        shutil.rmtree(self.run_dir / "etcd", ignore_errors=True)
        self.state = None
        return stopped

    async def status(self) -> dict[str, tuple[bool, str]]:
        """Per component: (healthy, detail)."""
        state = self.state or State.load(self.run_dir)
        if state is None:
            return {}
        probes = self.probes(components.Ports.saved(state.ports))
        out: dict[str, tuple[bool, str]] = {}
        for name, pid in state.pids.items():
            if not state.alive(name):
                out[name] = (False, f"pid {pid} is not running")
                continue
            ok, answer = await health.check(probes[name])
            out[name] = (ok, f"pid {pid}: {answer}")
        return out


async def _together(*steps: Coroutine[Any, Any, Any]) -> None:
    """Run steps concurrently; on the first failure cancel the others (so nothing starts after it) and
    raise that failure itself, not an ExceptionGroup."""
    try:
        async with asyncio.TaskGroup() as group:
            for step in steps:
                group.create_task(step)
    except BaseExceptionGroup as failed:
        raise failed.exceptions[0] from None


def _node_schedulable(node: dict[str, Any]) -> bool:
    taints = [t["key"] for t in (node.get("spec") or {}).get("taints") or []]
    return is_true(node, "Ready") and "node.kubernetes.io/not-ready" not in taints
