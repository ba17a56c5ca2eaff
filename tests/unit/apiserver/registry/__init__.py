"""Tests of gpustack_operator.apiserver.registry: one module per served resource."""
