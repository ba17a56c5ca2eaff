#!/usr/bin/env python3
"""`make chart`: vendor the subcharts, lint the chart, render it three ways, and dry-run it on the sandbox.

Usage: ``python scripts/chart.py [--out DIR]``. Steps, each reported on one line:

1. scripts/vendor_subcharts.py copies Kueue's and NFD's charts from the Go module cache into charts/;
2. ``helm lint --strict``;
3. ``helm template`` with the default values, with tests/chart/all-manufacturers.yaml, and with Kueue and NFD
   disabled, into DIR (default build/chart/) for a reader or a test to look at;
4. when a sandbox runs (.sandbox/kubeconfig exists and ``gpustack-operator sandbox status`` succeeds),
   ``kubectl apply --dry-run=server`` of the Kueue/NFD-disabled render against it, so kube-apiserver's own
   validation sees every object. Without one, the step says it was skipped.

helm and kubectl are the binaries ``gpustack-operator sandbox build`` made (``make control-plane``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from gpustack_operator.sandbox.build import K8S_VERSION, binary_path

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "gpustack-operator"
RELEASE = "gpustack-operator"
NAMESPACE = "gpustack-system"
SANDBOX_DIR = Path(os.environ.get("GPUSTACK_SANDBOX_DIR", ROOT / ".sandbox"))
NO_SUBCHARTS = ("--set", "kueue.enabled=false", "--set", "node-feature-discovery.enabled=false")
RENDERS: dict[str, tuple[str, ...]] = {
    "default": (),
    "all-manufacturers": ("--values", str(ROOT / "tests" / "chart" / "all-manufacturers.yaml")),
    "no-subcharts": NO_SUBCHARTS,
}


_CLI = "import sys; from gpustack_operator.cli import main; sys.exit(main())"


class StepError(Exception):
    pass


def _run(argv: Sequence[str | Path], *, what: str, stdout: Path | None = None) -> str:
    result = subprocess.run([str(a) for a in argv], cwd=ROOT, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise StepError(f"{what} failed (exit {result.returncode}):\n{result.stdout}{result.stderr}".rstrip())
    if stdout is not None:
        stdout.write_text(result.stdout, encoding="utf-8")
    return result.stdout


def _tool(name: str) -> Path:
    path = binary_path(name)
    if not path.is_file():
        raise StepError(
            f"{name} is not built at {path}; run `make control-plane` (gpustack-operator sandbox build)"
        )
    return path


def _sandbox_kubeconfig() -> tuple[Path | None, str]:
    """The running sandbox's kubeconfig, or None and why there is none."""
    kubeconfig = SANDBOX_DIR / "kubeconfig"
    if not kubeconfig.is_file():
        return None, f"no sandbox ({kubeconfig} does not exist)"
    status = subprocess.run(
        [sys.executable, "-c", _CLI, "sandbox", "--run-dir", str(SANDBOX_DIR), "status"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if status.returncode != 0:
        return None, "`gpustack-operator sandbox status` failed (no healthy sandbox)"
    return kubeconfig, ""


def _dry_run(helm: Path, out: Path) -> str:
    kubeconfig, why = _sandbox_kubeconfig()
    if kubeconfig is None:
        return f"SKIPPED kubectl apply --dry-run=server: {why}"
    kubectl = _tool("kubectl")
    # A server-side dry run does not create the namespace, so the render must target one that exists.
    namespace = NAMESPACE
    probe = subprocess.run(
        [str(kubectl), "--kubeconfig", str(kubeconfig), "get", "namespace", NAMESPACE],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0:
        namespace = "default"
    manifest = out / f"no-subcharts.{namespace}.yaml"
    _template(helm, manifest, NO_SUBCHARTS, namespace)
    _run(
        [kubectl, "--kubeconfig", kubeconfig, "apply", "--dry-run=server", "-f", manifest],
        what="kubectl apply --dry-run=server",
    )
    note = (
        ""
        if namespace == NAMESPACE
        else f" (namespace {NAMESPACE} does not exist there; rendered into default)"
    )
    return f"ok   kubectl apply --dry-run=server of {manifest.name} against {kubeconfig}{note}"


def _template(helm: Path, target: Path, extra: Sequence[str], namespace: str = NAMESPACE) -> None:
    kube_version = K8S_VERSION.lstrip("v")
    _run(
        [helm, "template", RELEASE, CHART, "--namespace", namespace, "--kube-version", kube_version, *extra],
        what=f"helm template ({target.name})",
        stdout=target,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "chart", help="where the renders go")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        _run([sys.executable, ROOT / "scripts" / "vendor_subcharts.py"], what="vendoring the subcharts")
        print("ok   vendored kueue and node-feature-discovery into charts/gpustack-operator/charts/")
        helm = _tool("helm")
        _run([helm, "lint", "--strict", CHART], what="helm lint --strict")
        print("ok   helm lint --strict")
        for name, extra in RENDERS.items():
            target = args.out / f"{name}.yaml"
            _template(helm, target, extra)
            shown = target.relative_to(ROOT) if target.is_relative_to(ROOT) else target
            print(f"ok   helm template ({name}) -> {shown}")
        print(_dry_run(helm, args.out))
    except StepError as exc:
        print(f"FAILED {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
