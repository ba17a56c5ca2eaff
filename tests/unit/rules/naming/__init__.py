"""Tests of gpustack_operator.rules.naming."""
