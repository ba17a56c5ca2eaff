"""The gpustack-settings Secret as controllers read it: from the shared cache, on every reconcile.

Several settings (manual node management, CPU-aware grouping, derived InstanceTypes, drain on empty
pools) must take effect without a restart, so reconcilers read them per reconcile rather than at start-up.
The Secret is cached by one shared informer (`SETTINGS_WATCH`, selected by name in the system namespace);
a missing Secret or key means the setting's default, and a value that does not parse means the default
too, so a typo never stops a controller. A bad value is reported once (until it is fixed or changes): a
log line naming the Secret, the key and what was wrong, and a Warning Event `InvalidSetting` on the Secret.
One view serves every controller (controllers.dependencies.Dependencies), so each bad value is reported once.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from gpustack_operator.api.keys import SETTINGS_SECRET
from gpustack_operator.controllerkit.cache import Cache
from gpustack_operator.controllerkit.problems import ProblemReporter
from gpustack_operator.controllerkit.watches import KeyFunc, Watch, reads
from gpustack_operator.kube.resources import SECRETS
from gpustack_operator.settings.secret import decode_values
from gpustack_operator.settings.setting import Setting, SettingValueError

INVALID_SETTING = "InvalidSetting"
"""Reason of the Warning Event on the Secret."""


def settings_watch(namespace: str) -> Watch:
    """The read-only watch of the settings Secret (every controller that reads settings declares it)."""
    return reads(SECRETS, namespace=namespace, field_selector=f"metadata.name={SETTINGS_SECRET}")


class SettingsView:
    def __init__(self, cache: Cache, namespace: str, problems: ProblemReporter | None = None) -> None:
        self.cache = cache
        self.namespace = namespace
        self.watch = settings_watch(namespace)
        self._problems = problems or ProblemReporter(None)

    def changes(self, keys: KeyFunc) -> Watch:
        """The same Secret, as a watch that enqueues `keys(secret)`: a new value applies at once."""
        return dataclasses.replace(self.watch, keys=keys)

    def text(self, setting: Setting) -> str:
        return setting.value_in(self._values(setting)[1])

    def flag(self, setting: Setting) -> bool:
        secret, values = self._values(setting)
        try:
            value = setting.bool_in(values)
        except SettingValueError as err:
            self._warn(secret, setting, err.reason)
            return setting.bool_in({})
        if secret is not None:
            self._problems.report(SECRETS, secret, INVALID_SETTING, None, topic=setting.name)
        return value

    def _values(self, setting: Setting) -> tuple[dict[str, Any] | None, dict[str, str]]:
        """(the cached Secret, its decoded values: empty when absent or undecodable, so every setting
        reads its default; read through Setting.value_in/bool_in like every other reader)."""
        secret = self.cache.get(self.watch, f"{self.namespace}/{SETTINGS_SECRET}")
        if secret is None:
            return None, {}
        try:
            return secret, decode_values(secret)
        except ValueError as err:
            self._warn(secret, setting, f"the Secret's data does not decode: {err}")
            return secret, {}

    def _warn(self, secret: dict[str, Any] | None, setting: Setting, reason: str) -> None:
        if secret is not None:
            problem = f"setting {setting.name} is unusable ({reason}); using its default {setting.default!r}"
            self._problems.report(SECRETS, secret, INVALID_SETTING, problem, topic=setting.name)
