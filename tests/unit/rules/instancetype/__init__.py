"""Tests of gpustack_operator.rules.instancetype."""
