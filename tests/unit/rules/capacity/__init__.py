"""Tests of gpustack_operator.rules.capacity."""
