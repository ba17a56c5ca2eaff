"""The gpustack-settings Secret: its name and keys, decoding, and the pure backfill computation.

Why this module exists: at every start each worker replica makes sure the Secret holds every setting
(``Initialize`` in the original). Values an admin already wrote must survive, so the backfill adds missing
keys only. Computing the object/patch here, without I/O, lets ``kube/`` just send it and lets tests check
the never-overwrite rule directly.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final

from gpustack_operator.settings.setting import Setting

SECRET_NAME: Final = "gpustack-settings"
TYPE_LABEL: Final = "resource.gpustack.ai/type"
TYPE_VALUE: Final = "settings"
NOTE_PREFIX: Final = "note.gpustack.ai/"


def uid_annotation(name: str) -> str:
    """The annotation holding a setting's stable UID: ``note.gpustack.ai/<name>-uid``."""
    return f"{NOTE_PREFIX}{name}-uid"


def encode(text: str) -> str:
    """A Secret ``data`` value."""
    return base64.b64encode(text.encode()).decode("ascii")


def decode_values(secret: Mapping[str, Any]) -> dict[str, str]:
    """The setting values stored in a Secret object (its base64 ``data``)."""
    data: Mapping[str, str] = secret.get("data") or {}
    return {key: base64.b64decode(value).decode() for key, value in data.items()}


def _new_uid() -> str:
    return str(uuid.uuid4())


def backfill_patch(
    current: Mapping[str, Any], values: Mapping[str, str], *, new_uid: Callable[[], str] = _new_uid
) -> dict[str, Any] | None:
    """A JSON merge patch adding what ``current`` lacks, or None when nothing is missing.

    Only missing data keys and missing ``-uid`` annotations are added, never a changed one; the ownership
    label is set when absent or wrong. The patch carries ``current``'s resourceVersion, so a concurrent writer
    makes it fail (409) instead of being overwritten.
    """
    meta: Mapping[str, Any] = current.get("metadata") or {}
    present_data: Mapping[str, str] = current.get("data") or {}
    present_notes: Mapping[str, str] = meta.get("annotations") or {}
    data = {name: encode(value) for name, value in values.items() if name not in present_data}
    notes = {uid_annotation(n): new_uid() for n in values if uid_annotation(n) not in present_notes}
    patch_meta: dict[str, Any] = {}
    if (meta.get("labels") or {}).get(TYPE_LABEL) != TYPE_VALUE:
        patch_meta["labels"] = {TYPE_LABEL: TYPE_VALUE}
    if notes:
        patch_meta["annotations"] = notes
    if not data and not patch_meta:
        return None
    if meta.get("resourceVersion"):
        patch_meta["resourceVersion"] = meta["resourceVersion"]
    patch: dict[str, Any] = {"metadata": patch_meta}
    if data:
        patch["data"] = data
    return patch


def new_secret(
    values: Mapping[str, str], *, namespace: str, new_uid: Callable[[], str] = _new_uid
) -> dict[str, Any]:
    """The Secret to create when none exists: every value, its UID notes and the ownership label."""
    patch = backfill_patch({}, values, new_uid=new_uid)
    assert patch is not None  # an empty Secret lacks at least the label
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": SECRET_NAME, "namespace": namespace, **patch["metadata"]},
        "data": patch.get("data", {}),
    }


def setting_text(secret: Mapping[str, Any] | None, setting: Setting) -> str:
    """The value of `setting` in the settings Secret object as read from the API (None: there is none);
    its default when the Secret or the key is missing or the data does not decode. The one tolerant read
    of a setting: callers that must not fail on a malformed Secret (a webhook, a list) use it, and the
    controllers report the malformed value separately."""
    if secret is None:
        return setting.default
    try:
        return setting.value_in(decode_values(secret))
    except ValueError:
        return setting.default


def setting_flag(secret: Mapping[str, Any] | None, setting: Setting) -> bool:
    """A boolean setting read as `setting_text` does; its default when the value is not a boolean."""
    try:
        return setting.bool_in({setting.name: setting_text(secret, setting)})
    except ValueError:
        return setting.bool_in({})
