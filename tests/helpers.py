"""Shared test helpers: lint a value in memory, build a fake host root."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional, Union

from nvidia_oci_hook.config import Settings
from nvidia_oci_hook.findings import Finding
from nvidia_oci_hook.host import DEFAULT_DRIVER_ROOTS, HostView
from nvidia_oci_hook.kinds.document import parse_document
from nvidia_oci_hook.lint import LintOptions, active_rules, lint_document
from nvidia_oci_hook.rules.base import Context


def lint_value(
    value: Union[bytes, Any],
    *,
    host_root: Optional[Path] = None,
    driver_roots: tuple[str, ...] = DEFAULT_DRIVER_ROOTS,
    select: tuple[str, ...] = (),
    schema_only: bool = False,
    settings: Optional[Settings] = None,
) -> list[Finding]:
    raw = value if isinstance(value, bytes) else json.dumps(value, indent=2).encode()
    options = LintOptions(select=select, schema_only=schema_only, offline=host_root is None)
    document = parse_document("config.json", raw)
    host = HostView(str(host_root)) if host_root is not None else None
    context = Context(host=host, driver_roots=driver_roots, settings=settings)
    return lint_document(document, active_rules(options), context)


def control_node(**extra: Any) -> dict[str, Any]:
    """The linux.devices entry of /dev/nvidiactl: a GPU listed without it is unusable (GPU001), and refused, so the
    tests that give a container a GPU for other purposes list it too."""
    return {"path": "/dev/nvidiactl", "type": "c", "major": 195, "minor": 255, **extra}


def codes(findings: list[Finding]) -> list[str]:
    return [finding.code for finding in findings]


class FakeHost:
    """A directory standing in for a node's /: files, executables, device nodes (mknod needs root)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, path: str) -> Path:
        target = self.root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        return target

    def file(self, path: str, mode: int = 0o644) -> FakeHost:
        target = self._path(path)
        target.write_text("")
        target.chmod(mode)
        return self

    def text(self, path: str, content: str) -> FakeHost:
        self._path(path).write_text(content)
        return self

    def executable(self, path: str) -> FakeHost:
        target = self._path(path)
        target.write_text("#!/bin/sh\nexit 0\n")
        target.chmod(0o755)
        return self

    def directory(self, path: str) -> FakeHost:
        self._path(path).mkdir(exist_ok=True)
        return self

    def symlink(self, path: str, target: str) -> FakeHost:
        os.symlink(target, self._path(path))
        return self

    def device(self, path: str, kind: str, major: int, minor: int) -> FakeHost:
        import stat

        mode = (stat.S_IFCHR if kind == "c" else stat.S_IFBLK) | 0o666
        os.mknod(self._path(path), mode, os.makedev(major, minor))
        return self
