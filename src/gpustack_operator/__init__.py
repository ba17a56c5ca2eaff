"""gpustack-operator: mixed-vendor GPUs as fair, exact, Kueue-based Kubernetes capacity."""

__version__ = "0.1.0"
