"""Inventories bundled with the sandbox (`sandbox up --inventory all-vendors`): data only, a package so
that setuptools installs the files as part of gpustack_operator.sandbox (setup.cfg package_data)."""
