"""Operator settings (the gpustack-settings Secret keys) and deploy-time environment, typed and defaulted.

- ``catalog``: the editable settings (names, defaults, checks) and their first-install values from
  ``GPUSTACK_*``;
- ``setting``: the ``Setting`` value type and its errors;
- ``admission``: value checks (Go ``strconv.ParseBool`` booleans, registries, image references);
- ``secret``: the Secret's keys and the never-overwriting backfill patch;
- ``environment``: the deploy-time environment as a frozen dataclass.

Pure: no I/O with the cluster (``kube/`` sends what ``secret`` computes).
"""
