"""Tests of gpustack_operator.rules.admission."""
