"""A test CA and a 127.0.0.1 serving context, for the in-cluster transport's tests over real TLS."""

from __future__ import annotations

import ssl
from pathlib import Path

from gpustack_operator.certs import pki


def serving_context(directory: Path) -> tuple[ssl.SSLContext, pki.KeyPair]:
    """A server-side TLS context for 127.0.0.1 and the CA that signed its certificate."""
    ca = pki.new_ca("test-cluster-ca")
    crt, key = pki.issue(ca, "kube-apiserver", hosts=["127.0.0.1"], server=True).write(directory, "serving")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(crt, key)
    return context, ca


def mount(directory: Path, token: str, ca: pki.KeyPair) -> Path:
    """What the kubelet mounts for a service account: `token` and `ca.crt`."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "token").write_text(token + "\n")
    (directory / "ca.crt").write_bytes(ca.cert_pem)
    return directory
