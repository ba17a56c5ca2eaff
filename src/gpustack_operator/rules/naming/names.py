"""Fold free text (product names, CPU model strings) into label-safe names.

Hardware reports names such as ``Intel(R) Xeon(R) Platinum 8358 CPU @ 2.60GHz`` or ``NVIDIA H100 80GB HBM3``;
node keys, label values and object names need short ``[a-z0-9]`` words joined by ``-_.``. Both
NormalizeName (keys: lower case, manufacturer word dropped) and SanitizeLabelValue (label values: case
kept) are the same fold with different options, so the fold lives here once.
"""

from __future__ import annotations

import re
from typing import Final

MAX_LABEL_VALUE_LENGTH: Final = 63
"""Kubernetes' limit on a label value and on a label-name segment."""

_SEPARATORS: Final = frozenset("-_.")
_KEPT: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")

_TRADEMARKS: Final = re.compile(r"\((?:R|r|TM|tm)\)")
_LEADING_CRUFT: Final = re.compile(r"^(?:Genuine |[0-9]+(?:st|nd|rd|th) Gen )+")
_TRAILING_CORES: Final = re.compile(r" [0-9]+-cores?$", re.IGNORECASE)


def _fold(text: str, *, lower: bool, prefix: str, max_length: int) -> str:
    """Keep ASCII alphanumerics, turn spaces into `-`, collapse separators, drop the rest.

    A buffer that equals ``prefix`` (case-insensitively) is cleared, so a leading manufacturer word goes.
    """
    if max_length <= 0:
        max_length = len(text)
    buf: list[str] = []
    folded_prefix = prefix.lower()
    for char in text:
        if len(buf) >= max_length:
            break
        kept = "-" if char == " " else char
        if kept in _SEPARATORS:
            if not buf or buf[-1] in _SEPARATORS:
                continue
        elif kept not in _KEPT:
            continue
        buf.append(kept.lower() if lower else kept)
        if prefix and len(buf) == len(prefix) and "".join(buf).lower() == folded_prefix:
            buf.clear()
    if buf and buf[-1] in _SEPARATORS:
        buf.pop()
    return "".join(buf)


def strip_cpu_cruft(name: str) -> str:
    """Drop the frequency, (R)/(TM), `Genuine`/`11th Gen` lead-ins and `CPU`/`Processor`/`N-Core` tails."""
    name = name.split(" @ ", 1)[0]
    name = _TRADEMARKS.sub("", name)
    name = _LEADING_CRUFT.sub("", name).strip()
    name = name.removesuffix(" CPU").removesuffix(" Processor")
    return _TRAILING_CORES.sub("", name)


def normalize_name(name: str, prefix: str, max_length: int, strip_cruft: bool) -> str:
    """NormalizeName: lower-case words of at most ``max_length`` chars (≤0: no limit), ``prefix`` dropped."""
    if strip_cruft:
        name = strip_cpu_cruft(name)
    return _fold(name, lower=True, prefix=prefix, max_length=max_length)


def sanitize_label_value(value: str) -> str:
    """SanitizeLabelValue: a valid Kubernetes label value (≤63 chars) keeping the text's case."""
    return _fold(value, lower=False, prefix="", max_length=MAX_LABEL_VALUE_LENGTH)


def object_name_part(key: str) -> str:
    """A node key as part of an object name: `_` is valid in label keys but not in DNS-1123 names."""
    return key.replace("_", "-")
