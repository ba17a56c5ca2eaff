"""Kubernetes' name grammars: object names (DNS-1123 subdomains) and label names and values.

Why this module exists: both the controllers (what kube-apiserver would refuse to store) and the webhooks
(a name in a reviewed object that cannot name any object, so no lookup is made for it) ask the same
question; one definition answers it. Pure.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["is_dns_subdomain", "is_label_name"]

_DNS_SUBDOMAIN: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL_NAME: Final = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")


def is_dns_subdomain(name: str) -> bool:
    """A valid object name (and label-key prefix): lowercase DNS-1123 subdomain, at most 253 characters."""
    return len(name) <= 253 and _DNS_SUBDOMAIN.fullmatch(name) is not None


def is_label_name(name: str) -> bool:
    """A valid label-key name or non-empty label value: at most 63 alphanumerics, `-`, `_`, `.` inside."""
    return len(name) <= 63 and _LABEL_NAME.fullmatch(name) is not None
