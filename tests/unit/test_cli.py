"""`gpustack-operator` loads only the subcommand it runs: a node agent must not carry the worker, nor the
worker gRPC and the sandbox. Each case runs the real entry point in a fresh interpreter and reads which
packages ended up in sys.modules."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROBE = """
import json, sys
from gpustack_operator.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
loaded = {name.split(".")[0] for name in sys.modules}
loaded |= {".".join(name.split(".")[:2]) for name in sys.modules if name.startswith("gpustack_operator.")}
print(json.dumps(sorted(loaded)), file=sys.stderr)
"""

HEAVY = {"grpc", "kubernetes_asyncio", "aiohttp"}
OURS = {f"gpustack_operator.{p}" for p in ("worker", "device_manager", "sandbox", "controllers", "apiserver")}


def run(*argv: str) -> tuple[str, set[str]]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout, set(json.loads(done.stderr.strip().splitlines()[-1]))


@pytest.mark.parametrize(
    ("argv", "must_not_load"),
    [
        pytest.param(["--help"], HEAVY | OURS, id="top-level-help-loads-no-subcommand"),
        pytest.param(
            ["worker", "--help"],
            {"grpc", "gpustack_operator.device_manager", "gpustack_operator.sandbox"},
            id="worker-needs-no-grpc-nor-sandbox",
        ),
        pytest.param(
            ["dm", "serve", "--help"],
            {"kubernetes_asyncio", "aiohttp"} | OURS - {"gpustack_operator.device_manager"},
            id="device-manager-serve-loads-only-its-own-package-and-no-http-library",
        ),
        pytest.param(
            ["sandbox", "--help"],
            {"gpustack_operator.worker", "gpustack_operator.controllers"},
            id="sandbox-needs-no-worker",
        ),
    ],
)
def test_a_subcommand_loads_only_what_it_runs(argv: list[str], must_not_load: set[str]) -> None:
    out, loaded = run(*argv)
    assert "usage: gpustack-operator" in out
    assert not loaded & must_not_load, sorted(loaded & must_not_load)


def test_top_level_help_still_lists_every_subcommand_with_its_summary() -> None:
    out, _ = run("--help")
    for name in ("worker", "device-manager", "sandbox"):
        assert name in out
    assert "the per-node agent" in out


def test_the_chosen_subcommand_gets_its_full_flags() -> None:
    out, loaded = run("worker", "--help")
    assert "--kube-api-qps" in out
    assert "gpustack_operator.worker" in loaded
