"""Kueue's stock manifests, rewritten so kube-apiserver reaches a local Kueue process."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from gpustack_operator.sandbox import build, kueue


@pytest.fixture(scope="module")
def module() -> Path:
    try:
        return build.module_source("sigs.k8s.io/kueue", build.KUEUE_VERSION)
    except build.BuildError as exc:  # pragma: no cover - only without Go / the module proxy
        pytest.fail(f"Kueue module not available: {exc}")


def test_conversion_crds_point_at_the_local_webhook_port(module: Path) -> None:
    crds = {c["spec"]["names"]["plural"]: c for c in kueue.crds(module, webhook_port=19443)}
    assert len(crds) == 11
    for plural in kueue.CONVERSION_CRDS:
        service = crds[plural]["spec"]["conversion"]["webhook"]["clientConfig"]["service"]
        assert service == {
            "name": "kueue-webhook-service",
            "namespace": "kueue-system",
            "path": "/convert",
            "port": 19443,
        }
    assert "conversion" not in crds["resourceflavors"]["spec"]


def test_webhook_configurations_are_renamed_and_routed(module: Path) -> None:
    configs = {c["metadata"]["name"]: c for c in kueue.webhook_configurations(module, webhook_port=19443)}
    assert set(configs) == {"kueue-mutating-webhook-configuration", "kueue-validating-webhook-configuration"}
    hooks = {h["name"]: h for c in configs.values() for h in c["webhooks"]}
    assert {h["clientConfig"]["service"]["port"] for h in hooks.values()} == {19443}
    excluded = hooks["mpod.kb.io"]["namespaceSelector"]["matchExpressions"][0]
    assert excluded["operator"] == "NotIn"
    assert set(excluded["values"]) == {"kube-system", "kueue-system"}


def test_cert_dir_gets_the_secret_files(tmp_path: Path) -> None:
    data = {"tls.crt": base64.b64encode(b"CERT").decode(), "tls.key": base64.b64encode(b"KEY").decode()}
    kueue.write_cert_dir(tmp_path / "certs", data)
    assert (tmp_path / "certs" / "tls.crt").read_bytes() == b"CERT"
    assert (tmp_path / "certs" / "tls.key").read_bytes() == b"KEY"
