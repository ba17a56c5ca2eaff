"""Validation errors with Kubernetes-style field paths.

Why this module exists: marshmallow reports errors as a nested dict; webhooks, the aggregated API server
(Status causes) and log lines want a flat list of ``spec.ports[0].port: message`` entries. This is the one
place that flattening happens.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

_SCHEMA_LEVEL = "_schema"


@dataclass(frozen=True, order=True)
class FieldError:
    """One invalid value: ``path`` as in ``spec.groups[0].accelerators[1].id`` ("" for the whole object)."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class InvalidObjectError(ValueError):
    """An object does not match its API schema; ``errors`` lists every offending field."""

    def __init__(self, kind: str, errors: list[FieldError]) -> None:
        self.kind = kind
        self.errors = errors
        super().__init__(f"invalid {kind}: " + "; ".join(str(e) for e in errors))


def _join(prefix: str, key: object) -> str:
    if isinstance(key, int):
        return f"{prefix}[{key}]"
    if key == _SCHEMA_LEVEL:
        return prefix
    return f"{prefix}.{key}" if prefix else str(key)


def _walk(prefix: str, messages: Any) -> Iterator[FieldError]:
    if isinstance(messages, Mapping):
        for key, nested in messages.items():
            yield from _walk(_join(prefix, key), nested)
    elif isinstance(messages, list):
        for entry in messages:
            yield from _walk(prefix, entry)
    else:
        yield FieldError(prefix, str(messages))


def flatten(messages: Any) -> list[FieldError]:
    """marshmallow's ``ValidationError.messages`` as a sorted list of path errors."""
    return sorted(_walk("", messages))
