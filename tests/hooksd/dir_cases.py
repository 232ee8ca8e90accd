"""Hooks directories read together: each case a small tree, the codes lint reports on each file, what podman does.

Files are written into a temporary tree by `build` (git keeps neither empty directories nor dangling links nor
FIFOs). "@MARKER@" in a file becomes the path of a marker file: the hooks append a word to it, so the podman
test sees which files the engine really loaded. Directories are listed lowest priority first, as
read_hooks_dirs and containers.conf's hooks_dir take them.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

MARKER = "@MARKER@"


def hook(word: Optional[str] = None, *, path: str = "/bin/sh", **fields: Any) -> str:
    """A 1.0.0 hooks file; with a word, it appends the word to the marker when it runs."""
    spec: dict[str, Any] = {"path": path}
    if word is not None:
        spec["args"] = ["sh", "-c", f"echo {word} >> {MARKER}"]
    value: dict[str, Any] = {"version": "1.0.0", "hook": spec, "when": {"always": True}, "stages": ["createRuntime"]}
    value.update(fields)
    return json.dumps(value, indent=2) + "\n"


@dataclass(frozen=True)
class Special:
    kind: str  # "dir", "link" or "fifo"
    target: str = ""


Content = Union[str, Special]


@dataclass
class DirCase:
    id: str
    dirs: list[str]
    files: dict[str, Content]
    # Codes a full lint reports, by file; files not named must have none.
    expected: dict[str, list[str]]
    # podman: None where it cannot be asked (a FIFO would hang it); else whether it refuses and the sorted
    # words the hooks wrote.
    podman_refuses: Optional[bool] = False
    words: list[str] = field(default_factory=list)
    crio_reads: bool = False


CASES = [
    DirCase(
        "later-directory-masks",
        ["usr", "etc"],
        {"usr/10-gpu.json": hook("usr"), "etc/10-gpu.json": hook("etc")},
        {"usr/10-gpu.json": ["HKD203"]},
        words=["etc"],
    ),
    DirCase(
        "masking-file-without-program",
        ["usr", "etc"],
        {"usr/10-gpu.json": hook("usr"), "etc/10-gpu.json": hook(path="/nonexistent/hook")},
        {"etc/10-gpu.json": ["HKD101", "HKD203"]},
        words=["usr"],
    ),
    DirCase(
        "names-differing-in-case-both-run",
        ["usr", "etc"],
        {"usr/Gpu.json": hook("same"), "etc/gpu.json": hook("same")},
        {"etc/gpu.json": ["HKD207"]},
        words=["same", "same"],
    ),
    DirCase(
        "same-program-at-prestart-and-createRuntime",
        ["usr"],
        {"usr/10-a.json": hook("twice", stages=["prestart"]), "usr/20-b.json": hook("twice")},
        {"usr/10-a.json": ["HKD108"], "usr/20-b.json": ["HKD207"]},
        words=["twice", "twice"],
    ),
    DirCase(
        "error-hidden-by-missing-program",
        ["usr"],
        {
            "usr/10-stale.json": hook(path="/nonexistent/hook"),
            "usr/20-broken.json": hook("broken", version="2.0.0"),
            "usr/30-good.json": hook("good"),
        },
        {"usr/10-stale.json": ["HKD101"], "usr/20-broken.json": ["HKD001", "HKD206"]},
        words=["good"],
    ),
    DirCase(
        "error-before-missing-program",
        ["usr"],
        {"usr/10-broken.json": hook("broken", version="2.0.0"), "usr/20-stale.json": hook(path="/nonexistent/hook")},
        {"usr/10-broken.json": ["HKD001"], "usr/20-stale.json": ["HKD101"]},
        podman_refuses=True,
    ),
    DirCase(
        "error-in-masked-file-still-counts",
        ["usr", "etc"],
        {"usr/10-gpu.json": hook("usr", stages=["pre-start"]), "etc/10-gpu.json": hook("etc")},
        {"usr/10-gpu.json": ["HKD006", "HKD203"]},
        podman_refuses=True,
    ),
    DirCase(
        "only-json-names-are-read",
        ["usr"],
        {
            "usr/nvidia.json.bak": hook("bak", version="2.0.0"),
            "usr/oci-nvidia-hook": hook("noext"),
            "usr/README": "Hooks for this node.\n",
            "usr/sub": Special("dir"),
            "usr/sub/nested.json": hook("nested"),
            "usr/gone.json": Special("link", "/nonexistent/gone.json"),
            "usr/ok.json": hook("ok"),
        },
        {
            "usr/nvidia.json.bak": ["HKD201"],
            "usr/oci-nvidia-hook": ["HKD201"],
            "usr/README": ["HKD202"],
            "usr/sub": ["HKD202"],
            "usr/gone.json": ["HKD201"],
        },
        words=["ok"],
    ),
    DirCase(
        "directory-named-json",
        ["usr"],
        {"usr/nvidia.json": Special("dir"), "usr/ok.json": hook("ok")},
        {"usr/nvidia.json": ["HKD205"]},
        podman_refuses=True,
    ),
    DirCase(
        "hooks-dir-not-a-directory",
        ["usr"],
        {"usr": "not a directory\n"},
        {"usr": ["HKD205"]},
        podman_refuses=True,
    ),
    DirCase(
        "fifo-named-json",
        ["usr"],
        {"usr/nvidia.json": Special("fifo")},
        {"usr/nvidia.json": ["HKD205"]},
        podman_refuses=None,
    ),
    DirCase(
        "precreate-in-podman-directory",
        ["usr"],
        {"usr/10-filter.json": hook(path="/bin/cat", stages=["precreate"]), "usr/20-ok.json": hook("ok")},
        {"usr/10-filter.json": ["HKD109"]},
        words=["ok"],
    ),
    DirCase(
        "precreate-in-crio-directory",
        ["usr"],
        {"usr/10-filter.json": hook(path="/bin/cat", stages=["precreate"])},
        {"usr/10-filter.json": ["HKD109", "HKD204"]},
        podman_refuses=None,
        crio_reads=True,
    ),
    DirCase(
        "precreate-without-program-in-crio-directory",
        ["usr"],
        {"usr/10-filter.json": hook(path="/nonexistent/filter", stages=["precreate"])},
        {"usr/10-filter.json": ["HKD101", "HKD109"]},
        podman_refuses=None,
        crio_reads=True,
    ),
    DirCase(
        "missing-directory-is-skipped",
        ["usr", "etc"],
        {"etc/ok.json": hook("ok")},
        {},
        words=["ok"],
    ),
]


def build(case: DirCase, root: Path, marker: Path) -> list[Path]:
    """Write the case's tree under root; returns its directories, lowest priority first."""
    for relative, content in case.files.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Special):
            if content.kind == "dir":
                target.mkdir(exist_ok=True)
            elif content.kind == "link":
                target.symlink_to(content.target)
            else:
                os.mkfifo(target)
        else:
            target.write_text(content.replace(MARKER, str(marker)))
    return [root / directory for directory in case.dirs]
