"""The sandbox cluster's PKI on disk, and the admin kubeconfig that uses it.

Laid out the way kube-apiserver flags expect: a cluster CA that signs the apiserver's serving cert and the
admin client cert (system:masters), a separate front-proxy CA whose client cert the apiserver presents to
aggregated APIs, and the service-account signing key pair.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from gpustack_operator.certs import pki

APISERVER_HOSTS = (
    "localhost",
    "127.0.0.1",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
    "10.96.0.1",
)
FRONT_PROXY_CLIENT = "front-proxy-client"


@dataclass(frozen=True)
class ClusterPKI:
    """Paths of every PEM file the components are started with."""

    directory: Path

    def file(self, name: str) -> Path:
        return self.directory / name

    @property
    def ca_crt(self) -> Path:
        return self.file("ca.crt")

    @property
    def apiserver_crt(self) -> Path:
        return self.file("apiserver.crt")

    @property
    def apiserver_key(self) -> Path:
        return self.file("apiserver.key")

    @property
    def admin_crt(self) -> Path:
        return self.file("admin.crt")

    @property
    def admin_key(self) -> Path:
        return self.file("admin.key")

    @property
    def front_proxy_ca_crt(self) -> Path:
        return self.file("front-proxy-ca.crt")

    @property
    def front_proxy_client_crt(self) -> Path:
        return self.file("front-proxy-client.crt")

    @property
    def front_proxy_client_key(self) -> Path:
        return self.file("front-proxy-client.key")

    @property
    def sa_key(self) -> Path:
        return self.file("sa.key")

    @property
    def sa_pub(self) -> Path:
        return self.file("sa.pub")


def generate(directory: Path) -> ClusterPKI:
    """Create (or keep, if already complete) the cluster PKI in directory."""
    paths = ClusterPKI(directory)
    if paths.ca_crt.exists() and paths.sa_key.exists() and paths.front_proxy_client_key.exists():
        return paths
    ca = pki.new_ca("gpustack-sandbox-ca")
    ca.write(directory, "ca")
    pki.issue(ca, "kube-apiserver", hosts=APISERVER_HOSTS, server=True).write(directory, "apiserver")
    pki.issue(ca, "kubernetes-admin", organizations=["system:masters"], client=True).write(directory, "admin")
    front = pki.new_ca("gpustack-sandbox-front-proxy-ca")
    front.write(directory, "front-proxy-ca")
    pki.issue(front, FRONT_PROXY_CLIENT, client=True).write(directory, "front-proxy-client")
    sa = pki.new_key()
    pki.write_private_key(sa, paths.sa_key)
    pki.write_public_key(sa, paths.sa_pub)
    return paths


def write_kubeconfig(path: Path, server: str, certs: ClusterPKI, user: str = "admin") -> Path:
    """A kubeconfig for the admin client cert against server (https://127.0.0.1:<port>)."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "sandbox", "cluster": {"server": server, "certificate-authority": str(certs.ca_crt)}}
        ],
        "users": [
            {
                "name": user,
                "user": {"client-certificate": str(certs.admin_crt), "client-key": str(certs.admin_key)},
            }
        ],
        "contexts": [{"name": "sandbox", "context": {"cluster": "sandbox", "user": user}}],
        "current-context": "sandbox",
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    path.chmod(0o600)
    return path
