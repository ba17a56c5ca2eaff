"""Tests of the pure naming and arithmetic rules (gpustack_operator.rules)."""
