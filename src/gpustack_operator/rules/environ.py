"""Deploy-time switches read from the environment, with the environment injected.

Rules in this package stay pure: a function that honours a ``GPUSTACK_*`` override takes the mapping as an
argument (``os.environ`` by default), so tests and callers decide where the values come from.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Final

Environ = Mapping[str, str]
"""The environment as a read-only mapping."""

DEFAULT_ENVIRON: Final[Environ] = os.environ
"""The process environment, read live at call time."""

_TRUE: Final = frozenset({"1", "t", "T", "TRUE", "true", "True"})


def env_flag(name: str, environ: Environ = DEFAULT_ENVIRON) -> bool:
    """True when ``name`` holds a true value in Go's strconv.ParseBool spelling; anything else is false."""
    return environ.get(name, "") in _TRUE


def env_text(name: str, environ: Environ = DEFAULT_ENVIRON) -> str:
    """The stripped value of ``name``, or "" when unset."""
    return environ.get(name, "").strip()
