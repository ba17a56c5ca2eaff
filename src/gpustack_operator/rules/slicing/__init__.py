"""The Pod webhook's rules for a container's accelerator resources: slices folded to units, one mode; pure."""
