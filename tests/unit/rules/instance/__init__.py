"""Tests of gpustack_operator.rules.instance."""
