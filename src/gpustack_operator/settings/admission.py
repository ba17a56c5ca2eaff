"""Value checks for settings and environment variables: booleans, blanks, registries, image references.

Why this module exists: every setting write (the Setting API, the Secret backfill from ``GPUSTACK_*``) and
every boolean environment variable passes through these checks, so a typo such as ``yes`` or ``ture`` is an
error that names the bad text, never a silent ``false``. Booleans follow Go's ``strconv.ParseBool`` exactly,
because values written by the original operator (or by admins used to it) must read the same.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

Check = Callable[[str], None]
"""A value check: returns when ``text`` is acceptable, raises ``ValueError(reason)`` otherwise."""

TRUE_TEXTS: Final = ("1", "t", "T", "TRUE", "true", "True")
FALSE_TEXTS: Final = ("0", "f", "F", "FALSE", "false", "False")
_BLANKS: Final = ("", "{}", "[]")

# The distribution/reference grammar (what `docker pull` and go-containerregistry accept).
_LABEL = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)"
_REGISTRY_RE: Final = re.compile(rf"(?:{_LABEL}(?:\.{_LABEL})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?")
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_PATH_RE: Final = re.compile(rf"{_COMPONENT}(?:/{_COMPONENT})*")
_TAG_RE: Final = re.compile(r"[\w][\w.-]{0,127}")
_DIGEST_RE: Final = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}")
_MAX_NAME: Final = 255


def parse_bool(text: str) -> bool:
    """Go's ``strconv.ParseBool``: ``1,t,T,TRUE,true,True`` / ``0,f,F,FALSE,false,False``; else ValueError."""
    if text in TRUE_TEXTS:
        return True
    if text in FALSE_TEXTS:
        return False
    raise ValueError(f"{text!r} is not a boolean; use one of {', '.join(TRUE_TEXTS + FALSE_TEXTS)}")


def is_blank(text: str) -> bool:
    """The original's AllowBlank test: empty, ``{}`` or ``[]`` once surrounding space is stripped."""
    return text.strip() in _BLANKS


def check_bool(text: str) -> None:
    """A ``Check`` for boolean settings."""
    parse_bool(text)


def check_container_registry(text: str) -> None:
    """A registry host with an optional port: ``docker.io``, ``registry.local:5000``, ``[::1]:5000``."""
    if not _REGISTRY_RE.fullmatch(text):
        raise ValueError(f"{text!r} is not a container registry: want host[:port], e.g. registry.local:5000")


def _split_reference(text: str) -> tuple[str, str, str | None, str | None]:
    """``[registry/]path[:tag][@digest]`` -> (registry, path, tag, digest); registry "" when absent."""
    name, at, digest = text.partition("@")
    tag = None
    if name.rfind(":") > name.rfind("/"):
        name, _, tag = name.rpartition(":")
    first, slash, rest = name.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        registry, name = first, rest  # docker's rule for telling a registry from a path component
    else:
        registry = ""
    return registry, name, tag, digest if at else None


def check_image_reference(text: str) -> None:
    """An image reference ``[registry/]path[:tag][@digest]``, lowercase path: ``gpustack/sshd:v1``."""
    registry, path, tag, digest = _split_reference(text)
    problems = [
        "bad registry" if registry and not _REGISTRY_RE.fullmatch(registry) else "",
        "" if _PATH_RE.fullmatch(path) else "bad repository path (lowercase letters, digits, . _ - and /)",
        "bad tag" if tag is not None and not _TAG_RE.fullmatch(tag) else "",
        "bad digest" if digest is not None and not _DIGEST_RE.fullmatch(digest) else "",
        f"name longer than {_MAX_NAME}" if len(registry) + len(path) + 1 > _MAX_NAME else "",
    ]
    reasons = "; ".join(p for p in problems if p)
    if reasons:
        raise ValueError(f"{text!r} is not a container image reference: {reasons}")
