"""Boundaries import-linter cannot express: it forbids only whole external packages, not `aiohttp.web`."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "gpustack_operator"
# The aggregated API server owns aiohttp's server side; the sandbox hosts the kubelet stand-in; the
# worker-gateway serves its own HTTP/NDJSON/websocket API (design.md's layout).
WEB_ALLOWED = ("apiserver", "gateway", "sandbox")


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize("path", sorted(SRC.rglob("*.py")), ids=lambda p: str(p.relative_to(SRC)))
def test_aiohttp_web_only_in_apiserver_and_sandbox(path: Path) -> None:
    package = path.relative_to(SRC).parts[0]
    if package in WEB_ALLOWED:
        return
    offending = sorted(n for n in _imports(path) if n == "aiohttp.web" or n.startswith("aiohttp.web."))
    assert not offending, f"{path.relative_to(SRC)} imports {offending}; aiohttp.web belongs to apiserver"
