"""Build the control-plane binaries from the Go tool modules under tools/, each cached by its own pins.

No registry ships kube-apiserver, Kueue, kwok or nfd-master for this machine, so we build them from their
Go modules (see shared/guides/control-plane.md). A cold build takes tens of minutes on two cores, so each
component's binaries go into a cache directory keyed by the hash of its own tool module (go.mod, go.sum)
and its build recipe (packages, ldflags, tags): a changed pin rebuilds that component only, an unchanged
one costs nothing, and adding a component leaves the others' cache alone. Each component prints one
progress line; the full `go` output goes to a log next to its binaries.

The tool modules live in the source checkout, not in the wheel: `tools_dir()` finds them there, or where
`--tools-dir` / GPUSTACK_TOOLS_DIR points, and otherwise says how to get them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
"""The source checkout this module lies in (from an installed wheel: a site-packages parent, no tools)."""
CHECKOUT_TOOLS = REPO_ROOT / "tools"
TOOLS_ENV = "GPUSTACK_TOOLS_DIR"
CACHE_ROOT = Path(os.environ.get("GPUSTACK_SANDBOX_CACHE", Path.home() / ".cache" / "gpustack-operator"))


@dataclass(frozen=True)
class Component:
    """One Go tool module and the binaries it yields (binary name -> Go package)."""

    module: str
    binaries: dict[str, str]
    version_ldflags: tuple[str, ...] = ()
    tags: str = ""

    @property
    def ldflags(self) -> str:
        return " ".join(("-s", "-w", *self.version_ldflags))


def _k8s_version_flags(version: str) -> tuple[str, ...]:
    major, minor = version.lstrip("v").split(".")[:2]
    flags: list[str] = []
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={version}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
            f"-X {pkg}.gitCommit={'0' * 40}",
            f"-X {pkg}.buildDate=1970-01-01T00:00:00Z",
        ]
    return tuple(flags)


K8S_VERSION = "v1.37.2"
KUEUE_VERSION = "v0.17.0"
KWOK_VERSION = "v0.8.0"
NFD_VERSION = "v0.19.0"
HELM_VERSION = "v3.22.0"
COMPONENTS: tuple[Component, ...] = (
    Component("etcd", {"etcd": "go.etcd.io/etcd/server/v3"}),
    Component("kwok", {"kwok": "sigs.k8s.io/kwok/cmd/kwok"}),
    Component(
        "kueue",
        {"kueue": "sigs.k8s.io/kueue/cmd/kueue"},
        version_ldflags=(
            f"-X sigs.k8s.io/kueue/pkg/version.GitVersion={KUEUE_VERSION}",
            f"-X sigs.k8s.io/kueue/pkg/version.GitCommit={'0' * 40}",
        ),
    ),
    Component(
        "k8s",
        {
            "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
            "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
            "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
            "kubectl": "k8s.io/kubernetes/cmd/kubectl",
        },
        version_ldflags=_k8s_version_flags(K8S_VERSION),
        tags="selinux,notest",
    ),
    # NFD's own go.mod replaces api/nfd with ./api/nfd, which a dependency's replace cannot do, so the
    # tool module requires api/nfd at the same tag and copies NFD's k8s.io replace block (guide §10).
    Component(
        "nfd",
        {"nfd-master": "sigs.k8s.io/node-feature-discovery/cmd/nfd-master"},
        version_ldflags=(f"-X sigs.k8s.io/node-feature-discovery/pkg/version.version={NFD_VERSION}",),
    ),
    # helm is not part of the control plane: `make chart` and the chart's install tests run it against the
    # sandbox, the way kubectl is built beside kube-apiserver.
    Component(
        "helm",
        {"helm": "helm.sh/helm/v3/cmd/helm"},
        version_ldflags=(f"-X helm.sh/helm/v3/internal/version.version={HELM_VERSION}",),
    ),
)
BINARIES = tuple(name for c in COMPONENTS for name in c.binaries)
_COMPONENT_OF = {name: c for c in COMPONENTS for name in c.binaries}


class BuildError(RuntimeError):
    """A component failed to build; the message names it and, when found, the module `go` could not get."""


def _has_modules(directory: Path) -> bool:
    return all((directory / c.module / "go.mod").is_file() for c in COMPONENTS)


def tools_dir() -> Path:
    """The Go tool modules: GPUSTACK_TOOLS_DIR (set by `--tools-dir`) or the source checkout's tools/.

    BuildError says what to do when neither has them, as when the sandbox runs from an installed wheel.
    """
    explicit = os.environ.get(TOOLS_ENV)
    if explicit:
        if not _has_modules(Path(explicit)):
            raise BuildError(
                f"{TOOLS_ENV}={explicit} (or --tools-dir) holds no Go tool modules: expected "
                f"{', '.join(f'{c.module}/go.mod' for c in COMPONENTS)}, as in the repository's tools/"
            )
        return Path(explicit)
    if _has_modules(CHECKOUT_TOOLS):
        return CHECKOUT_TOOLS
    raise BuildError(
        "the sandbox builds its control plane from the Go tool modules under tools/ of a gpustack-operator "
        "source checkout, and this installation has none (an installed wheel does not ship them). Clone the "
        "repository and run the sandbox from it (`pip install -e .` there), or pass --tools-dir (or set "
        f"{TOOLS_ENV}) to the tools/ directory of a checkout of the same version."
    )


def cache_key(component: Component, tools: Path | None = None) -> str:
    """Hash of the component's go.mod and go.sum and of how its binaries are built."""
    tools = tools or tools_dir()
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum"):
        digest.update(name.encode())
        digest.update((tools / component.module / name).read_bytes())
    recipe = [sorted(component.binaries.items()), component.ldflags, component.tags]
    digest.update(json.dumps(recipe).encode())
    return digest.hexdigest()[:16]


def component_dir(component: Component, tools: Path | None = None) -> Path:
    """`<cache>/control-plane/<module>/<key>`: its `bin/` and the `build.log` of its last build."""
    return CACHE_ROOT / "control-plane" / component.module / cache_key(component, tools)


def binary_path(name: str, tools: Path | None = None) -> Path:
    """Where the cache holds the binary `name` built from the current pins (it may not exist yet)."""
    return component_dir(_COMPONENT_OF[name], tools) / "bin" / name


def missing_binaries(directory: Path | None = None) -> list[str]:
    """Binaries not built yet: in `directory` when given (every binary in one place), else in the cache."""
    return [name for name in BINARIES if not (directory / name if directory else binary_path(name)).is_file()]


_MISSING = (
    # go: example.com/mod@v1.2.3: reading https://proxy/...: 404 Not Found
    # go: module example.com/mod@v1.2.3: unknown revision
    re.compile(r"(?:module )?(\S+@\S+): (?:reading|unknown revision|invalid version|verifying)"),
    re.compile(r"missing go\.sum entry for module providing package (\S+)"),
    re.compile(r"no required module provides package (\S+?);?(?:\s|$)"),
    re.compile(r"cannot find module providing package (\S+)"),
)


def missing_module(log_text: str) -> str | None:
    """The module (or package) `go` could not get, read from its output, or None."""
    for line in log_text.splitlines():
        for pattern in _MISSING:
            match = pattern.search(line)
            if match:
                return match.group(1).rstrip(":;")
    return None


def go_env() -> dict[str, str]:
    return dict(os.environ, GOTOOLCHAIN="local", CGO_ENABLED="0", GOFLAGS="-mod=mod")


def build_component(component: Component, out_dir: Path, log: Path) -> None:
    """Build every binary of one component into out_dir (atomically renamed into place)."""
    module_dir = tools_dir() / component.module
    for binary, package in component.binaries.items():
        tmp = out_dir / f".{binary}.tmp"
        cmd = ["go", "build", "-trimpath", f"-ldflags={component.ldflags}", "-o", str(tmp)]
        if component.tags:
            cmd.append(f"-tags={component.tags}")
        cmd.append(package)
        with log.open("a") as sink:
            sink.write(f"$ (cd {module_dir} && {' '.join(cmd)})\n")
            sink.flush()
            result = subprocess.run(
                cmd, cwd=module_dir, env=go_env(), stdout=sink, stderr=subprocess.STDOUT, check=False
            )
        if result.returncode != 0:
            text = log.read_text(errors="replace")
            module = missing_module(text)
            hint = f"; missing module: {module}" if module else ""
            raise BuildError(
                f"building {component.module}/{binary} failed (exit {result.returncode}){hint}; "
                f"full log: {log}"
            )
        tmp.rename(out_dir / binary)


def build_all(progress: Callable[[str], None] = print, force: bool = False) -> dict[str, Path]:
    """Build what is missing from the cache; return every binary's path."""
    started = time.monotonic()
    for component in COMPONENTS:
        names = list(component.binaries)
        out_dir = component_dir(component) / "bin"
        if not force and all((out_dir / n).is_file() for n in names):
            progress(f"[build] {component.module:<6} cached ({', '.join(names)})")
            continue
        out_dir.mkdir(parents=True, exist_ok=True)
        log = out_dir.parent / "build.log"
        t0 = time.monotonic()
        progress(f"[build] {component.module:<6} building {', '.join(names)} ... (log: {log})")
        build_component(component, out_dir, log)
        progress(f"[build] {component.module:<6} done in {time.monotonic() - t0:.0f}s")
    progress(f"[build] all binaries in {CACHE_ROOT / 'control-plane'} ({time.monotonic() - started:.0f}s)")
    return {name: binary_path(name) for name in BINARIES}


def module_source(module_path: str, version: str) -> Path:
    """The unpacked source of module_path@version in the Go module cache, downloaded if needed.

    Manifests (Kueue's CRDs and webhooks, kwok's stages, NFD's CRDs) are read from here at run time rather
    than copied into this repository.
    """
    CACHE_ROOT.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        ["go", "mod", "download", "-json", f"{module_path}@{version}"],
        cwd=CACHE_ROOT,
        env=go_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        info = json.loads(result.stdout)
    except json.JSONDecodeError:
        info = {}
    if result.returncode != 0 or not info.get("Dir"):
        raise BuildError(
            f"module {module_path}@{version} could not be downloaded: "
            f"{info.get('Error') or result.stderr.strip()}"
        )
    return Path(info["Dir"])
