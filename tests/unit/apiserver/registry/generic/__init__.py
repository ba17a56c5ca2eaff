"""Tests of gpustack_operator.apiserver.registry.generic: the store machinery every resource shares."""
