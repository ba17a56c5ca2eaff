"""Command lines of the control-plane components, each listening on 127.0.0.1 only.

Flags follow shared/guides/control-plane.md: the apiserver has the front-proxy (requestheader) flags so
aggregated APIs work, and no endpoint reconciler (loopback may not appear in Endpoints); webhooks and
APIServices reach local processes through ExternalName Services. Controller-manager and scheduler serve
their health endpoints on loopback with delegated auth and always-allowed health paths. nfd-master cannot
be bound to loopback, so it listens on nothing (see nfd_master).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpustack_operator.sandbox.pki import ClusterPKI


@dataclass(frozen=True)
class Ports:
    """Every port the sandbox's processes listen on (all on 127.0.0.1)."""

    etcd: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int
    kwok: int
    """kwok's server: its /healthz over HTTP and, over TLS on the same port, the kubelet API
    (`/containerLogs`) kube-apiserver reads a Pod's log from; every fake node's kubelet port."""
    kueue_webhook: int
    kueue_health: int

    @classmethod
    def saved(cls, ports: dict[str, int]) -> Ports:
        """The ports a saved State names; a name this version no longer uses (an older sandbox's
        `kwok_node`) is ignored, so `sandbox status` and `down` still work on a sandbox it started."""
        return cls(**{name: port for name, port in ports.items() if name in cls.__dataclass_fields__})


def etcd(binary: Path, data_dir: Path, ports: Ports) -> list[str]:
    url = f"http://127.0.0.1:{ports.etcd}"
    return [
        str(binary),
        f"--data-dir={data_dir}",
        f"--listen-client-urls={url}",
        f"--advertise-client-urls={url}",
        f"--listen-peer-urls=http://127.0.0.1:{ports.etcd_peer}",
        f"--initial-advertise-peer-urls=http://127.0.0.1:{ports.etcd_peer}",
        f"--initial-cluster=default=http://127.0.0.1:{ports.etcd_peer}",
        "--unsafe-no-fsync",
        "--log-level=warn",
        "--quota-backend-bytes=4294967296",
    ]


def apiserver(binary: Path, certs: ClusterPKI, ports: Ports, cert_dir: Path) -> list[str]:
    return [
        str(binary),
        f"--etcd-servers=http://127.0.0.1:{ports.etcd}",
        "--bind-address=127.0.0.1",
        f"--secure-port={ports.apiserver}",
        "--advertise-address=127.0.0.1",
        "--endpoint-reconciler-type=none",
        f"--tls-cert-file={certs.apiserver_crt}",
        f"--tls-private-key-file={certs.apiserver_key}",
        f"--client-ca-file={certs.ca_crt}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={certs.sa_pub}",
        f"--service-account-signing-key-file={certs.sa_key}",
        "--authorization-mode=Node,RBAC",
        "--service-cluster-ip-range=10.96.0.0/16",
        "--allow-privileged=true",
        "--disable-admission-plugins=ServiceAccount",
        f"--requestheader-client-ca-file={certs.front_proxy_ca_crt}",
        "--requestheader-allowed-names=front-proxy-client",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--proxy-client-cert-file={certs.front_proxy_client_crt}",
        f"--proxy-client-key-file={certs.front_proxy_client_key}",
        f"--cert-dir={cert_dir}",
        "--profiling=false",
        # The nodes' kubelet is kwok's server on 127.0.0.1; their Hostname address (the node name) resolves
        # nowhere, so pods/log goes to the InternalIP.
        "--kubelet-preferred-address-types=InternalIP",
        "--v=1",
    ]


def _delegated_serving(kubeconfig: Path, port: int) -> list[str]:
    return [
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
        "--leader-elect=false",
        "--v=1",
    ]


def controller_manager(
    binary: Path, certs: ClusterPKI, kubeconfig: Path, ports: Ports, cert_dir: Path
) -> list[str]:
    return [
        str(binary),
        *_delegated_serving(kubeconfig, ports.controller_manager),
        f"--cert-dir={cert_dir}",
        "--controllers=*,-nodeipam",
        f"--service-account-private-key-file={certs.sa_key}",
        f"--root-ca-file={certs.ca_crt}",
        "--use-service-account-credentials=false",
    ]


def scheduler(binary: Path, kubeconfig: Path, ports: Ports, cert_dir: Path) -> list[str]:
    return [str(binary), *_delegated_serving(kubeconfig, ports.scheduler), f"--cert-dir={cert_dir}"]


def kwok(binary: Path, certs: ClusterPKI, kubeconfig: Path, config: Path, ports: Ports) -> list[str]:
    """kwok, serving the nodes' kubelet API on its own port: kube-apiserver dials it over TLS (with no
    --kubelet-certificate-authority it does not verify the certificate, as with a kubelet's self-signed
    one) and the health probe over plain HTTP, which kwok tells apart on one listener."""
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--config={config}",
        "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
        "--node-ip=127.0.0.1",
        f"--node-port={ports.kwok}",
        f"--server-address=127.0.0.1:{ports.kwok}",
        f"--tls-cert-file={certs.apiserver_crt}",
        f"--tls-private-key-file={certs.apiserver_key}",
        "--cidr=10.244.0.0/16",
        "--v=INFO",
    ]


def kueue(binary: Path, kubeconfig: Path, config: Path) -> list[str]:
    return [str(binary), f"--config={config}", f"--kubeconfig={kubeconfig}", "--zap-log-level=info"]


def nfd_master(binary: Path, kubeconfig: Path, namespace: str, node: str) -> list[str]:
    """nfd-master v0.19.0 with no listener at all, no leader election and no config file.

    Its only listener (metrics and /healthz) binds `:<-port>` on every interface, and v0.19.0 has no flag
    for the address; `-port=-1` makes that listen fail (nfd-master logs it and carries on), so nothing is
    exposed. Readiness is read from the Nodes it labels instead (cluster.py). It patches the node named by
    NODE_NAME at start-up (its "master node"), and reads its namespace from KUBERNETES_NAMESPACE.
    """
    return [
        *("env", f"KUBERNETES_NAMESPACE={namespace}", f"NODE_NAME={node}"),
        str(binary),
        f"-kubeconfig={kubeconfig}",
        "-config=",
        "-port=-1",
        "-enable-leader-election=false",
        "-v=1",
    ]
