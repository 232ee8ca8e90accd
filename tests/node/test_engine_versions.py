"""The node's engines and their releases, and `lint --node` judging each CDI spec directory with the library of
every engine that reads it."""

from __future__ import annotations

import json
import shutil
import sqlite3
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest

from nvidia_oci_hook.cli import main
from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.node.engine_versions import installed_engines, parse_version_output, upstream_version
from tests.helpers import FakeHost

SPEC_1_1 = """\
cdiVersion: 1.1.0
kind: nvidia.com/gpu
devices:
  - name: gpu0
    containerEdits:
      deviceNodes:
        - path: /dev/nvidia0
containerEdits:
  deviceNodes:
    - path: /dev/nvidiactl
"""


def dpkg_status(**packages: str) -> str:
    stanzas = [
        f"Package: {name}\nStatus: install ok installed\nArchitecture: amd64\nVersion: {version}\n"
        "Description: a package\n with a continuation line\n"
        for name, version in packages.items()
    ]
    stanzas.append("Package: podman\nStatus: deinstall ok config-files\nVersion: 4.3.1+ds1-8\n")
    return "\n".join(stanzas)


def write(root: Path, path: str, text: str) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


def rpm_header(name: str, version: str, release: str) -> bytes:
    """An rpm header as rpmdb.sqlite keeps it: headerExport, big-endian, no magic."""
    data = b""
    entries = b""
    for tag, value in ((1000, name), (1001, version), (1002, release)):
        entries += struct.pack(">IIiI", tag, 6, len(data), 1)
        data += value.encode() + b"\0"
    return struct.pack(">II", 3, len(data)) + entries + data


def lint_node(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    status = main(["lint", "--node", "--host-root", str(root), "--format", "json"])
    return status, json.loads(capsys.readouterr().out)


def _findings(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [finding for file in report["files"] for finding in file["findings"]]


def test_the_engine_whose_library_refuses_the_spec_is_named_and_no_other(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "node"
    write(root, "/var/lib/dpkg/status", dpkg_status(containerd="2.1.4~ds1-1", **{"cri-o": "1.36.1-1"}))
    write(root, "/etc/cdi/nvidia.yaml", SPEC_1_1)
    status, report = lint_node(root, capsys)
    refusals = [finding for finding in _findings(report) if finding["code"] == "CDI004"]
    assert status == 1 and len(refusals) == 1, _findings(report)
    message = refusals[0]["message"]
    assert message.startswith("containerd 2.1.4 (CDI library v1.0.1) refuses this spec: ")
    assert 'invalid version "1.1.0"' in message and "cri-o" not in message
    # cri-o 1.36 (library 1.1.0) loads it: nothing says the older releases refuse it, the node has none.
    assert not [finding for finding in _findings(report) if finding["code"] in ("CDI109", "CDI108")]
    looked = [(entry["path"], entry["found"]) for entry in report["looked_at"]]
    status_file = "/var/lib/dpkg/status"
    assert (status_file, "containerd 2.1.4 (CDI library 1.0.1)") in looked
    assert (status_file, "cri-o 1.36.1 (CDI library 1.1.0)") in looked


def test_engines_without_a_release_or_without_cdi_are_said_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "node"
    write(root, "/var/lib/dpkg/status", dpkg_status(containerd="1.6.20~ds1-1+deb12u3", podman="5.6.0-1"))
    write(root, "/etc/crio/crio.conf", '[crio.runtime]\ndefault_runtime = "crun"\n')
    write(root, "/etc/cdi/nvidia.yaml", SPEC_1_1)
    status, report = lint_node(root, capsys)
    looked = [(entry["path"], entry["found"]) for entry in report["looked_at"]]
    status_file = "/var/lib/dpkg/status"
    assert (status_file, "podman 5.6.0 (CDI library 1.0.1)") in looked
    assert (status_file, "containerd 1.6.20 does not read CDI specs") in looked
    assert (
        "/etc/crio/crio.conf",
        "cri-o, release not found: its CDI specs are judged with CDI library 1.1.0",
    ) in looked
    # /etc/cdi is read by cri-o (judged with the newest library, which loads the spec) and podman 5.6.
    refusals = [finding["message"] for finding in _findings(report) if finding["code"] == "CDI004"]
    assert len(refusals) == 1 and refusals[0].startswith("podman 5.6.0 (CDI library v1.0.1) refuses this spec: ")
    assert status == 1


def test_the_text_report_lists_the_engines_found(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "node"
    write(root, "/var/lib/dpkg/status", dpkg_status(podman="4.3.1+ds1-8+deb12u1+b3"))
    main(["lint", "--node", "--host-root", str(root)])
    lines = capsys.readouterr().out.splitlines()
    status_file = "/var/lib/dpkg/status"
    assert [line.split()[1:] for line in lines if line.split()[:1] == [status_file]] == [
        ["dpkg", "status"],
        ["podman", "4.3.1", "(CDI", "library", "0.5.2)"],
    ]


def test_releases_come_from_the_rpm_database_too(tmp_path: Path) -> None:
    root = tmp_path / "node"
    database = root / "var/lib/rpm/rpmdb.sqlite"
    database.parent.mkdir(parents=True)
    connection = sqlite3.connect(database)
    connection.execute("CREATE TABLE Packages (hnum INTEGER PRIMARY KEY AUTOINCREMENT, blob BLOB NOT NULL)")
    for header in (rpm_header("bash", "5.1.8", "9.el9"), rpm_header("podman", "5.4.0", "1.el9"),
                   rpm_header("containerd.io", "1.7.27", "3.1.el9"), b"\x00\x00"):  # fmt: skip
        connection.execute("INSERT INTO Packages (blob) VALUES (?)", (header,))
    connection.commit()
    connection.close()
    found, looked = installed_engines(HostView(str(root)))
    assert {(release.engine, release.version, release.package) for release in found} == {
        ("podman", "5.4.0", "podman"),
        ("containerd", "1.7.27", "containerd.io"),
    }
    assert ("/var/lib/rpm/rpmdb.sqlite", "rpm database") in looked


def test_releases_come_from_el8_s_berkeley_db_rpm_database(tmp_path: Path) -> None:
    """The Packages file written by Berkeley DB itself (db5.3_load, from the db5.3-util package scripts/setup
    installs), with pages small enough that the headers spill onto overflow pages, as real ones do."""
    load = shutil.which("db5.3_load")
    assert load is not None, "db5.3_load is missing: run `sh scripts/setup test` (package db5.3-util)"
    root = tmp_path / "node"
    database = root / "var/lib/rpm/Packages"
    database.parent.mkdir(parents=True)
    padding = b"x" * 3000  # the headers' other tags: a real header is tens of kilobytes
    records = [(0, struct.pack("<I", 3))]  # rpm's counter record, which is no header
    records += [
        (number, rpm_header(name, version, release) + padding)
        for number, (name, version, release) in enumerate(
            [("bash", "4.4.20", "5.el8"), ("podman", "4.9.4", "1.module+el8"), ("cri-o", "1.30.4", "1.1.el8")], 1
        )
    ]
    dump = ["VERSION=3", "format=bytevalue", "type=hash", "db_pagesize=512", "HEADER=END"]
    for key, value in records:
        dump += [" " + struct.pack("<I", key).hex(), " " + value.hex()]
    (tmp_path / "dump").write_text("\n".join([*dump, "DATA=END"]) + "\n")
    subprocess.run([load, "-f", str(tmp_path / "dump"), str(database)], check=True, capture_output=True)
    assert database.stat().st_size > 4 * 512, "the headers must need overflow pages"
    found, looked = installed_engines(HostView(str(root)))
    assert {(release.engine, release.version) for release in found} == {("podman", "4.9.4"), ("crio", "1.30.4")}
    assert ("/var/lib/rpm/Packages", "rpm database") in looked
    # Anything else under that name is read as holding nothing, never as a crash.
    for garbage in (b"", b"\0" * 8192, database.read_bytes()[:700], bytes(range(256)) * 40):
        database.write_bytes(garbage)
        assert installed_engines(HostView(str(root)))[0] == [], garbage[:16]


def test_a_configured_engine_without_a_release_is_judged_with_the_newest_library(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "node"
    write(root, "/etc/crio/crio.conf", '[crio.runtime]\ndefault_runtime = "crun"\n')
    write(root, "/etc/cdi/nvidia.yaml", SPEC_1_1)
    _, report = lint_node(root, capsys)
    assert not [finding for finding in _findings(report) if finding["code"] == "CDI004"], _findings(report)


@pytest.mark.parametrize(
    "engine, output, version",
    [("containerd", "containerd github.com/containerd/containerd/v2 v2.1.4 75cb2b7193e4e490e9fbdc236c0e811ccaba3376\n",
      "2.1.4"),
     ("containerd", "containerd containerd.io 1.7.24 88bf19b2105c8b17560993bee28a01ddc2f97182\n", "1.7.24"),
     # Debian's and unreleased builds: the upstream release, as dpkg's version gives it.
     ("containerd", "containerd github.com/containerd/containerd 1.7.24~ds1 1.7.24~ds1-6+deb13u1\n", "1.7.24"),
     ("containerd", "containerd github.com/containerd/containerd/v2 2.1.9+unknown \n", "2.1.9"),
     ("crio", "crio version 1.31.3\n", "1.31.3"),
     ("crio", "crio version 1.30.0\nVersion:        1.30.0\nGitCommit:      abc\n", "1.30.0"),
     ("crio", "Version:          1.29.1\nGitCommit:  x\n", "1.29.1"),
     ("podman", "podman version 5.2.1\n", "5.2.1"), ("podman", "podman version 4.3.1\n", "4.3.1"),
     ("podman", "something else\n", None)],
)  # fmt: skip
def test_version_outputs_are_read_as_each_engine_prints_them(engine: str, output: str, version: str) -> None:
    assert parse_version_output(engine, output) == version


@pytest.mark.parametrize(
    "package, version",
    [("1:2.1.4-1", "2.1.4"), ("1.7.24~ds1-6+deb13u1", "1.7.24"), ("4.3.1+ds1-8+deb12u1+b3", "4.3.1"),
     ("1.7.27-1", "1.7.27"), ("5:5.2.2-1.el9", "5.2.2"), ("none", None)],
)  # fmt: skip
def test_package_versions_give_the_upstream_release(package: str, version: str) -> None:
    assert upstream_version(package) == version


def test_a_node_with_no_package_database_says_so(fake_host: FakeHost) -> None:
    fake_host.root.mkdir(exist_ok=True)
    found, looked = installed_engines(HostView(str(fake_host.root)))
    assert found == [] and looked == [("/var/lib/dpkg/status", "not present")]


@pytest.mark.parametrize(
    "version, enable_cdi, judged",
    [("1.7.24~ds1-6", None, False), ("1.7.24~ds1-6", "true", True), ("2.1.4~ds1-1", None, True),
     ("2.1.4~ds1-1", "false", False), ("1.6.20~ds1-1", "true", False)],
)  # fmt: skip
def test_containerd_s_specs_are_judged_only_where_it_reads_them(
    version: str, enable_cdi: str, judged: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "node"
    write(root, "/var/lib/dpkg/status", dpkg_status(containerd=version))
    cri = '[plugins."io.containerd.grpc.v1.cri"]\n' + (f"  enable_cdi = {enable_cdi}\n" if enable_cdi else "")
    write(root, "/etc/containerd/config.toml", "version = 2\n" + cri)
    write(root, "/etc/cdi/nvidia.yaml", SPEC_1_1)
    _, report = lint_node(root, capsys)
    refusals = [finding["message"] for finding in _findings(report) if finding["code"] == "CDI004"]
    # Every containerd release here vendors a library older than 1.1.0: judged, the spec is refused.
    assert len(refusals) == (1 if judged else 0), refusals
    if judged:
        assert refusals[0].startswith(f"containerd {version.split('~')[0]} (CDI library ")
