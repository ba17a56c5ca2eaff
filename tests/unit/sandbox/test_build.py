"""The control-plane build: cache keys and failure messages a developer can act on."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpustack_operator.sandbox import build


def write_module(tools: Path, module: str, go_sum: str) -> None:
    (tools / module).mkdir(exist_ok=True)
    (tools / module / "go.mod").write_text(f"module gpustack.invalid/tools/{module}\n")
    (tools / module / "go.sum").write_text(go_sum)


def test_a_changed_pin_rebuilds_only_its_own_component(tmp_path: Path) -> None:
    k8s, etcd = build.Component("k8s", {"kube-apiserver": "x"}), build.Component("etcd", {"etcd": "y"})
    write_module(tmp_path, "k8s", "k8s.io/api v0.37.2 h1:abc\n")
    write_module(tmp_path, "etcd", "go.etcd.io/etcd v3.6.16 h1:abc\n")
    before = build.cache_key(k8s, tmp_path), build.cache_key(etcd, tmp_path)
    assert (build.cache_key(k8s, tmp_path), build.cache_key(etcd, tmp_path)) == before
    write_module(tmp_path, "k8s", "k8s.io/api v0.37.3 h1:def\n")
    write_module(tmp_path, "nfd", "sigs.k8s.io/node-feature-discovery v0.19.0 h1:ghi\n")
    assert build.cache_key(k8s, tmp_path) != before[0]
    assert build.cache_key(etcd, tmp_path) == before[1]


def test_a_changed_build_recipe_rebuilds_its_component(tmp_path: Path) -> None:
    write_module(tmp_path, "nfd", "sigs.k8s.io/node-feature-discovery v0.19.0 h1:ghi\n")
    plain = build.Component("nfd", {"nfd-master": "p"})
    versioned = build.Component("nfd", {"nfd-master": "p"}, version_ldflags=("-X v.version=v0.19.0",))
    assert build.cache_key(plain, tmp_path) != build.cache_key(versioned, tmp_path)


def test_each_binary_lives_under_its_own_component_key() -> None:
    nfd = next(c for c in build.COMPONENTS if c.module == "nfd")
    assert build.binary_path("nfd-master").parent.parent == build.component_dir(nfd)
    assert build.binary_path("kube-scheduler").parent == build.binary_path("kube-apiserver").parent
    assert build.binary_path("etcd").parent != build.binary_path("kube-apiserver").parent


def test_every_component_binary_is_expected() -> None:
    assert set(build.BINARIES) == {
        "etcd",
        "kwok",
        "kueue",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "kubectl",
        "nfd-master",
        "helm",
    }


@pytest.mark.parametrize(
    ("log", "module"),
    [
        pytest.param(
            "go: github.com/ray-project/kuberay/ray-operator@v1.6.0: reading "
            "https://proxy.golang.org/...: 404 Not Found",
            "github.com/ray-project/kuberay/ray-operator@v1.6.0",
            id="proxy-404",
        ),
        pytest.param(
            "go: module github.com/foo/bar@v1.2.3: reading https://proxy/...: 410 Gone",
            "github.com/foo/bar@v1.2.3",
            id="module-reading",
        ),
        pytest.param(
            "main.go:3:2: no required module provides package example.com/x; to add it:",
            "example.com/x",
            id="no-required-module",
        ),
        pytest.param(
            "cmd/x.go:5:2: missing go.sum entry for module providing package golang.org/x/y (imported by z)",
            "golang.org/x/y",
            id="missing-go-sum",
        ),
        pytest.param("all good", None, id="nothing-missing"),
    ],
)
def test_missing_module_is_read_from_go_output(log: str, module: str | None) -> None:
    assert build.missing_module(log) == module
