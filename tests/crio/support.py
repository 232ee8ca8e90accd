"""Lint a cri-o configuration laid out like /etc/crio (crio.conf and crio.conf.d/) and read the findings."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional, Union

from nvidia_oci_hook.findings import Finding
from nvidia_oci_hook.lint import LintOptions, lint_paths


def write_tree(root: Path, files: Mapping[str, Union[str, bytes]]) -> Path:
    """Write {relative path: text or raw bytes} under root; returns root."""
    for relative, text in files.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            target.write_bytes(text)
        else:
            target.write_text(text, encoding="utf-8")
    return root


def lint_dir(
    path: Path,
    *,
    host_root: Optional[Path] = None,
    schema_only: bool = False,
    driver_roots: tuple[str, ...] = ("/", "/run/nvidia/driver"),
    select: tuple[str, ...] = (),
) -> list[Finding]:
    """Every finding of `nvidia-oci-hook lint PATH`: offline unless a host root is given."""
    options = LintOptions(
        host_root=str(host_root) if host_root is not None else "/",
        offline=host_root is None,
        schema_only=schema_only,
        driver_roots=driver_roots,
        select=select,
    )
    run: Any = lint_paths([str(path)], options)
    files = getattr(run, "files", run)
    return [finding for result in files for finding in result.findings]


def located(findings: list[Finding], base: Path) -> set[tuple[str, str, Optional[int]]]:
    """(code, path relative to base, line) for each finding."""
    return {(f.code, os.path.relpath(f.path, base), f.line) for f in findings}
