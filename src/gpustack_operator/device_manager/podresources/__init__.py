"""The kubelet's PodResources API: which pods the kubelet runs and which device IDs it gave each container."""
