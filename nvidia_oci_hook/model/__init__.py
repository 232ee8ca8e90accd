"""Document kinds and formats; importing the package registers every one of them."""

from nvidia_oci_hook.model import document, tomltext, yamltext

__all__ = ["document", "tomltext", "yamltext"]
