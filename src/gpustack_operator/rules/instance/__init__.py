"""Instance -> Pod: the Pod an Instance runs as, its resources, and its status read back from that Pod."""
