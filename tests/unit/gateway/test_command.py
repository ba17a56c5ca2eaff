"""`gpustack-operator worker-gateway` parses contract §9's flags; a bad value is one line, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpustack_operator.cli import build_parser, main
from gpustack_operator.gateway.command import options_from
from gpustack_operator.gateway.options import DEFAULT_SOCKET, ConnectionMode, parse_duration


def options(*argv: str):  # type: ignore[no-untyped-def]
    return options_from(build_parser().parse_args(["worker-gateway", *argv]))


def test_defaults_are_the_gpustack_api_mode_on_the_unix_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    opts = options()
    assert opts.mode is ConnectionMode.GPUSTACK_API
    assert opts.unix_socket == DEFAULT_SOCKET
    assert opts.secure_port == 0
    assert opts.proxy_host("c1") == "http://localhost:30080/v2/clusters/c1/proxy"
    assert (opts.resync, opts.timeout, opts.qps, opts.burst) == (600.0, 30.0, 20.0, 30)


@pytest.mark.parametrize(
    ("argv", "host"),
    [
        pytest.param([], "http://localhost:30080/v2/clusters/c/proxy", id="http on the default port"),
        pytest.param(
            ["--worker-conn-gpustack-api-port=443"],
            "https://localhost:443/v2/clusters/c/proxy",
            id="https on 443",
        ),
        pytest.param(
            ["--worker-conn-gpustack-api-scheme=https"],
            "https://localhost:30080/v2/clusters/c/proxy",
            id="https when asked",
        ),
    ],
)
def test_the_gpustack_api_host_of_a_cluster(argv: list[str], host: str) -> None:
    assert options(*argv).proxy_host("c") == host


def test_every_flag_is_parsed() -> None:
    opts = options(
        "--worker-conn-mode=loopback",
        "--kubeconfig=/tmp/kc",
        "--resync-period=1h",
        "--worker-conn-timeout=1m30s",
        "--worker-conn-qps=10",
        "--worker-conn-burst=11",
        "--secure-port=8443",
        "--bind-address=0.0.0.0",
        "--cert-dir=/tmp/certs",
        "--unix-socket=/tmp/gw.sock",
    )
    assert opts.mode is ConnectionMode.LOOPBACK
    assert opts.kubeconfig == Path("/tmp/kc")
    assert (opts.resync, opts.timeout, opts.qps, opts.burst) == (3600.0, 90.0, 10.0, 11)
    assert (opts.secure_port, opts.bind_address, opts.cert_dir) == (8443, "0.0.0.0", Path("/tmp/certs"))
    assert opts.unix_socket == Path("/tmp/gw.sock")


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        pytest.param(["--resync-period=4m59s"], "--resync-period must be at least 5m", id="resync under 5m"),
        pytest.param(
            ["--worker-conn-timeout=9s"], "--worker-conn-timeout must be at least 10s", id="timeout under 10s"
        ),
        pytest.param(
            ["--worker-conn-qps=9", "--worker-conn-burst=20"],
            "--worker-conn-qps must be at least 10",
            id="qps under 10",
        ),
        pytest.param(
            ["--worker-conn-qps=10", "--worker-conn-burst=9"],
            "--worker-conn-burst must be at least 10",
            id="burst under 10",
        ),
        pytest.param(
            ["--worker-conn-qps=20", "--worker-conn-burst=20"],
            "must be greater than --worker-conn-qps",
            id="burst not above qps",
        ),
        pytest.param(["--worker-conn-mode=direct"], "--worker-conn-mode", id="unknown connection mode"),
        pytest.param(["--worker-conn-timeout=ten"], "--worker-conn-timeout", id="not a duration"),
        pytest.param(["--worker-conn-qps=many"], "--worker-conn-qps", id="not a number"),
        pytest.param(["--secure-port=70000"], "--secure-port", id="not a port"),
    ],
)
def test_a_bad_flag_is_one_line_naming_it_and_exit_2(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _exit_code(["worker-gateway", *argv]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert named in err


def _exit_code(argv: list[str]) -> int:
    """Values argparse refuses exit from the parser; those the options refuse come back from main()."""
    try:
        return main(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("5m", 300.0), ("1h30m", 5400.0), ("10s", 10.0), ("250ms", 0.25), ("42", 42.0)],
)
def test_durations_are_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_help_says_what_is_served_and_what_is_not_built(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["worker-gateway", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for flag in (
        "--worker-conn-mode",
        "--worker-conn-gpustack-api-port",
        "--worker-conn-gpustack-api-scheme",
        "--resync-period",
        "--worker-conn-timeout",
        "--worker-conn-qps",
        "--worker-conn-burst",
        "--secure-port",
        "--bind-address",
        "--cert-dir",
        "--unix-socket",
        "--kubeconfig",
    ):
        assert flag in text
    assert "Not built yet" in text
    assert "aggregated=true folds the InstanceTypes of all clusters by hardware" in text
