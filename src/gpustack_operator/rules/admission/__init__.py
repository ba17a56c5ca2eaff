"""The per-card admission decision: what a Workload asks of cards, where its Pods fit, what is promised.

Pure: the admission-check controller reads the cluster and hands these rules plain JSON.
"""
