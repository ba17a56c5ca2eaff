"""``Setting``: one operator setting (a key of the gpustack-settings Secret) with its default and checks.

Why this module exists: a setting's name, description, built-in default, ``GPUSTACK_*`` override, admission
checks and props (editable/private/sensitive) travel together to the Secret backfill, the Setting API and
every reader; declaring them as one frozen value keeps those users consistent.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from gpustack_operator.settings.admission import Check, check_bool, is_blank, parse_bool


class Prop(enum.Flag):
    """Who may see and change a setting (the original's ``PropEditable|PropPrivate|PropSensitive``)."""

    NONE = 0
    EDITABLE = enum.auto()
    """Users may write it through the Setting API."""
    PRIVATE = enum.auto()
    """Not listed to users; the operator configures and reads it internally."""
    SENSITIVE = enum.auto()
    """Its value is hidden (shown as ``(sensitive)``) in the API and in logs."""


class SettingValueError(ValueError):
    """A value a setting does not admit; the message names the setting, where the value came from and it."""

    def __init__(self, name: str, reason: str, *, source: str = "") -> None:
        self.name = name
        self.reason = reason
        self.source = source
        origin = f" (from {source})" if source else ""
        super().__init__(f"setting {name}{origin}: {reason}")


@dataclass(frozen=True)
class Setting:
    """One setting. ``allow_blank`` admits ``""``/``{}``/``[]`` before ``checks`` run (AllowBlank)."""

    name: str
    description: str
    default: str = ""
    checks: tuple[Check, ...] = ()
    allow_blank: bool = False
    props: Prop = Prop.EDITABLE

    @property
    def env_name(self) -> str:
        """``GPUSTACK_<UPPER_SNAKE(name)>``: the variable that replaces the default at first install."""
        return "GPUSTACK_" + self.name.upper().replace("-", "_")

    @property
    def editable(self) -> bool:
        return Prop.EDITABLE in self.props

    @property
    def private(self) -> bool:
        return Prop.PRIVATE in self.props

    @property
    def sensitive(self) -> bool:
        return Prop.SENSITIVE in self.props

    @property
    def is_bool(self) -> bool:
        return check_bool in self.checks

    def admit(self, text: str, *, source: str = "") -> None:
        """Raise ``SettingValueError`` unless ``text`` is an acceptable value."""
        if self.allow_blank and is_blank(text):
            return
        for check in self.checks:
            try:
                check(text)
            except ValueError as e:
                raise SettingValueError(self.name, str(e), source=source) from e

    def initial_value(self, environ: Mapping[str, str]) -> str:
        """The first-install value: a non-empty ``env_name`` variable (admitted), else the default."""
        text = environ.get(self.env_name, "")
        if not text:
            return self.default
        self.admit(text, source=self.env_name)
        return text

    def value_in(self, values: Mapping[str, str]) -> str:
        """This setting's value in decoded Secret data; the default when the key is missing."""
        return values.get(self.name, self.default)

    def bool_in(self, values: Mapping[str, str]) -> bool:
        """A boolean setting's value in decoded Secret data; bad text raises ``SettingValueError``."""
        text = self.value_in(values)
        try:
            return parse_bool(text)
        except ValueError as e:
            raise SettingValueError(self.name, str(e)) from e
