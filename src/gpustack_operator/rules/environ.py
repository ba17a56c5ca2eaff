"""Deploy-time switches read from the environment, with the environment injected.

Rules in this package stay pure: a function that honours a ``GPUSTACK_*`` override takes the mapping as an
argument (the process environment by default), so tests and callers decide where the values come from.

The process environment is read live until the process freezes it. The worker and the device manager do,
at start, once they have validated it: a Pod's environment cannot change under a running process, and a
frozen environment is hashable, so what the rules derive from it (the manufacturer table, read for every
resource name of every Pod review and admission decision) is computed once instead of re-reading 27
variables from ``os.environ`` each time (measured: 1 ms of CPU per Pod create through our two webhooks).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Final

from gpustack_operator.settings.admission import parse_bool

Environ = Mapping[str, str]
"""The environment as a read-only mapping."""


class FrozenEnviron(Mapping[str, str]):
    """A copy of an environment that never changes; equal copies hash alike."""

    def __init__(self, environ: Environ) -> None:
        self._values = dict(environ)
        self._hash = hash(frozenset(self._values.items()))

    def __getitem__(self, name: str) -> str:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FrozenEnviron) and self._values == other._values


class ProcessEnviron(Mapping[str, str]):
    """``os.environ``, read live, until `freeze` keeps a copy of it for the rest of the process."""

    def __init__(self) -> None:
        self._frozen: FrozenEnviron | None = None

    def freeze(self) -> None:
        """From now on, read the environment as it is at this moment."""
        self._frozen = FrozenEnviron(os.environ)

    @property
    def frozen(self) -> FrozenEnviron | None:
        return self._frozen

    def _current(self) -> Environ:
        return self._frozen if self._frozen is not None else os.environ

    def __getitem__(self, name: str) -> str:
        return self._current()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._current())

    def __len__(self) -> int:
        return len(self._current())


DEFAULT_ENVIRON: Final = ProcessEnviron()
"""The process environment: live, or as it was when the process froze it."""


def frozen(environ: Environ) -> FrozenEnviron | None:
    """`environ` as a hashable copy when it can no longer change, else None (read it live)."""
    if isinstance(environ, FrozenEnviron):
        return environ
    if isinstance(environ, ProcessEnviron):
        return environ.frozen
    return None


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
