"""Every rule, one module per family; importing this package registers them all."""

from nvidia_oci_hook.rules import config, devices, document, gpu, hooks, host, state

__all__ = ["config", "devices", "document", "gpu", "hooks", "host", "state"]
