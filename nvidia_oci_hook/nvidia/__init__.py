"""What NVIDIA's container tools read from a container's NVIDIA_* environment, with NVIDIA's semantics."""
