"""Where `sandbox` finds the Go tool modules: the checkout, `--tools-dir` or its variable, or a clear no."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpustack_operator.cli import main
from gpustack_operator.sandbox import build


@pytest.fixture
def installed_wheel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As from site-packages: no tools/ beside the package, and no variable set."""
    monkeypatch.setattr(build, "CHECKOUT_TOOLS", tmp_path / "no-checkout" / "tools")
    monkeypatch.setenv(build.TOOLS_ENV, "")  # recorded, so a --tools-dir run's setting is undone


def copy_of_tools(target: Path) -> Path:
    for component in build.COMPONENTS:
        (target / component.module).mkdir(parents=True)
        for name in ("go.mod", "go.sum"):
            shutil.copy(build.REPO_ROOT / "tools" / component.module / name, target / component.module)
    return target


@pytest.mark.usefixtures("installed_wheel")
def test_from_a_wheel_build_says_to_use_a_checkout_or_tools_dir(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sandbox", "build"]) == 1
    err = capsys.readouterr().err
    assert "an installed wheel does not ship them" in err
    assert "Clone the repository" in err
    assert "--tools-dir" in err


@pytest.mark.usefixtures("installed_wheel")
def test_tools_dir_without_the_modules_names_what_it_expected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sandbox", "--tools-dir", str(tmp_path), "up"]) == 1
    err = capsys.readouterr().err
    assert "holds no Go tool modules" in err
    assert "k8s/go.mod" in err


def test_tools_dir_from_the_flag_gives_the_checkouts_cache_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from_checkout = build.binary_path("kube-apiserver")
    monkeypatch.setattr(build, "CHECKOUT_TOOLS", tmp_path / "no-checkout")
    monkeypatch.setenv(build.TOOLS_ENV, str(copy_of_tools(tmp_path / "tools")))
    assert build.tools_dir() == tmp_path / "tools"
    assert build.binary_path("kube-apiserver") == from_checkout
