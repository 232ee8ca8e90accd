"""Which container engines a node has, and their releases: what decides the CDI library each one reads specs with.

On the node itself (host root `/`) each engine's binary says (`containerd --version`, `crio --version`,
`podman --version`); under another host root, or where a binary does not answer, the package databases do:
dpkg's status file, and rpm's SQLite database (EL9, Fedora). EL8's Berkeley DB database is not read: there
an engine's release is "not found", and its specs are judged with the newest library.
"""

from __future__ import annotations

import os
import re
import sqlite3
import struct
import subprocess
from dataclasses import dataclass
from typing import Optional

from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.kinds.cdi.releases import ENGINE_NAMES

DPKG_STATUS = "/var/lib/dpkg/status"
RPM_DATABASES = ("/var/lib/rpm/rpmdb.sqlite", "/usr/lib/sysimage/rpm/rpmdb.sqlite")
# Package names per engine, in Debian and Ubuntu, Docker's repositories, and the RPM distributions.
PACKAGES = {
    "containerd": ("containerd", "containerd.io"),
    "crio": ("cri-o",),
    "podman": ("podman",),
}
BINARIES = {"containerd": "containerd", "crio": "crio", "podman": "podman"}
BINARY_DIRS = ("/usr/local/bin", "/usr/local/sbin", "/usr/bin", "/usr/sbin", "/bin", "/sbin")
_RELEASE = re.compile(r"v?(\d+\.\d+\.\d+(?:-[0-9A-Za-z.]+)?)")
_VERSION_TIMEOUT = 5.0


@dataclass(frozen=True)
class EngineRelease:
    """An engine found on the node: its key (`crio`), its release when found, and where that was read."""

    engine: str
    version: Optional[str]
    source: str  # the binary, or the package database, as shown to the user
    package: Optional[str] = None

    @property
    def name(self) -> str:
        return ENGINE_NAMES[self.engine]

    @property
    def label(self) -> str:
        return f"{self.name} {self.version}" if self.version else self.name


def upstream_version(package_version: str) -> Optional[str]:
    """The release in a package's version: no epoch, no revision, no repack suffix ("1:2.1.4-1" is 2.1.4,
    "1.7.24~ds1-6+deb13u1" is 1.7.24, "4.3.1+ds1-8+deb12u1+b3" is 4.3.1)."""
    version = package_version.split(":", 1)[-1]
    match = re.match(r"\d+(?:\.\d+)+", version)
    return match.group(0) if match else None


def _dpkg_installed(text: str) -> dict[str, str]:
    """Package name -> version for every installed package of a dpkg status file."""
    installed: dict[str, str] = {}
    for stanza in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line[:1] in (" ", "\t") or ":" not in line:
                continue
            key, _, value = line.partition(":")
            fields[key.strip().lower()] = value.strip()
        status = fields.get("status", "").split()
        if "package" in fields and "version" in fields and status[-1:] == ["installed"]:
            installed[fields["package"]] = fields["version"]
    return installed


def _rpm_header_fields(blob: bytes) -> dict[int, str]:
    """NAME, VERSION and RELEASE (tags 1000-1002) of an rpm header as the database keeps it (headerExport:
    big-endian index count and data length, 16-byte index entries, then the data; no magic)."""
    if len(blob) < 8:
        return {}
    count, length = struct.unpack(">II", blob[:8])
    data_start = 8 + 16 * count
    if count > 100_000 or data_start + length > len(blob):
        return {}
    found = {}
    for index in range(count):
        tag, kind, offset, _ = struct.unpack(">IIiI", blob[8 + 16 * index : 24 + 16 * index])
        if tag in (1000, 1001, 1002) and kind == 6 and 0 <= offset < length:
            start = data_start + offset
            end = blob.find(b"\0", start, data_start + length)
            if end >= 0:
                found[tag] = blob[start:end].decode("utf-8", "replace")
    return found


def _rpm_installed(path: str) -> dict[str, str]:
    """Package name -> version from an rpmdb.sqlite, opened read-only and never written (rpm keeps it in WAL)."""
    installed: dict[str, str] = {}
    try:
        connection = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
        try:
            for (blob,) in connection.execute("SELECT blob FROM Packages"):
                if isinstance(blob, bytes):
                    fields = _rpm_header_fields(blob)
                    if 1000 in fields and 1001 in fields:
                        installed[fields[1000]] = fields[1001]
        finally:
            connection.close()
    except sqlite3.Error:
        return {}
    return installed


def _from_binary(host: HostView, engine: str) -> Optional[EngineRelease]:
    """The engine's release from its binary's --version; only on the node itself (a binary under another host
    root may not run here, and must not be run)."""
    if host.root != "/":
        return None
    for directory in BINARY_DIRS:
        path = os.path.join(directory, BINARIES[engine])
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            continue
        try:
            result = subprocess.run(
                [path, "--version"], capture_output=True, text=True, timeout=_VERSION_TIMEOUT, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            return EngineRelease(engine, None, path)
        return EngineRelease(engine, parse_version_output(engine, result.stdout), path)
    return None


def parse_version_output(engine: str, output: str) -> Optional[str]:
    """The release in an engine's --version output: `containerd github.com/containerd/containerd/v2 v2.1.4 ...`,
    Debian's `containerd containerd.io 1.7.24 ...`, `crio version 1.36.1` or its `Version:  1.30.0` line,
    `podman version 5.2.1`."""
    for line in output.splitlines():
        words = line.replace(":", " ").split()
        if engine == "crio" and words[:1] == ["Version"] and len(words) > 1:
            match = _RELEASE.fullmatch(words[1])
            return match.group(1) if match else None
        if words[:1] == [BINARIES[engine]] or (engine == "crio" and words[:1] == ["crio"]):
            for word in words[1:]:
                match = _RELEASE.fullmatch(word)
                if match:
                    return match.group(1)
    return None


def installed_engines(host: HostView) -> tuple[list[EngineRelease], list[tuple[str, str]]]:
    """The engines found, and (place, what) for the report's list of places looked at."""
    looked: list[tuple[str, str]] = []
    dpkg_text = host.read_text(DPKG_STATUS, limit=64 << 20)
    dpkg = _dpkg_installed(dpkg_text) if dpkg_text is not None else {}
    looked.append((host.shown(DPKG_STATUS), "dpkg status" if dpkg_text is not None else "not present"))
    rpm: dict[str, str] = {}
    rpm_source = None
    for database in RPM_DATABASES:
        real = host.real_path(database)
        if real is not None and os.path.isfile(real):
            rpm = _rpm_installed(real)
            rpm_source = host.shown(database)
            looked.append((rpm_source, "rpm database"))
            break
    found: list[EngineRelease] = []
    for engine, packages in PACKAGES.items():
        release = _from_binary(host, engine)
        if release is None or release.version is None:
            for package in packages:
                if package in dpkg:
                    release = EngineRelease(engine, upstream_version(dpkg[package]), host.shown(DPKG_STATUS), package)
                    break
                if package in rpm and rpm_source is not None:
                    release = EngineRelease(engine, upstream_version(rpm[package]), rpm_source, package)
                    break
        if release is not None:
            found.append(release)
    return found, looked
