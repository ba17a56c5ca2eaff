"""The gpustack-settings Secret as controllers read it: from the shared cache, on every reconcile.

Several settings (manual node management, CPU-aware grouping, derived InstanceTypes, drain on empty
pools) must take effect without a restart, so reconcilers read them per reconcile rather than at start-up.
The Secret is cached by one shared informer (`SETTINGS_WATCH`, selected by name in the system namespace);
a missing Secret or key means the setting's default, and a value that does not parse means the default
too, with one warning per distinct bad value naming the key and what was wrong, so a typo never stops
a controller.
"""

from __future__ import annotations

import logging

from gpustack_operator.api.keys import SETTINGS_SECRET
from gpustack_operator.controllers.cache import Cache
from gpustack_operator.controllers.watches import Watch, reads
from gpustack_operator.kube.resources import SECRETS
from gpustack_operator.settings.admission import parse_bool
from gpustack_operator.settings.secret import decode_values
from gpustack_operator.settings.setting import Setting

log = logging.getLogger(__name__)


def settings_watch(namespace: str) -> Watch:
    """The read-only watch of the settings Secret (every controller that reads settings declares it)."""
    return reads(SECRETS, namespace=namespace, field_selector=f"metadata.name={SETTINGS_SECRET}")


class SettingsView:
    def __init__(self, cache: Cache, namespace: str) -> None:
        self.cache = cache
        self.namespace = namespace
        self.watch = settings_watch(namespace)
        self._warned: set[tuple[str, str]] = set()

    def text(self, setting: Setting) -> str:
        secret = self.cache.get(self.watch, f"{self.namespace}/{SETTINGS_SECRET}")
        try:
            values = decode_values(secret) if secret else {}
        except ValueError as err:
            self._warn(setting, "<undecodable>", str(err))
            return setting.default
        return values.get(setting.name, setting.default)

    def flag(self, setting: Setting) -> bool:
        text = self.text(setting)
        try:
            return parse_bool(text)
        except ValueError as err:
            self._warn(setting, text, str(err))
            return parse_bool(setting.default)

    def _warn(self, setting: Setting, value: str, reason: str) -> None:
        if (setting.name, value) in self._warned:
            return
        self._warned.add((setting.name, value))
        log.warning(
            "setting %s in Secret %s/%s is unusable (%s); using its default %r",
            setting.name,
            self.namespace,
            SETTINGS_SECRET,
            reason,
            setting.default,
        )
