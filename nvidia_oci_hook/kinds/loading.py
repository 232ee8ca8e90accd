"""Reading a document from where it is: the loader lint, `lint --node`'s discovery and the node's evidence
(engines' configurations, CDI resolution, pods) share.

It sits with the kinds, below lint and node, so that the node's evidence reads documents as lint does without
importing lint, which builds on that evidence.
"""

from __future__ import annotations

from typing import Any, Optional

from nvidia_oci_hook import io
from nvidia_oci_hook.formats.parsing import LoadProblem
from nvidia_oci_hook.host import LOCAL, HostView
from nvidia_oci_hook.kinds.document import AUTO, OCI_CONFIG, Document, parse_document


def load_document(path: str, kind: str, files: HostView = LOCAL, max_bytes: int = io.DEFAULT_MAX_BYTES) -> Document:
    """Read and parse one file from where it is (files: this machine's as named, or the node's under its host
    root); a `FileLoader` as it stands. Raises io.ReadError when it cannot be read at all."""
    from nvidia_oci_hook.kinds.kubernetes import KUBERNETES, MANIFEST_MAX_BYTES, looks_like_manifests

    display = "<stdin>" if path == "-" else path
    # A cluster's manifests (`kubectl get pods -A -o yaml`) outgrow any one container's spec: a stream that may be
    # one is read up to their own limit, and held to the others' once it is known not to be.
    limit = max_bytes
    if kind in (AUTO, KUBERNETES) and max_bytes == io.DEFAULT_MAX_BYTES:
        limit = max(limit, MANIFEST_MAX_BYTES)
    try:
        raw = files.read_bytes(path, limit)
    except io.TooLarge as exc:
        too_large = OCI_CONFIG if kind == AUTO else kind
        return Document(display, too_large, "", load_problems=[LoadProblem("DOC004", str(exc))])
    if len(raw) > max_bytes and kind != KUBERNETES and not looks_like_manifests(display, raw):
        too_large = OCI_CONFIG if kind == AUTO else kind
        message = str(io.TooLarge(len(raw), max_bytes))
        return Document(display, too_large, "", load_problems=[LoadProblem("DOC004", message)])
    return parse_document(display, raw, kind)


def read_toml(host: HostView, path: str) -> Optional[dict[str, Any]]:
    """A TOML file under the host root, parsed; None where it is absent (an unparsable one is empty)."""
    from nvidia_oci_hook.formats.tomltext import parse_toml

    text = host.read_text(path)
    if text is None:
        return None
    value = parse_toml(text.encode()).value
    return value if isinstance(value, dict) else {}
