"""Field errors as Kubernetes writes them (apimachinery's `field.Error`), for webhook and API refusals.

Why this module exists: kubectl shows a refusal's message verbatim and tools read its `details.causes`, so
a rule that rejects `spec.os` must say `spec.os: Required value: must be specified` with cause type
`FieldValueRequired`, exactly as a built-in kind would. Rules (webhooks/, the aggregated API) build these
values; apiserver.status turns a list of them into the 422 `Invalid` Status. Pure: no I/O.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

__all__ = ["ErrorType", "FieldError", "aggregate", "forbidden", "invalid", "not_supported", "required"]


class ErrorType(enum.Enum):
    """(cause type, the words that start the message)."""

    REQUIRED = ("FieldValueRequired", "Required value")
    FORBIDDEN = ("FieldValueForbidden", "Forbidden")
    INVALID = ("FieldValueInvalid", "Invalid value")
    NOT_SUPPORTED = ("FieldValueNotSupported", "Unsupported value")
    NOT_FOUND = ("FieldValueNotFound", "Not found")

    @property
    def cause(self) -> str:
        return self.value[0]

    @property
    def words(self) -> str:
        return self.value[1]


_NO_VALUE: Final = object()


def _render(value: object) -> str:
    """A value as `field.Error` prints it: strings quoted, numbers and booleans bare, the rest as JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if value is None:
        return "null"
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


@dataclass(frozen=True)
class FieldError:
    """One refused field: `path` as in `spec.ports[0].port`, why (`detail`), and the value when shown."""

    type: ErrorType
    path: str
    detail: str = ""
    value: object = _NO_VALUE

    def body(self) -> str:
        """The message without the path: `Invalid value: "x": must be positive`."""
        text = self.type.words
        if self.value is not _NO_VALUE:
            text += f": {_render(self.value)}"
        if self.detail:
            text += f": {self.detail}"
        return text

    def __str__(self) -> str:
        return f"{self.path}: {self.body()}" if self.path else self.body()

    def cause(self) -> dict[str, str]:
        """The Status `details.causes[]` entry."""
        return {"reason": self.type.cause, "message": self.body(), "field": self.path}


def required(path: str, detail: str = "") -> FieldError:
    return FieldError(ErrorType.REQUIRED, path, detail)


def forbidden(path: str, detail: str) -> FieldError:
    return FieldError(ErrorType.FORBIDDEN, path, detail)


def invalid(path: str, value: object, detail: str) -> FieldError:
    return FieldError(ErrorType.INVALID, path, detail, value)


def not_supported(path: str, value: object, supported: Sequence[str]) -> FieldError:
    listed = ", ".join(json.dumps(s) for s in supported)
    return FieldError(ErrorType.NOT_SUPPORTED, path, f"supported values: {listed}", value)


def aggregate(errors: Sequence[FieldError]) -> str:
    """Several errors as one text, as apimachinery's aggregate prints them: `[a, b]`, or `a` alone."""
    texts = [str(e) for e in errors]
    return texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
