"""Naming: the labels, keys, resource names and Kueue object names derived from a node's hardware; pure."""
