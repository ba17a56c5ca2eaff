"""`gpustack-operator worker` (alias `w`): the command line of the control-plane process.

Parsing only: every flag becomes a field of `WorkerOptions`, bad values are refused here with the flag's
name, and `run()` in start.py does the work. The environment (`KUBERNETES_POD_NAMESPACE`, `GPUSTACK_*`) is
parsed before connecting, so a typo fails the pod at once instead of after Prepare has begun.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from gpustack_operator.apiserver.aggregated import AggregationOptions
from gpustack_operator.apiserver.health import parse_address
from gpustack_operator.kube.errors import KubeConfigError
from gpustack_operator.rules.environ import DEFAULT_ENVIRON
from gpustack_operator.runtime import logs
from gpustack_operator.settings.admission import parse_bool
from gpustack_operator.settings.catalog import SettingsEnvironmentError, initial_values
from gpustack_operator.settings.environment import Environment, EnvironmentValueError
from gpustack_operator.worker.prerequisites import KueueConfigMap
from gpustack_operator.worker.start import WorkerOptions, run

__all__ = ["register"]

DESCRIPTION = """\
The control-plane process. It first waits until Node Feature Discovery and Kueue are installed, saying what
is missing (log, Warning Event, /readyz). Prepare (every replica): ensure the system namespace
(KUBERNETES_POD_NAMESPACE, default gpustack-system), apply the operator's CRDs and wait until they are
Established, create the gpustack-settings Secret or add the keys it lacks (values already set are never
overwritten; first-install values come from GPUSTACK_* variables), apply the gpustack-cpu-info NodeFeatureRule
and the gpustack-node-devices AdmissionCheck, register the APIService v1.worker.gpustack.ai (outside a cluster
with an ExternalName Service <KUBERNETES_SERVICE_NAME> -> localhost) and the admission webhooks
(gpustack-worker-mutation/-validation, failurePolicy Fail). Start: serve /metrics, /healthz, /readyz and, over
HTTPS (--secure-port), the aggregated API and the webhooks; wait until the APIService is Available, then run
the controllers under leader election (Lease <leader-election-id> in the system namespace). Every 20 s it
reads Kueue's configuration (--kueue-config-map) and reports a Kueue that does not turn GPU requests into
credits: condition gpustack.ai/KueueConfigured on AdmissionCheck gpustack-node-devices.

The controllers build the scheduling chain: node capacities and the worker NodeFeature, one Kueue
ResourceFlavor per node flavor, one ClusterQueue and InstanceType per hardware pool, a LocalQueue per
namespace, InstanceType status, the per-card admission check, and Instances. The aggregated API serves
instancetypes, devices and instances in worker.gpustack.ai/v1 (kubectl get/explain instancetypes, devs,
inst) over their v1alpha1 CRDs, and the computed, list-only instancetypeflavors. The webhooks default and
check InstanceTypes and Instances and fold sliced-GPU Pod requests (memory-percentage or memory-mib) into
units; each Instance runs as one Pod in its type's queue (spec.stop deletes it). settings.gpustack.ai/v1
serves the gpustack-settings Secret's keys as Settings (kubectl get/patch settings -n <system namespace>).
With --cert-dir, a rotated ca.crt is re-registered and the serving certificate reloaded without a restart.
SIGTERM stops it cleanly (exit code 0).
"""


def _address(text: str) -> tuple[str, int] | None:
    try:
        return parse_address(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def _port(text: str) -> int:
    if not text.isdigit() or not 0 <= int(text) < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port (0-65535)")
    return int(text)


def _flag(text: str) -> bool:
    try:
        return parse_bool(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def _config_map(text: str) -> KueueConfigMap:
    try:
        return KueueConfigMap.parse(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def _positive(text: str, kind: type[float] | type[int]) -> float:
    value = kind(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not > 0")
    return value


def _positive_float(text: str) -> float:
    return _positive(text, float)


def _positive_int(text: str) -> int:
    return int(_positive(text, int))


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "worker",
        aliases=["w"],
        help="the control-plane process: prepare the cluster, run the controllers under leader election",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    kubeconfig = os.environ.get("KUBECONFIG")
    p.add_argument(
        "--kubeconfig",
        type=Path,
        default=Path(kubeconfig) if kubeconfig else None,
        metavar="PATH",
        help="kubeconfig file to reach kube-apiserver "
        "(default: $KUBECONFIG, else the in-cluster service account)",
    )
    p.add_argument(
        "--kube-api-qps",
        type=_positive_float,
        default=50.0,
        metavar="QPS",
        help="sustained requests per second of the controllers to kube-apiserver, watches included; the "
        "aggregated API and webhooks use their own unlimited client (default: %(default)s)",
    )
    p.add_argument(
        "--kube-api-burst",
        type=_positive_int,
        default=100,
        metavar="N",
        help="requests that may go out back to back after a quiet period (default: %(default)s)",
    )
    p.add_argument(
        "--kube-leader-election",
        type=_flag,
        nargs="?",
        const=True,
        default=True,
        metavar="BOOL",
        help="compete for the lease so only one replica reconciles (default: true); "
        "false runs the controllers in every replica",
    )
    p.add_argument(
        "--leader-election-id",
        default="worker.gpustack.ai",
        metavar="NAME",
        help="name of the coordination.k8s.io Lease in the system namespace (default: %(default)s)",
    )
    p.add_argument(
        "--metrics-bind-address",
        type=_address,
        default="127.0.0.1:8080",
        metavar="HOST:PORT",
        help="host:port serving Prometheus /metrics; 0 disables (default: %(default)s)",
    )
    p.add_argument(
        "--health-probe-bind-address",
        type=_address,
        default="127.0.0.1:8081",
        metavar="HOST:PORT",
        help="host:port serving /healthz and /readyz (ready once Prepare is done and caches synced); "
        "0 disables (default: %(default)s)",
    )
    p.add_argument(
        "--secure-port",
        type=_port,
        default=31443,
        metavar="PORT",
        help="HTTPS port of the aggregated API (kube-apiserver proxies to it); 0 runs without it "
        "and registers no APIService (default: %(default)s)",
    )
    p.add_argument(
        "--bind-address",
        default="127.0.0.1",
        metavar="IP",
        help="address the aggregated API listens on; 0.0.0.0 in a Pod (default: %(default)s)",
    )
    p.add_argument(
        "--cert-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="tls.crt, tls.key and optional ca.crt (the APIService caBundle) of the aggregated API; "
        "when they are absent a self-signed set is written there (default: in memory)",
    )
    p.add_argument(
        "--no-webhooks",
        dest="webhooks",
        action="store_false",
        help="serve the aggregated API without installing the admission webhooks; the cluster then "
        "accepts InstanceTypes, Instances and sliced Pods unchecked and unfolded (development only)",
    )
    p.add_argument(
        "--owner-cluster-role",
        default=None,
        metavar="NAME",
        help="ClusterRole that owns the APIServices and webhook configurations Prepare creates, so "
        "deleting it (helm uninstall) garbage-collects them; the chart passes its worker ClusterRole "
        "(default: none, they stay)",
    )
    p.add_argument(
        "--kueue-config-map",
        type=_config_map,
        action="append",
        default=None,
        metavar="NAMESPACE/NAME",
        help="where Kueue's configuration is published (the ConfigMap its manifests run it from), "
        "read every 20 s to check it converts GPU requests into credits; repeatable, the first found "
        "is used (default: kueue-system/kueue-manager-config)",
    )
    logs.add_log_level_flag(p)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    logs.configure(args.log_level)
    try:
        environment = Environment.from_environ()
        settings = initial_values()
    except (EnvironmentValueError, SettingsEnvironmentError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    options = WorkerOptions(
        kubeconfig=args.kubeconfig,
        kube_api_qps=args.kube_api_qps,
        kube_api_burst=args.kube_api_burst,
        leader_election=args.kube_leader_election,
        leader_election_id=args.leader_election_id,
        metrics_address=args.metrics_bind_address,
        health_address=args.health_probe_bind_address,
        aggregation=AggregationOptions(
            secure_port=args.secure_port,
            bind_address=args.bind_address,
            cert_dir=args.cert_dir,
            in_cluster=args.kubeconfig is None,
            webhooks=args.webhooks,
        )
        if args.secure_port
        else None,
        owner_cluster_role=args.owner_cluster_role,
        kueue_config_maps=tuple(args.kueue_config_map or (KueueConfigMap(),)),
    )
    DEFAULT_ENVIRON.freeze()  # validated above; a Pod's environment cannot change under it
    try:
        return asyncio.run(run(options, environment, settings))
    except KubeConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
