"""nvidia-oci-hook: keeps GPU containers' device and driver paths consistent with the node."""

__version__ = "0.1.0"
