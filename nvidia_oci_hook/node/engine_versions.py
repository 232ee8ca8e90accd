"""Which container engines a node has, and their releases: what decides the CDI library each one reads specs with.

On the node itself (host root `/`) each engine's binary says (`containerd --version`, `crio --version`,
`podman --version`); under another host root, or where a binary does not answer, the package databases do:
dpkg's status file, and rpm's database, SQLite (EL9, Fedora) or Berkeley DB's hash format (EL8), read as
rpm's own libdb-free reader reads it (lib/backend/bdb_ro.cc).
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
RPM_DATABASES = ("/var/lib/rpm/rpmdb.sqlite", "/usr/lib/sysimage/rpm/rpmdb.sqlite", "/var/lib/rpm/Packages")
_BDB_HASH_MAGIC = 0x00061561
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


def _rpm_installed(host: HostView, path: str) -> dict[str, str]:
    """Package name -> version from an rpmdb.sqlite, opened read-only and never written (rpm keeps it in WAL).

    The file is opened through the host view and SQLite reads it by the descriptor's /proc/self/fd name, so no
    link of the node is followed here."""
    from nvidia_oci_hook.io import ReadError

    installed: dict[str, str] = {}
    try:
        fd = host.open_read(path)
    except ReadError:
        return {}
    try:
        connection = sqlite3.connect(f"file:/proc/self/fd/{fd}?immutable=1", uri=True)
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
    finally:
        os.close(fd)
    return installed


def _bdb_values(data: bytes) -> list[bytes]:
    """Every value of a Berkeley DB hash database (EL8's /var/lib/rpm/Packages): the hash pages' key/value item
    pairs, a value stored inline or along its chain of overflow pages. Empty when data is no such database."""
    if len(data) < 512:
        return []
    order = next((o for o in "<>" if struct.unpack(o + "I", data[12:16])[0] == _BDB_HASH_MAGIC), None)
    if order is None:
        return []
    page_size = struct.unpack(order + "I", data[20:24])[0]
    if page_size < 512 or page_size & (page_size - 1):
        return []
    pages = len(data) // page_size

    def page(number: int) -> bytes:
        return data[number * page_size : (number + 1) * page_size]

    def overflow(number: int, total: int) -> Optional[bytes]:
        chunks = bytearray()
        seen = set()
        while number and len(chunks) < total and number < pages and number not in seen:
            seen.add(number)
            current = page(number)
            if current[25] != 7:  # P_OVERFLOW
                return None
            used = struct.unpack(order + "H", current[22:24])[0]
            chunks += current[26 : 26 + used]
            number = struct.unpack(order + "I", current[16:20])[0]
        return bytes(chunks[:total]) if len(chunks) >= total else None

    values = []
    for number in range(1, pages):
        current = page(number)
        if current[25] not in (2, 13):  # P_HASH_UNSORTED, P_HASH
            continue
        entries = struct.unpack(order + "H", current[20:22])[0]
        if 26 + 2 * entries > page_size:
            continue
        offsets = [struct.unpack(order + "H", current[26 + 2 * i : 28 + 2 * i])[0] for i in range(entries)]
        # Items alternate key and value; an item's bytes run up to the one before it on the page.
        for key_at, value_at in zip(offsets[0::2], offsets[1::2]):
            if not value_at < key_at <= page_size:
                continue
            if current[value_at] == 1:  # H_KEYDATA
                values.append(current[value_at + 1 : key_at])
            elif current[value_at] == 3 and value_at + 12 <= page_size:  # H_OFFPAGE
                first, total = struct.unpack(order + "II", current[value_at + 4 : value_at + 12])
                value = overflow(first, total)
                if value is not None:
                    values.append(value)
    return values


def _rpm_bdb_installed(host: HostView, path: str) -> dict[str, str]:
    """Package name -> version from a Berkeley DB Packages file, whose values are rpm headers."""
    data = host.read_prefix(path, 1 << 30)
    if data is None:
        return {}
    installed: dict[str, str] = {}
    for value in _bdb_values(data):
        fields = _rpm_header_fields(value)
        if 1000 in fields and 1001 in fields:
            installed[fields[1000]] = fields[1001]
    return installed


def _from_binary(host: HostView, engine: str) -> Optional[EngineRelease]:
    """The engine's release from its binary's --version; only on the node itself (a binary under another host
    root may not run here, and must not be run)."""
    if host.rooted:
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
                # Debian's builds say 1.7.24~ds1, and some builds 2.1.9+unknown.
                match = _RELEASE.fullmatch(re.split(r"[~+]", word, maxsplit=1)[0])
                if match:
                    return match.group(1)
    return None


def installed_packages(host: HostView) -> tuple[dict[str, tuple[str, str]], list[tuple[str, str]]]:
    """Package name -> (version, the database it was read from) from the dpkg and rpm databases under
    the host root, and (place, what) for the report's list of places looked at."""
    looked: list[tuple[str, str]] = []
    packages: dict[str, tuple[str, str]] = {}
    dpkg_text = host.read_text(DPKG_STATUS, limit=64 << 20)
    if dpkg_text is not None:
        packages.update({name: (version, DPKG_STATUS) for name, version in _dpkg_installed(dpkg_text).items()})
    looked.append((DPKG_STATUS, "dpkg status" if dpkg_text is not None else "not present"))
    for database in RPM_DATABASES:
        if host.is_file(database):
            read = _rpm_bdb_installed if database.endswith("/Packages") else _rpm_installed
            for name, version in read(host, database).items():
                packages.setdefault(name, (version, database))
            looked.append((database, "rpm database"))
            break
    return packages, looked


def installed_engines(host: HostView) -> tuple[list[EngineRelease], list[tuple[str, str]]]:
    """The engines found, and (place, what) for the report's list of places looked at."""
    packages, looked = installed_packages(host)
    found: list[EngineRelease] = []
    for engine, names in PACKAGES.items():
        release = _from_binary(host, engine)
        if release is None or release.version is None:
            for package in names:
                if package in packages:
                    version, source = packages[package]
                    release = EngineRelease(engine, upstream_version(version), source, package)
                    break
        if release is not None:
            found.append(release)
    return found, looked
