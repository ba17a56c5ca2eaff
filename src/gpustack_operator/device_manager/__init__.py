"""Per-node agent: accelerator detection, NodeFeature/Devices reporting, and the kubelet device plugin."""
