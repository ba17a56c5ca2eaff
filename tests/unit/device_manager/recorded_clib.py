"""What every recorded vendor library (a stand-in whose functions are C callables) answers with.

A recorded function receives ctypes pointers, as the real library would, and writes its answer through
them: a scalar through ``put``, a structure's fields through ``fill``, a C string through ``put_text``.
Each returns the library's success code (0 for every vendor here), so an answer reads ``return fill(...)``.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Collection, Mapping
from types import SimpleNamespace
from typing import Any

from gpustack_operator.device_manager.detector import clib

OK = 0


def put(pointer: Any, value: int) -> int:
    pointer[0] = value
    return OK


def fill(pointer: Any, **values: Any) -> int:
    for name, value in values.items():
        setattr(pointer.contents, name, value)
    return OK


def put_text(buffer: Any, length: int, text: bytes) -> int:
    """``text`` and its NUL into a caller's buffer of ``length`` bytes (truncated to fit, as C does)."""
    ctypes.memmove(buffer, text + b"\0", min(length, len(text) + 1))
    return OK


def library(
    prototypes: Mapping[str, clib.Prototype],
    answers: Mapping[str, Callable[..., int]],
    missing: Collection[str] = (),
) -> Any:
    """A stand-in library exporting ``answers`` (less the ``missing`` names) with their C prototypes."""
    return SimpleNamespace(
        **{
            name: clib.recorded_function(prototypes[name], answer)
            for name, answer in answers.items()
            if name not in missing
        }
    )
