"""Resident memory of a serving device manager (8 cards, 100 Pods on its node) against a bare interpreter.

Run: `.venv/bin/python -m tests.bench.bench_device_manager [--settle 20] [--soak 180]` (about nine
minutes: it starts its own sandbox with one 8 x H100 node and one CPU node; `--soak 30` is a quick try).

`device-manager serve` runs as a DaemonSet on every GPU node, so its footprint is paid once per node. The
sandbox starts the node's device manager as it does for tests (simulated backend, real gRPC to the kubelet
stand-in, `--kubeconfig`); the script puts 100 Pods on the node (8 holding a card each through the real
scheduler and Allocate, 92 CPU-only bound to it directly), lets the manager settle and reads its VmRSS.
Then it restarts the same manager as a DaemonSet Pod runs it: in-cluster configuration, i.e. the
`KUBERNETES_SERVICE_*` variables and a service-account token (a TokenRequest for a ServiceAccount bound to
cluster-admin) with the cluster CA, in a directory standing in for the Pod's
`/var/run/secrets/kubernetes.io/serviceaccount` mount; and reads its VmRSS again after it has re-listed the
100 Pods and settled. The resident set grows with the first detections and levels off after a thousand or
two, hours at the default 15 s period; so each in-cluster figure is read once after the restart (a few
detections at the sandbox's 5 s period) and once more after `--soak` seconds of detecting every 100 ms
(SOAK_PERIOD, restarted with that `--monitor-period`).

Then it restarts the in-cluster manager as a real node runs it: `--backend auto` instead of the simulated
backend, so the PCI scan, udev's product names, our NVML binding and NVML are all loaded and called every
monitor period. No GPU here: `standin_nvml` compiles (gcc) a stand-in `libnvidia-ml.so.1` answering for the
same 8 H100s the simulated backend gives the node (same UUIDs and bus IDs, so the Pods' allocations still
match), found through `LD_LIBRARY_PATH` as the binding loads it, and writes a sysfs tree showing those cards
on the bus (the `-c` wrapper points `detector.pci.SYSFS` at it, as it points the service-account directory
at the stand-in mount; the detector itself is unchanged). The stand-in counts the detections it answered.
The real NVML library is larger than the stand-in (see the README: about 2 MB of code, plus what `nvmlInit`
allocates), so these figures are a floor for an NVIDIA node, exact for the Python side.

Before the sandbox, `binding_costs` splits that cost per vendor in fresh interpreters: the device manager's
modules, then `import ctypes`, udev's product names, the vendor's binding module, and (NVIDIA only) the
stand-in library opened with 8 cards detected and 1,000 detections more.

Baseline, same run, same machine: the VmRSS of a bare `python -c` with the same interpreter, read by
itself. Printed: each VmRSS in MB with its anonymous part (the rest is mapped from files: the interpreter,
OpenSSL, grpc's library), its ratio to the baseline and to the goal (issue 14: ≤ 60 MB with 8 cards and 100
Pods; issue 28: the same with the node's vendor detection loaded).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from tests.bench import binding_costs, standin_nvml
from tests.helpers import eventually
from tests.integration.worker_support import service_account_mount as mount

from gpustack_operator.api.keys import ACCELERATOR_ALLOCATED_ANNOTATION
from gpustack_operator.device_manager.simulated import SimulatedBackend
from gpustack_operator.kube import resources
from gpustack_operator.kube.client import Client, connect
from gpustack_operator.kube.resources import Resource
from gpustack_operator.sandbox import inventory
from gpustack_operator.sandbox.cluster import Sandbox
from gpustack_operator.sandbox.nodeagents import device_manager_name

NODE = "h100-0"
CPU_NODE = "cpu-0"
GOAL_MB = 60.0
SOAK_PERIOD = "100ms"
"""The last figure's monitor period: as many detections in minutes as the default 15 s gives in hours."""
SA_NAMESPACE = "kube-system"
SA_NAME = "bench-device-manager"
IN_CLUSTER = (
    "import os, sys; from pathlib import Path; import gpustack_operator.kube.incluster as c; "
    "c.SERVICE_ACCOUNT_DIR = Path(sys.argv[1]); import gpustack_operator.device_manager.detector.pci as p; "
    "p.SYSFS = Path(os.environ.get('BENCH_SYSFS') or p.SYSFS); from gpustack_operator.cli import main; "
    "sys.exit(main(sys.argv[2:]))"
)
"""The device manager's own command line, with the service-account directory moved to the stand-in mount
and, when `BENCH_SYSFS` is set, the PCI scan moved to a fake sysfs (set before `detector.hardware` is
imported: its `HardwareBackend` takes the default root when its module loads)."""
CLUSTER_ROLE_BINDINGS = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False
)


READ_OWN_STATUS = "import sys; sys.stdout.write(open('/proc/self/status').read())"
"""What `python -c pass` holds, read by the bare interpreter itself (a parent's ru_maxrss of a child
would count the parent's pages the child had before exec)."""


def memory_mb(status: str) -> Memory:
    """VmRSS and its anonymous part (heap, stacks) from a /proc/<pid>/status text, in MB (MiB)."""
    fields = {line.split(":")[0]: line.split()[1] for line in status.splitlines() if line.endswith(" kB")}
    return Memory(int(fields["VmRSS"]) / 1024, int(fields["RssAnon"]) / 1024)


@dataclass(frozen=True)
class Memory:
    rss: float
    anonymous: float
    """Of rss, what is not mapped from files (shared libraries and the interpreter count as files)."""


def process_memory(pid: int) -> Memory:
    return memory_mb(Path(f"/proc/{pid}/status").read_text())


def bare_python() -> Memory:
    out = subprocess.run([sys.executable, "-c", READ_OWN_STATUS], capture_output=True, text=True, check=True)
    return memory_mb(out.stdout)


async def settled(pid: int, seconds: float) -> Memory:
    """The largest VmRSS seen over `seconds` (sampled every half second): the idle footprint, not a dip."""
    peak = Memory(0.0, 0.0)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        now = process_memory(pid)
        peak = max(peak, now, key=lambda m: m.rss)
        await asyncio.sleep(0.5)
    return peak


def pod(name: str, *, gpu: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "tolerations": [{"operator": "Exists"}],
        "containers": [{"name": "main", "image": "busybox"}],
    }
    if gpu:  # scheduled, so the kubelet stand-in calls Allocate
        spec["nodeSelector"] = {"kubernetes.io/hostname": NODE}
        spec["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    else:
        spec["nodeName"] = NODE
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


async def hundred_pods(kube: Client, namespace: str) -> None:
    """8 pods holding one card each (allocated and annotated), 92 CPU-only pods, all on NODE."""
    await kube.create(resources.NAMESPACES, {"metadata": {"name": namespace}})
    for i in range(100):
        await kube.create(resources.PODS, pod(f"p-{i:03d}", gpu=i < 8), namespace)

    async def allocated() -> bool:
        pods = await kube.list(resources.PODS, namespace)
        held = [
            p for p in pods if ACCELERATOR_ALLOCATED_ANNOTATION in (p["metadata"].get("annotations") or {})
        ]
        return len(pods) == 100 and len(held) == 8

    await eventually(allocated, timeout=180, interval=1.0, what="8 pods allocated a card, 100 on the node")


async def service_account_mount(kube: Client, box: Sandbox, directory: Path) -> None:
    """token + ca.crt as a Pod of a cluster-admin ServiceAccount would see them."""
    await kube.create(resources.SERVICEACCOUNTS, {"metadata": {"name": SA_NAME}}, SA_NAMESPACE)
    binding = {
        "metadata": {"name": SA_NAME},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": SA_NAME, "namespace": SA_NAMESPACE}],
    }
    await kube.create(CLUSTER_ROLE_BINDINGS, binding)
    await mount(kube, box.certs.ca_crt, directory, SA_NAME, SA_NAMESPACE)


async def detected_cards(kube: Client, node: str) -> str:
    """What the node's Devices says once the NVML stand-in's answers (cores, compute capability, driver;
    the inventory gives none of them) have replaced the simulated backend's."""
    found: list[dict[str, Any]] = []

    async def from_nvml() -> bool:
        devices = await kube.get_or_none(resources.DEVICES, node)
        found[:] = ((devices or {}).get("spec") or {}).get("groups") or []
        return any(group.get("cores") == standin_nvml.CORES for group in found)

    await eventually(from_nvml, timeout=60, interval=0.5, what=f"Devices {node} detected through NVML")
    return "; ".join(
        f"{len(g.get('accelerators') or [])} x {g.get('name')}, {g.get('memory')} MiB, "
        f"{g.get('cores')} cores, CC {g.get('computeCapability')}, driver {g.get('driverVersion')}"
        for g in found
    )


def in_cluster_argv(argv: list[str], host: str, mount: Path) -> list[str]:
    """The sandbox's device-manager command line, run as a Pod: in-cluster configuration, no kubeconfig."""
    start = argv.index("-m")  # env VAR=... python -m gpustack_operator.cli device-manager serve ...
    flags = argv[start + 2 :]
    at = flags.index("--kubeconfig")
    del flags[at : at + 2]
    server_host, port = host.removeprefix("https://").rsplit(":", 1)
    env = [f"KUBERNETES_SERVICE_HOST={server_host}", f"KUBERNETES_SERVICE_PORT={port}"]
    return [*argv[: start - 1], *env, argv[start - 1], "-c", IN_CLUSTER, str(mount), *flags]


def with_detection(argv: list[str], lib_dir: Path, sysfs: Path, calls: Path) -> list[str]:
    """The in-cluster command line with `--backend auto` on the fake bus and the stand-in NVML (which
    counts its detections in ``calls``)."""
    python, serve = argv.index("-c") - 1, argv.index("serve") + 1  # env ... python -c CODE MOUNT dm serve
    flags = argv[serve:]
    for flag in ("--backend", "--inventory", "--faults"):
        at = flags.index(flag)
        del flags[at : at + 2]
    env = [f"LD_LIBRARY_PATH={lib_dir}", f"BENCH_SYSFS={sysfs}", f"{standin_nvml.CALLS_ENV}={calls}"]
    return [*argv[:python], *env, *argv[python:serve], "--backend", "auto", *flags]


def with_period(argv: list[str], period: str) -> list[str]:
    """``argv`` with another `--monitor-period`."""
    at = argv.index("--monitor-period")
    return [*argv[: at + 1], period, *argv[at + 2 :]]


def detections(calls: Path) -> int:
    """How many detections the stand-in NVML has answered since the manager started."""
    try:
        return int(calls.read_text())
    except (OSError, ValueError):
        return 0


def report(what: str, mb: Memory, baseline: Memory) -> None:
    print(
        f"{what:<64} {mb.rss:6.1f} MB ({mb.anonymous:5.1f} anon)  "
        f"×{mb.rss / baseline.rss:4.1f} bare python   {mb.rss / GOAL_MB:5.2f} of goal"
    )


@contextlib.asynccontextmanager
async def one_gpu_node_sandbox() -> AsyncIterator[Sandbox]:
    run_dir = Path(tempfile.mkdtemp(prefix="bd-", dir="/tmp"))  # unix socket paths below it must stay short
    nodes = yaml.safe_load(inventory.DEFAULT_INVENTORY.read_text())["nodes"]
    chosen = run_dir / "inventory.yaml"
    chosen.write_text(yaml.safe_dump({"nodes": [n for n in nodes if n["name"] in (NODE, CPU_NODE)]}))
    async with Sandbox(run_dir, inventory_file=chosen, progress=lambda text: print(text, flush=True)) as box:
        yield box


@dataclass(frozen=True)
class Figures:
    with_kubeconfig: Memory
    in_cluster: Memory
    in_cluster_soaked: Memory
    with_nvml: Memory
    soaked: Memory
    detected: str
    """What the node's Devices said with the stand-in NVML."""
    detections: tuple[int, int]
    """Detections the stand-in answered by the end of the `with_nvml` and of the `soaked` measurement."""


async def measure(settle: float, soak: float, lib_dir: Path, sysfs: Path) -> Figures:
    """The manager's VmRSS with a kubeconfig, in-cluster (simulated backend), in-cluster detecting through
    NVML; the last two also after `soak` seconds of detecting every SOAK_PERIOD."""
    async with one_gpu_node_sandbox() as box:
        assert box.state is not None
        name = device_manager_name(NODE)
        kube = await connect(box.kubeconfig)
        calls = box.run_dir / "nvml-calls"

        async def restart(argv: list[str], what: str) -> None:
            assert box.state is not None
            box.state.argv[name] = argv
            print(f"restarting {name} {what}: {shlex.join(argv)}", flush=True)
            await box.restart(name)

        try:
            await hundred_pods(kube, "bench-dm")
            with_kubeconfig = await settled(box.state.pids[name], settle)
            await service_account_mount(kube, box, box.run_dir / "serviceaccount")
            argv = in_cluster_argv(box.state.argv[name], kube.host, box.run_dir / "serviceaccount")
            await restart(argv, "in-cluster")
            in_cluster = await settled(box.state.pids[name], settle)
            await restart(with_period(argv, SOAK_PERIOD), f"in-cluster, detecting every {SOAK_PERIOD}")
            await asyncio.sleep(soak)
            in_cluster_soaked = await settled(box.state.pids[name], settle)
            await restart(with_detection(argv, lib_dir, sysfs, calls), "with NVIDIA detection")
            detected = await detected_cards(kube, NODE)
            with_nvml = await settled(box.state.pids[name], settle)
            first = detections(calls)
            await restart(with_period(box.state.argv[name], SOAK_PERIOD), f"detecting every {SOAK_PERIOD}")
            await asyncio.sleep(soak)
            soaked = await settled(box.state.pids[name], settle)
        finally:
            await kube.close()
    counts = (first, detections(calls))
    return Figures(with_kubeconfig, in_cluster, in_cluster_soaked, with_nvml, soaked, detected, counts)


async def main(settle: float, soak: float) -> None:
    baseline = bare_python()
    standin = Path(tempfile.mkdtemp(prefix="bd-nvml-", dir="/tmp"))
    cards = SimulatedBackend(inventory.DEFAULT_INVENTORY, NODE).detect()
    lib_dir, sysfs = standin_nvml.build(standin, cards)
    try:
        costs = binding_costs.measure_all(lib_dir, sysfs)
        got = await measure(settle, soak, lib_dir, sysfs)
    finally:
        shutil.rmtree(standin, ignore_errors=True)
    print(f"\n{'':<64} {'RSS':>6}                 ratio to baseline  to goal ({GOAL_MB:.0f} MB)")
    report("baseline: bare python -c", baseline, baseline)
    report("device-manager serve, --kubeconfig (8 cards, 100 pods)", got.with_kubeconfig, baseline)
    report("device-manager serve, in-cluster (8 cards, 100 pods)", got.in_cluster, baseline)
    report(f"in-cluster, after {soak:.0f} s detecting every {SOAK_PERIOD}", got.in_cluster_soaked, baseline)
    report(f"in-cluster, --backend auto, {got.detections[0]} detections", got.with_nvml, baseline)
    report(f"in-cluster, --backend auto, {got.detections[1]} detections", got.soaked, baseline)
    print(f"  (the soaks: {soak:.0f} s each, both backends detecting every {SOAK_PERIOD})")
    print(f"  (--backend auto: PCI scan + udev names + NVML binding + stand-in; it reported {got.detected})")
    binding_costs.report(costs)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settle", type=float, default=20.0, help="seconds to watch RSS after each start")
    parser.add_argument(
        "--soak", type=float, default=180.0, help=f"seconds of detecting every {SOAK_PERIOD} before the last"
    )
    args = parser.parse_args()
    asyncio.run(main(args.settle, args.soak))
