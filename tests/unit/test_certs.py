"""Certificates the sandbox and (later) the worker's webhooks hand to TLS peers."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from gpustack_operator.certs import pki


def test_serving_cert_verifies_against_its_ca_for_every_service_name(tmp_path: Path) -> None:
    ca = pki.new_ca("test-ca")
    leaf = pki.issue(ca, "hooks", hosts=pki.service_hosts("hooks", "gpustack-system"), server=True)
    crt, key = leaf.write(tmp_path, "tls")
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    sans = leaf.cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "hooks.gpustack-system.svc" in sans.get_values_for_type(x509.DNSName)
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    leaf.cert.verify_directly_issued_by(ca.cert)
    # The standard library accepts the pair as a server identity.
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(str(crt), str(key))


def test_client_cert_carries_groups_as_organizations_and_client_usage_only() -> None:
    ca = pki.new_ca("test-ca")
    admin = pki.issue(ca, "kubernetes-admin", organizations=["system:masters"], client=True)
    orgs = [a.value for a in admin.cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    assert orgs == ["system:masters"]
    usages = admin.cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    basic = admin.cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    assert basic.ca is False


def test_a_leaf_must_be_for_something() -> None:
    ca = pki.new_ca("test-ca")
    with pytest.raises(ValueError, match="server, a client, or both"):
        pki.issue(ca, "nobody")
