"""The aggregated API's certificates: self-signed when absent, kept across restarts, reloaded when renewed."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

from cryptography import x509

from gpustack_operator.apiserver import serving
from gpustack_operator.certs import pki

HOSTS = pki.service_hosts("gpustack-operator-worker", "gpustack-system")


def test_missing_certificates_are_made_for_the_service_name_and_kept(tmp_path: Path) -> None:
    first = serving.load_or_create(tmp_path, HOSTS)
    leaf = x509.load_pem_x509_certificate(first.cert_pem)
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "gpustack-operator-worker.gpustack-system.svc" in names.get_values_for_type(x509.DNSName)
    assert first.ca_pem is not None
    leaf.verify_directly_issued_by(x509.load_pem_x509_certificate(first.ca_pem))
    again = serving.load_or_create(tmp_path, HOSTS)  # a restart reuses them: the caBundle stays valid
    assert again == first


def test_without_a_ca_file_the_bundle_is_unknown(tmp_path: Path) -> None:
    serving.load_or_create(tmp_path, HOSTS)
    (tmp_path / "ca.crt").unlink()
    assert serving.load_or_create(tmp_path, HOSTS).ca_pem is None


async def _served_serial(port: int, ca: pki.KeyPair) -> int:
    client = ssl.create_default_context(cadata=ca.cert_pem.decode())
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client, server_hostname="localhost")
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    await writer.wait_closed()
    del reader
    return x509.load_der_x509_certificate(der).serial_number


async def test_renewed_certificate_is_served_to_new_connections(tmp_path: Path) -> None:
    ca = pki.new_ca("serving-ca")
    old = pki.issue(ca, "localhost", hosts=["localhost"], server=True)
    old.write(tmp_path, "tls")
    ctx = serving.ssl_context(serving.load_or_create(tmp_path, HOSTS), "")
    reloader = serving.CertificateReloader(ctx, tmp_path)
    server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0, ssl=ctx)
    port = server.sockets[0].getsockname()[1]
    try:
        assert await _served_serial(port, ca) == old.cert.serial_number
        assert reloader.check() is False  # nothing changed
        new = pki.issue(ca, "localhost", hosts=["localhost"], server=True)
        new.write(tmp_path, "tls")
        assert reloader.check() is True
        assert await _served_serial(port, ca) == new.cert.serial_number
    finally:
        server.close()
        await server.wait_closed()


def test_a_half_written_pair_is_not_loaded(tmp_path: Path) -> None:
    ca = pki.new_ca("serving-ca")
    pki.issue(ca, "localhost", hosts=["localhost"], server=True).write(tmp_path, "tls")
    ctx = serving.ssl_context(serving.load_or_create(tmp_path, HOSTS), "")
    reloader = serving.CertificateReloader(ctx, tmp_path)
    other = pki.issue(ca, "localhost", hosts=["localhost"], server=True)
    (tmp_path / "tls.crt").write_bytes(other.cert_pem)  # the key is still the old one
    assert reloader.check() is False
    other.write(tmp_path, "tls")
    assert reloader.check() is True
