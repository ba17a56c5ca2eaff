"""The control-plane build: cache keys and failure messages a developer can act on."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpustack_operator.sandbox import build


def test_cache_key_changes_with_any_tool_module_pin(tmp_path: Path) -> None:
    (tmp_path / "k8s").mkdir()
    (tmp_path / "k8s" / "go.sum").write_text("k8s.io/api v0.37.2 h1:abc\n")
    before = build.cache_key(tmp_path)
    assert build.cache_key(tmp_path) == before
    (tmp_path / "k8s" / "go.sum").write_text("k8s.io/api v0.37.3 h1:def\n")
    assert build.cache_key(tmp_path) != before


def test_every_component_binary_is_expected() -> None:
    assert set(build.BINARIES) == {
        "etcd",
        "kwok",
        "kueue",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
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
