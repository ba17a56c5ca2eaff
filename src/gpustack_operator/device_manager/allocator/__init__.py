"""Allocate for the node's device plugins: which pod, which cards, what the container is given.

One Allocate, in the order `allocator.Allocator` runs it:

- `identify`: the kubelet's device IDs checked against this node's cards, then the pending pod they are for;
- `holdings`: who holds each card and in which mode (pod annotations plus this process's reservations),
  for the cross-mode check - and the ranking GetPreferredAllocation answers with;
- `demand`: the units a container takes from each card, and a slice's limits;
- `plan`: the decision under the node lock, without I/O: pod, cards, the allocation to record, the response;
- `responses/<vendor>`: what the container is given - env, mounts, `/dev` nodes, host files;
- `annotation`: the durable record on the pod, from which the ledger (Devices.status) is rebuilt;
- `workdirs`: host paths and per-container work directories (a gone pod's is removed in a worker thread).

Around it: `pods` reads pod JSON, `sources` is the informer and the annotation PATCH, and `audit` compares
the records with what the kubelet's PodResources says it committed.
"""
