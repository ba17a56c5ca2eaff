"""Composition root of `gpustack-operator worker`: Prepare, then Start, in the order the spec gives."""
