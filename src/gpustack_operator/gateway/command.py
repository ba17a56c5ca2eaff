"""`gpustack-operator worker-gateway`: the command line of the gateway (contract §9). Parsing only: every
flag becomes a field of GatewayOptions, and a bad value is one line naming the flag, exit 2."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import NoReturn

from gpustack_operator.runtime import logs

from .options import DEFAULT_SOCKET, ConnectionMode, GatewayOptions, OptionError, parse_duration

__all__ = ["register"]

DESCRIPTION = """\
One API over the worker.gpustack.ai/v1 InstanceTypes and Instances of many clusters, for the GPUStack server
beside it. Subscribe a cluster with POST /workers?cluster=<c> (or a body {token, force, clusters, gvks});
DELETE /workers?cluster=<c> unsubscribes (watchers get a DELETED event with a null object: drop all of it).
Per cluster it waits until the APIService v1.worker.gpustack.ai is Available, then runs one informer per v1
kind the cluster serves (InstanceType, Instance and the companion kinds), each cluster with its own client,
timeout and backoff: a slow or dead cluster blocks no other, and its state is in every answer.
GET /instancetypes, /instances, /instancepersistentvolumetypes, /instancepersistentvolumes,
/instanceimagepullsecrets, /instancesshpublickeys ?cluster=…&cluster=…[&namespace=] list from the caches
(a cluster not synced is reported as such); watch=true streams {type, cluster, object} as newline-delimited
JSON (chunked) or over a websocket; aggregated=true folds the InstanceTypes of all clusters by hardware.
Cluster <c> is reached, in gpustack-api mode, at http(s)://localhost:<port>/v2/clusters/<c>/proxy, in
loopback mode through the kubeconfig's context named <c>. Serves /metrics, /readyz, /livez beside the API,
on the unix socket or over HTTPS (--secure-port).

Every --resync-period each cluster's informers list again and publish only what changed. Not built yet:
aggregated=true does not combine with watch=true.
"""


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def _number(kind: type[int] | type[float]) -> argparse._ActionType:
    def parse(text: str) -> float:
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a{'n integer' if kind is int else ' number'}"
            ) from None

    return parse


def _one_line_error(parser: argparse.ArgumentParser) -> None:
    """argparse prints the usage before an error; contract: one clear line, exit 2."""

    def error(message: str) -> NoReturn:
        parser.exit(2, f"{parser.prog}: error: {message}\n")

    parser.error = error  # type: ignore[method-assign]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "worker-gateway",
        help="one API over the InstanceTypes and Instances of many clusters (for the GPUStack server)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _one_line_error(p)
    p.add_argument(
        "--worker-conn-mode",
        choices=[m.value for m in ConnectionMode],
        default=ConnectionMode.GPUSTACK_API.value,
        help="how each cluster is reached: through the GPUStack server's proxy, or the local kubeconfig "
        "(default: %(default)s)",
    )
    p.add_argument(
        "--worker-conn-gpustack-api-port",
        type=_number(int),
        default=30080,
        metavar="PORT",
        help="port of the GPUStack server on localhost (default: %(default)s)",
    )
    p.add_argument(
        "--worker-conn-gpustack-api-scheme",
        choices=("http", "https"),
        default=None,
        help="default: https on port 443, else http; https does not verify the certificate",
    )
    kubeconfig = os.environ.get("KUBECONFIG")
    p.add_argument(
        "--kubeconfig",
        type=Path,
        default=Path(kubeconfig) if kubeconfig else None,
        metavar="PATH",
        help="loopback: kubeconfig whose context named after each cluster reaches it "
        "(default: $KUBECONFIG, else the in-cluster service account for every cluster)",
    )
    p.add_argument(
        "--resync-period",
        type=_duration,
        default=600.0,
        metavar="DURATION",
        help="how often each cluster's informers list again, publishing only what changed; at least 5m "
        "(default: 10m)",
    )
    p.add_argument(
        "--worker-conn-timeout",
        type=_duration,
        default=30.0,
        metavar="DURATION",
        help="timeout of one request to a cluster, at least 10s (default: 30s)",
    )
    p.add_argument(
        "--worker-conn-qps",
        type=_number(float),
        default=20.0,
        metavar="QPS",
        help="requests per second to each cluster, at least 10 (default: %(default)s)",
    )
    p.add_argument(
        "--worker-conn-burst",
        type=_number(int),
        default=30,
        metavar="N",
        help="burst of requests to each cluster, at least 10 and more than the qps (default: %(default)s)",
    )
    p.add_argument(
        "--unix-socket",
        type=Path,
        default=DEFAULT_SOCKET,
        metavar="PATH",
        help="where the API listens when --secure-port is 0 (default: %(default)s)",
    )
    p.add_argument(
        "--secure-port",
        type=_number(int),
        default=0,
        metavar="PORT",
        help="serve over HTTPS on this port instead of the unix socket (default: 0, the socket)",
    )
    p.add_argument(
        "--bind-address",
        default="127.0.0.1",
        metavar="IP",
        help="address the HTTPS server listens on (default: %(default)s)",
    )
    p.add_argument(
        "--cert-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="tls.crt and tls.key of the HTTPS server; a self-signed pair is written there when "
        "absent (default: in memory)",
    )
    logs.add_log_level_flag(p)
    p.set_defaults(func=_run)


def options_from(args: argparse.Namespace) -> GatewayOptions:
    """The options the flags say; OptionError when contract §9 refuses them."""
    options = GatewayOptions(
        mode=ConnectionMode(args.worker_conn_mode),
        gpustack_api_port=args.worker_conn_gpustack_api_port,
        gpustack_api_scheme=args.worker_conn_gpustack_api_scheme,
        kubeconfig=args.kubeconfig,
        resync=args.resync_period,
        timeout=args.worker_conn_timeout,
        qps=args.worker_conn_qps,
        burst=args.worker_conn_burst,
        unix_socket=args.unix_socket,
        secure_port=args.secure_port,
        bind_address=args.bind_address,
        cert_dir=args.cert_dir,
    )
    options.check()
    return options


def _run(args: argparse.Namespace) -> int:
    try:
        options = options_from(args)
    except OptionError as e:
        print(f"gpustack-operator worker-gateway: error: {e}", file=sys.stderr)
        return 2
    logs.configure(args.log_level)
    from .server import run  # aiohttp's server and the kube client only once the flags are good

    return asyncio.run(run(options))
