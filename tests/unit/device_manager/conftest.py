"""Fixtures shared by the device plugin and allocator tests."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def sock_dir() -> Iterator[Path]:
    """A short directory for unix sockets (their paths are limited to 107 bytes; tmp_path is long)."""
    path = Path(tempfile.mkdtemp(prefix="dp-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
