"""The kubelet device plugin (API v1beta1): one gRPC server per (manufacturer, mode), kept registered."""
