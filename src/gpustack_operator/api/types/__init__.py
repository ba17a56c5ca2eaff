"""Typed shapes (TypedDicts) of the API objects, keyed by their JSON names.

Code works on plain JSON dicts (what kube-apiserver returns and what ``ApiType.load`` yields); these
TypedDicts let mypy check the field names. Keys that Go always writes (and that ``load`` fills in) are
required; ``omitempty`` keys are ``NotRequired``. ``tests/unit/test_api_types.py`` checks every shape of our
kinds against its schema in ``api/schema`` so the two cannot drift; Kueue's kinds (``kueue``,
``kueue_workload``) have no schema here and are checked against the Kueue guide's examples instead.

These modules deliberately do not use ``from __future__ import annotations``: on Python 3.11 string
annotations hide ``NotRequired`` from ``__required_keys__``.
"""
