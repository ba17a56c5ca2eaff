"""Capacity and quota arithmetic: credits and units, the node's `.sliced.*` capacities, a pool's quota.

Also the three InstanceType views and what Kueue must be configured with to count cards as credits. Pure.
"""
