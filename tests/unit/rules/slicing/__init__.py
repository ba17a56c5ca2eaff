"""Tests of gpustack_operator.rules.slicing."""
