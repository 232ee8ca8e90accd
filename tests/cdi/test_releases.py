"""The CDI library by release: each difference between releases, read at their tags, with a spec that uses it
and every release's verdict; the engine table; `lint --cdi-library` and `--engine`.

The verdicts are what each release's cdi.ReadSpec reports first (the text an engine logs), None where it loads
the spec. tests/cdi/test_reference.py holds release 1.0.1 to the library itself, built from Debian's package.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Optional

import pytest
from click.testing import CliRunner

from nvidia_oci_hook.cli import cli
from nvidia_oci_hook.kinds.cdi.releases import (
    NEWEST,
    RELEASES,
    UnknownRelease,
    describe_refusers,
    engine_judges,
    engine_library,
    library,
    version_key,
)
from nvidia_oci_hook.kinds.cdi.validation import analyse

INVALID = "invalid CDI Spec: "
UNKNOWN = "failed to unmarshal CDI Spec: error unmarshaling JSON: while decoding JSON: json: unknown field "


def spec(version: str = "0.5.0", kind: str = "nvidia.com/gpu", **device_edits: Any) -> dict[str, Any]:
    edits = {"deviceNodes": [{"path": "/dev/nvidia0"}], **device_edits}
    return {"cdiVersion": version, "kind": kind, "devices": [{"name": "gpu0", "containerEdits": edits}]}


def changed(value: dict[str, Any], **top: Any) -> dict[str, Any]:
    result = copy.deepcopy(value)
    result.update(top)
    return result


def first_error(value: Any, release: str) -> Optional[str]:
    return analyse(value, library(release)).library_error


# (what differs, the spec, {release: the first error, None where it loads}); a release not listed has the
# verdict of the nearest listed release before it.
DIFFERENCES: list[tuple[str, Any, dict[str, Optional[str]]]] = [
    ("versions each release knows", spec("1.1.0"), {
        "0.5.2": f'{INVALID}invalid version "1.1.0"', "1.1.0": None}),
    ("a 0.7.0 spec", spec("0.7.0"), {
        "0.5.2": f'{INVALID}invalid version "0.7.0"', "0.7.0": None}),
    ("a leading v, from 0.5.4", spec("v0.5.0"), {"0.5.2": f'{INVALID}invalid version "v0.5.0"', "0.5.4": None}),
    ("no minimum check before 0.5.4", spec("0.3.0", deviceNodes=[{"path": "/dev/x", "hostPath": "/dev/y"}]), {
        "0.5.2": None, "0.5.4": f"{INVALID}the spec version must be at least v0.5.0"}),
    ("annotations, from 0.6.0", changed(spec(), annotations={"a": "b"}), {
        "0.5.2": UNKNOWN + '"annotations"', "0.6.0": f"{INVALID}the spec version must be at least v0.6.0"}),
    # Decoding comes first: a field a release does not know hides its verdict on the version.
    ("intelRdt, from 0.7.0", spec("0.6.0", intelRdt={"closID": "gpu"}), {
        "0.5.2": UNKNOWN + '"intelRdt"', "0.7.0": f"{INVALID}the spec version must be at least v0.7.0"}),
    ("netDevices, in 1.1.0", spec("1.0.0", netDevices=[{"hostInterfaceName": "eth1", "name": "net1"}]), {
        "0.5.2": UNKNOWN + '"netDevices"', "1.1.0": f"{INVALID}the spec version must be at least v1.1.0"}),
    ("enableCMT, removed in 1.1.0", spec("0.7.0", intelRdt={"closID": "gpu", "enableCMT": True}), {
        "0.5.2": UNKNOWN + '"intelRdt"', "0.7.0": None, "1.1.0": UNKNOWN + '"enableCMT"'}),
    ("a device name not starting with a letter, before 1.0.0",
     {"cdiVersion": "0.4.0", "kind": "nvidia.com/gpu", "devices": [
         {"name": "_gpu", "containerEdits": {"env": ["A=1"]}}]}, {
        "0.5.2": f'{INVALID}failed add device "_gpu": invalid class "_gpu", should start with a letter or digit',
        "0.5.4": f"{INVALID}the spec version must be at least v0.5.0",
        "1.0.0": f'{INVALID}failed add device "_gpu": invalid class "_gpu", should start with a letter or digit'}),
    ("a '.' in the class without a vendor", spec(kind="/gpu.x"), {
        "0.5.2": f"{INVALID}invalid (empty) vendor name", "0.6.0": f"{INVALID}invalid vendor. empty name",
        "1.0.0": f"{INVALID}the spec version must be at least v0.6.0"}),
    ("a '.' in the class, refused by 0.5", spec(kind="nvidia.com/gpu.x"), {
        "0.5.2": f"{INVALID}invalid character '.' in device class \"gpu.x\"",
        "0.6.0": f"{INVALID}the spec version must be at least v0.6.0"}),
    ("no vendor", spec(kind="gpu"), {
        "0.5.2": f"{INVALID}invalid (empty) vendor name", "0.6.0": f"{INVALID}invalid vendor. empty name"}),
    ("permissions, and 0.5's spelling", spec(deviceNodes=[{"path": "/dev/nvidia0", "permissions": "rwx"}]), {
        "0.5.2": f'{INVALID}failed add device "gpu0": invalid device "gpu0": device "/dev/nvidia0": '
                 'invalid persmissions "rwx"',
        "0.6.0": f'{INVALID}failed add device "gpu0": invalid device "gpu0": device "/dev/nvidia0": '
                 'invalid permissions "rwx"'}),
    ("no devices, refused from 1.0.0", {"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", "devices": []}, {
        "0.5.2": None, "1.0.0": f"{INVALID}invalid spec, no devices"}),
    ("the root group as closID, in 1.1.0", spec("0.7.0", intelRdt={"closID": "/"}), {
        "0.5.2": UNKNOWN + '"intelRdt"',
        "0.7.0": f'{INVALID}failed add device "gpu0": invalid device "gpu0": invalid ClosID', "1.1.0": None}),
    ("an empty netDevices name", spec("1.1.0", netDevices=[{"hostInterfaceName": "eth1", "name": ""}]), {
        "1.1.0": f'{INVALID}failed add device "gpu0": invalid device "gpu0": invalid linux net device, empty Name'}),
    ("a host interface twice", spec("1.1.0", netDevices=[
        {"hostInterfaceName": "eth1", "name": "net0"}, {"hostInterfaceName": "eth1", "name": "net1"}]), {
        "1.1.0": f'{INVALID}failed add device "gpu0": invalid device "gpu0": invalid linux net device, duplicate '
                 'HostInterfaceName "eth1" with names "net1" and "net0"'}),
    ("schemata needs 1.1.0, even empty", spec("1.0.0", intelRdt={"closID": "gpu", "schemata": []}), {
        "1.1.0": f"{INVALID}the spec version must be at least v1.1.0"}),
    ("only intelRdt as a device's edits", {"cdiVersion": "0.7.0", "kind": "nvidia.com/gpu", "devices": [
        {"name": "gpu0", "containerEdits": {"intelRdt": {}}}]}, {"0.7.0": None}),
    ("a map key of no string type", {"cdiVersion": "0.5.0", None: "x"}, {
        "0.5.2": "failed to unmarshal CDI Spec: error converting YAML to JSON: Unsupported map key of type: <nil>",
        "1.0.1": "failed to unmarshal CDI Spec: error converting YAML to JSON: unsupported map key of type: <nil>"}),
]  # fmt: skip


@pytest.mark.parametrize("what, value, verdicts", DIFFERENCES, ids=[d[0] for d in DIFFERENCES])
def test_each_release_reports_what_its_read_spec_reports(
    what: str, value: Any, verdicts: dict[str, Optional[str]]
) -> None:
    listed = sorted(verdicts, key=version_key)
    seen = set()
    for found in RELEASES:
        at_or_before = [release for release in listed if version_key(release) <= version_key(found.release)]
        if not at_or_before:
            continue
        expected = verdicts[at_or_before[-1]]
        assert first_error(value, found.release) == expected, (what, found.release)
        seen.add(expected)
    # Each case tells releases apart, or holds a check only the releases listed have.
    assert len(seen) >= 2 or listed[0] != RELEASES[0].release, what


def test_the_release_is_named_loosely_and_only_as_modelled() -> None:
    assert library("v1.0.1") is library("1.0.1") is library("1.0")
    assert library("0.5").release == "0.5.4" and library("1.1").release == "1.1.0" == NEWEST.release
    for text in ("2.0", "0.4.0", "1", "", "latest"):
        with pytest.raises(UnknownRelease):
            library(text)


@pytest.mark.parametrize(
    "engine, version, release",
    [("containerd", "1.7.0", "0.5.4"), ("containerd", "1.7.11", "0.5.4"), ("containerd", "1.7.12", "0.6.1"),
     ("containerd", "1.7.24", "0.7.2"), ("containerd", "1.7.27", "0.8.1"), ("containerd", "2.0.4", "0.8.1"),
     ("containerd", "2.0.5", "1.0.0"), ("containerd", "2.1.4", "1.0.1"), ("containerd", "2.2.0", "1.0.1"),
     ("containerd", "2.2.1", "1.1.0"), ("containerd", "2.4.0-beta.0", "1.1.0"), ("crio", "1.25.2", "0.5.2"),
     ("crio", "1.28.3", "0.6.0"), ("crio", "1.30.0", "0.7.2"), ("crio", "1.32.1", "0.8.0"),
     ("crio", "1.32.2", "0.8.1"), ("crio", "1.34.11", "1.0.1"), ("crio", "1.35.0", "1.1.0"),
     ("crio", "1.36.3", "1.1.0"), ("podman", "4.3.1", "0.5.2"), ("podman", "4.9.5", "0.6.2"),
     ("podman", "5.0.3", "0.6.2"), ("podman", "5.1.0", "0.7.2"), ("podman", "5.4.2", "0.8.0"),
     ("podman", "5.8.2", "1.0.1"), ("podman", "4.3.1+ds1-8+deb12u1+b3", "0.5.2")],
)  # fmt: skip
def test_engine_releases_vendor_the_library_their_go_mod_requires(engine: str, version: str, release: str) -> None:
    assert engine_library(engine, version).release == release


@pytest.mark.parametrize(
    "engine, version, reason",
    [("containerd", "1.6.20", "does not read CDI specs"), ("crio", "1.24.6", "older than the releases modelled"),
     ("podman", "4.2.1", "older than the releases modelled"), ("podman", "4.0.0", "older than the releases modelled"),
     ("podman", "3.1.0", "does not read CDI specs"), ("crio", "x.y", "not a release number")],
)  # fmt: skip
def test_engine_releases_without_a_modelled_library_are_said_so(engine: str, version: str, reason: str) -> None:
    with pytest.raises(UnknownRelease, match=reason):
        engine_library(engine, version)


def test_the_engines_that_refuse_are_named_by_release() -> None:
    before_1_1 = {found.release for found in RELEASES if found.newest_spec_version != "1.1.0"}
    assert describe_refusers(before_1_1) == "containerd ≤ 2.2.0, cri-o ≤ 1.34 and podman ≤ 5.8"
    assert describe_refusers({"1.1.0"}) == "containerd ≥ 2.2.1 and cri-o ≥ 1.35"
    before_0_7 = {found.release for found in RELEASES if found.newest_spec_version in ("0.5.0", "0.6.0")}
    assert describe_refusers(before_0_7) == "containerd ≤ 1.7.15, cri-o ≤ 1.29 and podman ≤ 5.0"
    assert describe_refusers({"0.7.2"}) == "containerd 1.7.16–1.7.26, cri-o 1.30 and podman 5.1"
    judges = engine_judges([("containerd", "2.1.4"), ("crio", "1.36.1"), ("podman", "5.6.0")])
    assert [(judge.library.release, judge.engines) for judge in judges] == [
        ("1.0.1", ("containerd 2.1.4", "podman 5.6.0")),
        ("1.1.0", ("cri-o 1.36.1",)),
    ]


def _lint(*args: str) -> tuple[int, list[dict[str, Any]], str]:
    result = CliRunner().invoke(cli, ["lint", "--offline", "--format", "json", *args])
    findings = json.loads(result.output)["files"][0]["findings"] if result.exit_code != 2 else []
    return result.exit_code, findings, result.output


def test_lint_judges_with_the_newest_library_and_warns_of_the_engines_that_refuse(tmp_path: Path) -> None:
    path = tmp_path / "nvidia.json"
    path.write_text(json.dumps(changed(spec("1.1.0"), containerEdits={"deviceNodes": [{"path": "/dev/nvidiactl"}]})))
    status, findings, _ = _lint(str(path))
    assert status == 0 and [f["code"] for f in findings] == ["CDI109"], findings
    assert findings[0]["severity"] == "warning"
    assert findings[0]["message"] == "containerd ≤ 2.2.0, cri-o ≤ 1.34 and podman ≤ 5.8 refuse cdiVersion 1.1.0"
    assert findings[0]["hint"] == 'set "cdiVersion": "0.3.0", which the content needs'

    status, findings, _ = _lint("--cdi-library", "1.0.1", str(path))
    assert status == 1 and [f["code"] for f in findings] == ["CDI004"], findings
    assert findings[0]["message"].startswith("CDI library v1.0.1 refuses this spec: ")
    assert findings[0]["message"].endswith(
        'the library refuses the spec with: invalid CDI Spec: invalid version "1.1.0"'
    )

    status, findings, _ = _lint("--engine", "containerd=2.1.4", "--engine", "cri-o=1.36.1", str(path))
    assert status == 1 and [f["code"] for f in findings] == ["CDI004"], findings
    assert findings[0]["message"].startswith("containerd 2.1.4 (CDI library v1.0.1) refuses this spec: ")
    assert "cri-o" not in findings[0]["message"]


@pytest.mark.parametrize(
    "args, message",
    [(["--cdi-library", "2.0"], "no CDI library release '2.0' is modelled"),
     (["--engine", "podman"], "expected NAME=VERSION"), (["--engine", "docker=24.0"], "expected NAME=VERSION"),
     (["--engine", "containerd=1.6.20"], "containerd 1.6.20 does not read CDI specs"),
     (["--cdi-library", "1.0.1", "--engine", "crio=1.34.0"], "give --cdi-library or --engine, not both")],
)  # fmt: skip
def test_a_release_without_a_model_is_a_usage_error(args: list[str], message: str, tmp_path: Path) -> None:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec()))
    status, _, output = _lint(*args, str(path))
    assert status == 2 and message in output and "Traceback" not in output, output
