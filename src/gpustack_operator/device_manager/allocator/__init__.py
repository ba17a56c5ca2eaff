"""Allocate for the node's device plugins: which pod, which cards, what the container is given."""
