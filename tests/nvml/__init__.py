"""The NVML view of the node, read through the real pynvml against a fake libnvidia-ml.so.1."""
