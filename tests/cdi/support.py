"""Shared by the CDI tests: lint spec files as the CDI cache reads them, fake GPU nodes, the reference binary."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any, Optional, Union

from nvidia_oci_hook.findings import Finding
from nvidia_oci_hook.host import DEFAULT_DRIVER_ROOTS, HostView
from nvidia_oci_hook.kinds.cdi.directories import read_spec_dirs
from nvidia_oci_hook.kinds.cdi.releases import Judge
from nvidia_oci_hook.lint import LintOptions, ResultSet, active_rules, lint_collection, lint_paths, load_file
from nvidia_oci_hook.rules.base import Context
from tests.cdi.corpus import BINARIES, CDI_HOOK, DRIVER_VERSION, LIB, LIBRARIES, dump
from tests.helpers import FakeHost

REPO = Path(__file__).resolve().parents[2]
# The CDI library releases tests/cdi/setup.sh builds the reference against (what Debian packages), and each
# build's binary.
REFERENCES = {
    "1.0.1": REPO / ".tools" / "cdi-reference" / "bin" / "cdi-reference",
    "0.5.2": REPO / ".tools" / "cdi-reference" / "bin" / "cdi-reference-0.5.2",
}

Spec = Union[bytes, str, dict[str, Any]]


def spec_bytes(spec: Spec, yaml_format: bool = False) -> bytes:
    if isinstance(spec, bytes):
        return spec
    if isinstance(spec, str):
        return spec.encode("utf-8")
    return dump(spec, yaml_format)


def lint_dirs(
    directories: list[Path],
    host_root: Optional[Path] = None,
    driver_roots: tuple[str, ...] = DEFAULT_DRIVER_ROOTS,
    schema_only: bool = False,
    judges: tuple[Judge, ...] = (),
) -> list[Finding]:
    """Lint spec directories together, lowest priority first, as `lint --node` reads an engine's cdi_spec_dirs;
    judges: who judges the specs (default: the newest library)."""
    options = LintOptions(
        kind="cdi",
        offline=host_root is None,
        host_root=str(host_root) if host_root is not None else "/",
        driver_roots=driver_roots,
        schema_only=schema_only,
        cdi_judges=judges,
    )
    host = None if host_root is None else HostView(str(host_root))
    collection = read_spec_dirs([str(d) for d in directories], lambda path, kind: load_file(path, kind, options))
    results = ResultSet()
    lint_collection(
        collection,
        active_rules(options),
        lambda: Context(host=host, driver_roots=driver_roots, cdi_judges=judges),
        results,
    )
    return [finding for result in results.sorted() for finding in result.findings]


def lint_cli_paths(paths: list[Path], schema_only: bool = False) -> list[Finding]:
    """`lint --kind cdi --offline PATH...`: each directory is its own collection, each file its own document."""
    options = LintOptions(kind="cdi", offline=True, schema_only=schema_only)
    return [finding for result in lint_paths([str(p) for p in paths], options).files for finding in result.findings]


def lint_spec(
    tmp_path: Path,
    spec: Spec,
    name: str = "spec.json",
    host_root: Optional[Path] = None,
    driver_roots: tuple[str, ...] = DEFAULT_DRIVER_ROOTS,
    schema_only: bool = False,
    judges: tuple[Judge, ...] = (),
) -> list[Finding]:
    """Lint one spec, alone in a spec directory."""
    directory = tmp_path / "cdi"
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir()
    (directory / name).write_bytes(spec_bytes(spec, name.endswith(".yaml")))
    return lint_dirs([directory], host_root, driver_roots, schema_only, judges)


# ---------------------------------------------------------------------------------------------------------------
# Fake nodes (mknod: root)

GPU_NODES = ("/dev/nvidia0", "/dev/nvidia1")
DRI_NODES = (("/dev/dri/card1", 1), ("/dev/dri/card2", 2), ("/dev/dri/renderD128", 128), ("/dev/dri/renderD129", 129))
CAPS = (21, 22, 30, 31)


def _gpu_node(host: FakeHost, root: str) -> None:
    prefix = "" if root == "/" else root.rstrip("/")
    for index, path in enumerate(GPU_NODES):
        host.device(prefix + path, "c", 195, index)
    host.device(prefix + "/dev/nvidiactl", "c", 195, 255).device(prefix + "/dev/nvidia-modeset", "c", 195, 254)
    host.device(prefix + "/dev/nvidia-uvm", "c", 511, 0).device(prefix + "/dev/nvidia-uvm-tools", "c", 511, 1)
    for path, minor in DRI_NODES:
        host.device(prefix + path, "c", 226, minor)
    for cap in CAPS:
        host.device(f"{prefix}/dev/nvidia-caps/nvidia-cap{cap}", "c", 508, cap)
    for library in LIBRARIES:
        host.file(f"{prefix}{LIB}/{library}.{DRIVER_VERSION}")
    for binary in BINARIES:
        host.executable(prefix + binary)


def driver_on_host(host: FakeHost) -> None:
    """A node whose driver is installed on the host; /run/nvidia/driver exists but is empty."""
    _gpu_node(host, "/")
    host.executable(CDI_HOOK).directory("/run/nvidia/driver")


def driver_in_container(host: FakeHost) -> None:
    """A GPU Operator node: the driver container's root at /run/nvidia/driver, the toolkit on the host."""
    _gpu_node(host, "/run/nvidia/driver")
    host.executable(CDI_HOOK)


HOSTS = {"driver-on-host": driver_on_host, "driver-in-container": driver_in_container}


# ---------------------------------------------------------------------------------------------------------------
# The CDI Go library's own verdict


def reference_binary(release: str = "1.0.1") -> Path:
    binary = REFERENCES[release]
    if not binary.is_file():
        raise AssertionError(f"{binary} is missing: run `sh tests/cdi/setup.sh` (as root) to build it")
    return binary


def reference_files(paths: list[Path], release: str = "1.0.1") -> dict[str, dict[str, Any]]:
    """path -> {"ok", "error" or "panic", "devices"} as that release's cdi.ReadSpec decides."""
    verdicts: dict[str, dict[str, Any]] = {}
    for start in range(0, len(paths), 500):
        chunk = [str(path) for path in paths[start : start + 500]]
        output = subprocess.run(
            [str(reference_binary(release)), "files", *chunk], capture_output=True, text=True, check=True, timeout=120
        ).stdout
        for line in output.splitlines():
            verdict = json.loads(line)
            verdicts[verdict["path"]] = verdict
    return verdicts


def reference_dirs(directories: list[Path], release: str = "1.0.1") -> dict[str, Any]:
    """{"devices": {qualified name: spec path}, "errors": {path: [...]}} as a cdi.Cache over the directories."""
    output = subprocess.run(
        [str(reference_binary(release)), "dirs", *map(str, directories)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    result: dict[str, Any] = json.loads(output)
    return result


def reference_version(release: str = "1.0.1") -> str:
    return subprocess.run(
        [str(reference_binary(release)), "version"], capture_output=True, text=True, check=True, timeout=30
    ).stdout.strip()


def library_error_text(verdict: dict[str, Any], path: Path) -> str:
    """The reference's error without the file name the library puts in it."""
    text: str = verdict.get("error") or verdict.get("panic") or ""
    return text.replace(f'failed to parse CDI Spec "{path}": ', "").replace(f'failed to parse CDI Spec "{path}", ', "")
