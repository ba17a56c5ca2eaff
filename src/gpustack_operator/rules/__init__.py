"""The contract's pure rules, one subpackage per job (naming, capacity, admission, instance, slicing).

Nothing here does I/O (an import contract holds every subpackage to it): callers read the cluster and hand
in plain JSON, so each rule is a table test away from its contract vector.
"""
