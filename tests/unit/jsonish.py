"""Hypothesis strategies for arbitrary JSON-ish admission input (the webhook rules' fuzz tests).

The mutating webhooks see an object before kube-apiserver checks it against the CRD schema, so the rules
must survive any JSON value anywhere; these strategies make such values, with a few texts that have
tripped quantity and label code before (a lone surrogate, huge numbers, bare suffixes).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

ODD_TEXT = ["\ud800", "1e1000", "9" * 80, "-0", "+1", "1Gi", "Gi", "16Gi", "nan", "\u0000"]

json_values: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(ODD_TEXT),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=20,
)


def fields(keys: list[str], values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """An object holding some of ``keys`` with ``values``, or (sometimes) any JSON value instead."""
    return st.dictionaries(st.sampled_from(keys), values, max_size=len(keys)) | json_values
