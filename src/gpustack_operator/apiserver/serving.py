"""The HTTPS listener of the aggregated API: certificates, the TLS context, and the aiohttp site.

Certificates come from `--cert-dir` (`tls.crt`, `tls.key`, optional `ca.crt` for the APIService's
caBundle); when the directory lacks them we make a CA and a serving certificate for the routing
Service's DNS names (`<svc>.<ns>.svc`, which kube-apiserver verifies) and write all three there, so a
restart keeps the same bundle. Client certificates are requested, not required, and verified against the
requestheader CA plus the client CA (guide §4.1); HTTP/1.1 only, since aiohttp speaks no HTTP/2.
Handlers are cancelled when the client goes away, so a dropped watch closes its upstream watch.
CertificateReloader re-reads `tls.crt`/`tls.key` when they change (cert-manager renews them in place), so
new connections get the new pair without a restart; a half-written pair is retried at the next look.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from gpustack_operator.certs import pki

__all__ = ["CertificateReloader", "ServingCerts", "load_or_create", "serve", "ssl_context"]

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 3 * 1024 * 1024
"""kube-apiserver's request body limit (aiohttp's default is 1 MiB)."""


@dataclass(frozen=True)
class ServingCerts:
    """PEM of the serving certificate and key, and of the CA that signed it (None: unknown)."""

    cert_pem: bytes
    key_pem: bytes
    ca_pem: bytes | None


def load_or_create(cert_dir: Path | None, hosts: list[str]) -> ServingCerts:
    """`<cert_dir>/tls.{crt,key}` (+ `ca.crt`), or a new self-signed pair written there when absent."""
    if cert_dir is not None and (cert_dir / "tls.crt").is_file() and (cert_dir / "tls.key").is_file():
        ca = cert_dir / "ca.crt"
        return ServingCerts(
            (cert_dir / "tls.crt").read_bytes(),
            (cert_dir / "tls.key").read_bytes(),
            ca.read_bytes() if ca.is_file() else None,
        )
    ca_pair = pki.new_ca("gpustack-operator-worker-ca")
    leaf = pki.issue(ca_pair, hosts[0] if hosts else "gpustack-operator-worker", hosts=hosts, server=True)
    certs = ServingCerts(leaf.cert_pem, leaf.key_pem, ca_pair.cert_pem)
    if cert_dir is not None:
        leaf.write(cert_dir, "tls")
        (cert_dir / "ca.crt").write_bytes(ca_pair.cert_pem)
        log.info("Wrote a self-signed serving certificate for %s to %s", ", ".join(hosts), cert_dir)
    return certs


def ssl_context(certs: ServingCerts, trusted_client_cas_pem: str) -> ssl.SSLContext:
    """Server context: our certificate; client certificates optional, checked against the given CAs."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    scratch = Path(tempfile.mkdtemp(prefix="gpustack-tls-"))
    try:  # ssl loads a key pair only from files; they live here just long enough to be read
        crt, key = scratch / "tls.crt", scratch / "tls.key"
        key.touch(mode=0o600)
        key.write_bytes(certs.key_pem)
        crt.write_bytes(certs.cert_pem)
        ctx.load_cert_chain(str(crt), str(key))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if trusted_client_cas_pem.strip():
        ctx.load_verify_locations(cadata=trusted_client_cas_pem)
        ctx.verify_mode = ssl.CERT_OPTIONAL
    else:
        ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


SHUTDOWN_GRACE = 2.0
"""Seconds in-flight requests get to finish when the server stops."""


async def serve(
    app: web.Application,
    address: tuple[str, int],
    ctx: ssl.SSLContext,
    *,
    started: asyncio.Event | None = None,
) -> None:
    """Serve `app` over TLS on `address` until cancelled (run it as a supervised task)."""
    # Watches proxied for kube-apiserver stay open for minutes; on shutdown they are cut after
    # SHUTDOWN_GRACE (kube-apiserver re-establishes them) instead of aiohttp's 60 s wait, which outlasted
    # the worker's own 30 s stop budget and made a SIGTERM'd worker exit 1.
    runner = web.AppRunner(
        app,
        handle_signals=False,
        access_log=None,
        handler_cancellation=True,
        shutdown_timeout=SHUTDOWN_GRACE,
    )
    await runner.setup()
    try:
        await web.TCPSite(runner, address[0], address[1], ssl_context=ctx).start()
        log.info("Serving the aggregated API on https://%s:%s", *address)
        if started is not None:
            started.set()
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


class CertificateReloader:
    """Loads `<cert_dir>/tls.{crt,key}` into a live context whenever the files change."""

    def __init__(self, ctx: ssl.SSLContext, cert_dir: Path, *, interval: float = 10.0) -> None:
        self.ctx = ctx
        self.crt = cert_dir / "tls.crt"
        self.key = cert_dir / "tls.key"
        self.interval = interval
        self._seen = self._stamp()

    def _stamp(self) -> tuple[int, int, int, int]:
        try:
            crt, key = self.crt.stat(), self.key.stat()
        except FileNotFoundError:
            return (0, 0, 0, 0)
        return (crt.st_mtime_ns, crt.st_size, key.st_mtime_ns, key.st_size)

    def check(self) -> bool:
        """Reload if the files changed since the last successful load; True when it reloaded."""
        stamp = self._stamp()
        if stamp == self._seen or stamp == (0, 0, 0, 0):
            return False
        try:
            self.ctx.load_cert_chain(str(self.crt), str(self.key))
        except (ssl.SSLError, OSError) as e:
            log.warning("Serving certificate in %s not reloaded (%s); retrying", self.crt.parent, e)
            return False
        self._seen = stamp
        log.info("Reloaded the serving certificate from %s", self.crt.parent)
        return True

    async def run(self) -> None:
        """Look every `interval` seconds until cancelled."""
        while True:
            await asyncio.sleep(self.interval)
            self.check()
