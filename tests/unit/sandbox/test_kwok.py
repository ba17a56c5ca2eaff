"""kwok's configuration: every fake container's log comes from the sandbox's file, in the CRI format kwok
parses, and the kubelet API that serves it is on; kwok's kubelet port is its server's."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import yaml

from gpustack_operator.sandbox import build, components, kwok
from gpustack_operator.sandbox.pki import ClusterPKI


def test_every_container_logs_the_sandbox_file_and_the_log_endpoint_is_on(tmp_path: Path) -> None:
    module = build.module_source("sigs.k8s.io/kwok", build.KWOK_VERSION)
    docs = list(yaml.safe_load_all(kwok.configuration(module, tmp_path / "c.log")))
    (logs,) = [d for d in docs if d["kind"] == "ClusterLogs"]
    assert logs["spec"] == {"selector": {}, "logs": [{"logsFile": str(tmp_path / "c.log"), "follow": True}]}
    assert docs[0]["options"]["enableDebuggingHandlers"] is True


def test_the_log_is_started_once_and_lines_are_appended_in_cri_format(tmp_path: Path) -> None:
    path = tmp_path / "kwok" / kwok.CONTAINER_LOG
    kwok.start_container_log(path)
    kwok.append_container_log(path, "hello")
    kwok.start_container_log(path)  # a restarted sandbox keeps what was written
    first, second = path.read_text().splitlines()
    assert first.endswith(f" stdout F {kwok.STARTED}")
    assert second.endswith(" stdout F hello")
    when = datetime(2026, 12, 1, 10, 0, 0, 1, tzinfo=UTC)
    assert kwok.cri_line("x", when) == "2026-12-01T10:00:00.000001Z stdout F x\n"


def test_the_nodes_kubelet_port_is_kwoks_tls_server() -> None:
    ports = components.Ports(**{name: n for n, name in enumerate(components.Ports.__dataclass_fields__, 1)})
    argv = components.kwok(Path("kwok"), ClusterPKI(Path("pki")), Path("kc"), Path("c.yaml"), ports)
    assert f"--node-port={ports.kwok}" in argv
    assert f"--server-address=127.0.0.1:{ports.kwok}" in argv
    assert "--tls-cert-file=pki/apiserver.crt" in argv
    assert components.Ports.saved({**vars(ports), "kwok_node": 9}) == ports
