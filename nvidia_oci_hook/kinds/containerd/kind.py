"""The document kind: which files are containerd configs, the text as each series' decoder reads it
(toml_syntax.py), and the load problem of bytes that are not UTF-8."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from nvidia_oci_hook.kinds.document import Document, Kind, register_kind

CONTAINERD = "containerd"


_PLUGIN_SHORT_IDS = frozenset({"cri", "cgroups", "linux", "scheduler", "bolt", "task", "opt", "restart", "overlayfs"})


def is_containerd_config(path: str, value: Any) -> bool:
    if not isinstance(value, dict) or "crio" in value:
        return False
    version = value.get("version")
    if isinstance(version, int) and not isinstance(version, bool):
        return True
    plugins = value.get("plugins")
    if isinstance(plugins, dict) and any(k.startswith("io.containerd.") or k in _PLUGIN_SHORT_IDS for k in plugins):
        return True
    # /etc/containerd/config.toml with neither a version nor plugins (certs.d/*/hosts.toml is another format).
    parts = path.replace("\\", "/").split("/")
    return parts[-1] == "config.toml" and "containerd" in parts[:-1]


# The load problem for bytes that are not UTF-8 outside any key or value (a comment): containerd 2.x refuses
# the file there too, and no check of the parsed value can see it.
NOT_UTF8 = "CTD006"


def _holds_replacement(value: Any) -> bool:
    """Whether a key or string anywhere in value holds U+FFFD, the loader's stand-in for a bad byte."""
    pending = [value]
    while pending:
        node = pending.pop()
        if isinstance(node, str):
            if "\ufffd" in node:
                return True
        elif isinstance(node, dict):
            pending.extend(node.keys())
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return False


def refine_containerd(document: Document) -> Document:
    from nvidia_oci_hook.kinds.containerd.toml_syntax import as_containerd_reads

    document = as_containerd_reads(document)
    if document.parsed and not _holds_replacement(document.value):
        document.load_problems = [
            replace(
                problem,
                code=NOT_UTF8,
                message=f"{problem.message}, in a comment: containerd 2.x refuses to load the file "
                "(`toml: invalid UTF-8 character in comment`); 1.6 and 1.7 read it",
            )
            if problem.code == "DOC002"
            else problem
            for problem in document.load_problems
        ]
    return document


register_kind(
    Kind(
        CONTAINERD,
        "containerd config.toml",
        ("toml",),
        is_containerd_config,
        order=30,
        refine=refine_containerd,
        readers=("containerd",),
    )
)
