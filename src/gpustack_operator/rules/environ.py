"""Deploy-time switches read from the environment, with the environment injected.

Rules in this package stay pure: a function that honours a ``GPUSTACK_*`` override takes the mapping as an
argument (``os.environ`` by default), so tests and callers decide where the values come from.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Final

from gpustack_operator.settings.admission import parse_bool

Environ = Mapping[str, str]
"""The environment as a read-only mapping."""

DEFAULT_ENVIRON: Final[Environ] = os.environ
"""The process environment, read live at call time."""


def env_flag(name: str, environ: Environ = DEFAULT_ENVIRON) -> bool:
    """True when ``name`` holds a true value in Go's strconv.ParseBool spelling (settings' own parse; the
    worker and the device manager refuse anything else at start, see settings.environment); false
    otherwise."""
    try:
        return parse_bool(environ.get(name, "false"))
    except ValueError:
        return False


def env_text(name: str, environ: Environ = DEFAULT_ENVIRON) -> str:
    """The stripped value of ``name``, or "" when unset."""
    return environ.get(name, "").strip()
