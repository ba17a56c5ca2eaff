"""Kubernetes' name grammars: object names (DNS-1123 subdomains) and label names and values.

Why this module exists: both the controllers (what kube-apiserver would refuse to store) and the webhooks
(a name in a reviewed object that cannot name any object, so no lookup is made for it) ask the same
question; one definition answers it. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

__all__ = ["is_dns_subdomain", "is_label_name", "label_problem"]

_DNS_SUBDOMAIN: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL_NAME: Final = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")


def is_dns_subdomain(name: str) -> bool:
    """A valid object name (and label-key prefix): lowercase DNS-1123 subdomain, at most 253 characters."""
    return len(name) <= 253 and _DNS_SUBDOMAIN.fullmatch(name) is not None


def is_label_name(name: str) -> bool:
    """A valid label-key name or non-empty label value: at most 63 alphanumerics, `-`, `_`, `.` inside."""
    return len(name) <= 63 and _LABEL_NAME.fullmatch(name) is not None


def label_problem(labels: Mapping[str, str]) -> str | None:
    """Why kube-apiserver would refuse one of these labels (the first found), or None when all are valid."""
    for key, value in labels.items():
        prefix, _, name = key.rpartition("/")
        bad_prefix = bool(prefix) and not is_dns_subdomain(prefix)
        if bad_prefix or not is_label_name(name):
            return f"label key {key!r} is not a valid label key"
        if value and not is_label_name(value):
            return f"label {key}={value!r} is not a valid label value"
    return None
