"""`gpustack-operator worker` parses every flag it documents, and refuses bad values by name."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from gpustack_operator.cli import build_parser


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["worker", *argv])


def test_defaults_are_loopback_servers_with_leader_election(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    args = parse()
    assert args.kubeconfig is None
    assert args.kube_leader_election is True
    assert args.leader_election_id == "worker.gpustack.ai"
    assert args.metrics_bind_address == ("127.0.0.1", 8080)
    assert args.health_probe_bind_address == ("127.0.0.1", 8081)
    assert args.log_level == "info"


def test_every_flag_is_parsed() -> None:
    args = build_parser().parse_args(
        [
            "w",
            "--kubeconfig=/tmp/kc",
            "--kube-api-qps=5",
            "--kube-api-burst=10",
            "--kube-leader-election=false",
            "--leader-election-id=other",
            "--metrics-bind-address=0",
            "--health-probe-bind-address=:9000",
            "--log-level=debug",
        ]
    )
    assert args.kubeconfig == Path("/tmp/kc")
    assert (args.kube_api_qps, args.kube_api_burst) == (5.0, 10)
    assert args.kube_leader_election is False
    assert args.leader_election_id == "other"
    assert args.metrics_bind_address is None
    assert args.health_probe_bind_address == ("0.0.0.0", 9000)
    assert args.log_level == "debug"


def test_help_documents_every_flag_says_what_the_controllers_build_and_what_is_not_built(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        parse("--help")
    text = " ".join(capsys.readouterr().out.split())
    for flag in (
        "--kubeconfig",
        "--kube-api-qps",
        "--kube-api-burst",
        "--kube-leader-election",
        "--leader-election-id",
        "--metrics-bind-address",
        "--health-probe-bind-address",
        "--log-level",
        "--secure-port",
        "--bind-address",
        "--cert-dir",
    ):
        assert flag in text
    assert "ResourceFlavor per node flavor, one ClusterQueue and InstanceType per hardware pool" in text
    assert "serves instancetypes, devices and instances in worker.gpustack.ai/v1" in text
    assert "fold sliced-GPU Pod requests (memory-percentage or memory-mib) into units" in text
    assert "each Instance runs as one Pod in its type's queue" in text
    assert "settings.gpustack.ai/v1 serves the gpustack-settings Secret's keys as Settings" in text
    assert "a rotated ca.crt is re-registered" in text
    assert "--no-webhooks" in text


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["--kube-leader-election=yes"], id="booleans are Go's ParseBool, not yes/no"),
        pytest.param(["--metrics-bind-address=8080"], id="an address needs a host:port"),
        pytest.param(["--kube-api-qps=0"], id="qps must be positive"),
        pytest.param(["--kube-api-burst=-1"], id="burst must be positive"),
    ],
)
def test_bad_values_are_refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse(*argv)
    assert exit_.value.code == 2
    assert argv[0].split("=")[0] in capsys.readouterr().err
