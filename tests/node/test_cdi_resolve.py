"""`cdi resolve` on fake host roots: each reason a name is unresolvable, with its file and fix; names that
resolve, with their spec and edits; the exit status and the usage errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nvidia_oci_hook.cli import main
from nvidia_oci_hook.engine import cdi_reasons
from tests.helpers import FakeHost

DPKG = "Package: {0}\nStatus: install ok installed\nVersion: {1}\n\n"
CONTAINERD_CDI_ON = 'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  enable_cdi = true\n'


def spec(kind: str = "nvidia.com/gpu", names: tuple[str, ...] = ("0", "all"), version: str = "0.5.0") -> str:
    node = "    deviceNodes:\n    - path: /dev/nvidia{0}\n"
    devices = "".join(
        f'- name: "{name}"\n  containerEdits:\n' + node.format(name if name.isdigit() else 0) for name in names
    )
    return f"cdiVersion: {version}\nkind: {kind}\ndevices:\n{devices}"


def containerd_node(host: FakeHost, release: str = "1.7.24~ds1-6", config: str = CONTAINERD_CDI_ON) -> FakeHost:
    host.text("/var/lib/dpkg/status", DPKG.format("containerd", release))
    host.text("/etc/containerd/config.toml", config)
    return host


def resolve(capsys: pytest.CaptureFixture[str], host: FakeHost, *args: str) -> tuple[int, dict[str, Any]]:
    status = main(["cdi", "resolve", "--host-root", str(host.root), "--format", "json", *args])
    out, err = capsys.readouterr()
    assert err == ""
    return status, json.loads(out)


def only(report: dict[str, Any]) -> dict[str, Any]:
    (engine,) = report["engines"]
    (name,) = engine["names"]
    return name  # type: ignore[no-any-return]


def test_a_name_that_resolves_names_its_spec_and_edits(fake_host: FakeHost, capsys: pytest.CaptureFixture[str]) -> None:
    containerd_node(fake_host).text("/var/run/cdi/nvidia.yaml", spec())
    status, report = resolve(capsys, fake_host, "nvidia.com/gpu=0")
    assert status == 0
    (engine,) = report["engines"]
    assert (engine["label"], engine["cdi_library"], engine["spec_dirs"]) == (
        "containerd 1.7.24",
        "0.7.2",
        ["/etc/cdi", "/var/run/cdi"],
    )
    assert only(report) == {
        "name": "nvidia.com/gpu=0",
        "resolved": True,
        "spec": "/var/run/cdi/nvidia.yaml",
        "edits": {"device": {"deviceNodes": [{"path": "/dev/nvidia0"}]}},
    }


def test_a_spec_that_fails_to_load(fake_host: FakeHost, capsys: pytest.CaptureFixture[str]) -> None:
    broken = spec().replace("deviceNodes:\n    - path: /dev/nvidia0\n", "deviceNodes:\n    - pth: /dev/nvidia0\n", 1)
    containerd_node(fake_host).text("/etc/cdi/nvidia.yaml", broken)
    status, report = resolve(capsys, fake_host, "nvidia.com/gpu=0")
    found = only(report)
    assert status == 1 and found["reason"] == cdi_reasons.NOT_LOADED
    assert found["files"] == ["/etc/cdi/nvidia.yaml"]
    assert 'unknown field "pth"' in found["message"]
    assert found["engine_error"].startswith("unresolvable CDI devices nvidia.com/gpu=0 (and at the spec's load")
    assert found["fix"].startswith("fix /etc/cdi/nvidia.yaml as the error says")


def test_two_specs_of_one_directory(fake_host: FakeHost, capsys: pytest.CaptureFixture[str]) -> None:
    containerd_node(fake_host).text("/etc/cdi/nvidia.yaml", spec()).text("/etc/cdi/nvidia-old.json", spec())
    fake_host.text("/var/run/cdi/nvidia.yaml", spec())  # a later directory does not bring it back
    status, report = resolve(capsys, fake_host, "nvidia.com/gpu=0")
    found = only(report)
    assert status == 1 and found["reason"] == cdi_reasons.CONFLICT
    assert found["files"] == ["/etc/cdi/nvidia-old.json", "/etc/cdi/nvidia.yaml"]
    assert found["fix"].startswith("keep one of /etc/cdi/nvidia-old.json")


def test_another_name_where_the_cache_dropped_the_only_device(
    fake_host: FakeHost, capsys: pytest.CaptureFixture[str]
) -> None:
    one = spec(names=("0",))
    containerd_node(fake_host).text("/etc/cdi/nvidia.yaml", one).text("/etc/cdi/nvidia-old.json", one)
    status, report = resolve(capsys, fake_host, "nvidia.com/gpu=1")
    found = only(report)
    assert status == 1 and found["reason"] == cdi_reasons.NOT_DEFINED
    # The specs define a device: the cache drops it, which is what the user must hear, not "no device at all".
    assert "no spec defines any device" not in found["message"]
    assert found["message"].endswith(
        "the one device the specs define, nvidia.com/gpu=0, is defined by two specs in one directory, and the "
        "cache drops it"
    )
    fake_host.text("/var/run/cdi/other.yaml", spec(names=("2",)))
    status, report = resolve(capsys, fake_host, "nvidia.com/gpu=1")
    assert only(report)["message"].endswith(
        "defined: nvidia.com/gpu=2; dropped by the cache, as two specs in one directory define them: nvidia.com/gpu=0"
    )


def test_a_spec_in_a_directory_the_engine_does_not_read(
    fake_host: FakeHost, capsys: pytest.CaptureFixture[str]
) -> None:
    containerd_node(fake_host, config=CONTAINERD_CDI_ON + '  cdi_spec_dirs = ["/etc/cdi"]\n')
    fake_host.text("/var/run/cdi/nvidia.yaml", spec())
    status, report = resolve(capsys, fake_host, "nvidia.com/gpu=0")
    found = only(report)
    assert status == 1 and found["reason"] == cdi_reasons.NOT_SCANNED
    assert "containerd reads specs only from /etc/cdi" in found["message"]
    assert found["fix"] == (
        "move /var/run/cdi/nvidia.yaml into /etc/cdi, or add /var/run/cdi to "
        "cdi_spec_dirs in the CRI plugin table of containerd's configuration"
    )


def test_a_version_the_engines_library_does_not_know(fake_host: FakeHost, capsys: pytest.CaptureFixture[str]) -> None:
    containerd_node(fake_host).text("/var/run/cdi/nvidia.yaml", spec(version="0.8.0"))
    status, report = resolve(capsys, fake_host, "nvidia.com/gpu=0")
    found = only(report)
    assert status == 1 and found["reason"] == cdi_reasons.LIBRARY_TOO_OLD
    assert (
        "CDI library v0.7.2, which containerd 1.7.24 vendors, refuses the spec (cdiVersion 0.8.0)" in found["message"]
    )
    assert 'invalid CDI Spec: invalid version "0.8.0"' in found["engine_error"]
    assert found["fix"].startswith("set cdiVersion to the version the fields need: 0.5.0")
    # The same node judged as containerd 2.1.4 (library v1.0.1) resolves it.
    status, report = resolve(capsys, fake_host, "nvidia.com/gpu=0", "--engine", "containerd=2.1.4")
    assert status == 0 and only(report)["resolved"]


@pytest.mark.parametrize(
    ("release", "config", "why"),
    [
        ("1.7.24~ds1-6", 'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n', "has enable_cdi off unless it is set"),
        (
            "2.1.4-1",
            'version = 3\n[plugins."io.containerd.cri.v1.runtime"]\n  enable_cdi = false\n',
            "enable_cdi = false",
        ),
        ("1.6.20~ds1-1", CONTAINERD_CDI_ON, "does not resolve CDI devices at all"),
    ],
)
def test_cdi_off_in_the_engine(
    fake_host: FakeHost, capsys: pytest.CaptureFixture[str], release: str, config: str, why: str
) -> None:
    containerd_node(fake_host, release, config).text("/var/run/cdi/nvidia.yaml", spec())
    status, report = resolve(capsys, fake_host, "nvidia.com/gpu=0")
    found = only(report)
    assert status == 1 and found["reason"] == cdi_reasons.CDI_OFF
    assert why in found["message"]
    assert report["engines"][0]["cdi_enabled"] is False
    assert found["engine_error"] == "none: the request is ignored and the container starts without the device"
    assert ("upgrade containerd" in found["fix"]) == release.startswith("1.6")
    assert ("set enable_cdi = true in" in found["fix"]) != release.startswith("1.6")


def test_a_uuid_against_a_spec_of_indices(fake_host: FakeHost, capsys: pytest.CaptureFixture[str]) -> None:
    containerd_node(fake_host).text("/var/run/cdi/nvidia.yaml", spec(names=("0", "1", "all")))
    fake_host.text("/var/run/cdi/other.yaml", spec(kind="example.com/net", names=("eth0",)))
    status, report = resolve(capsys, fake_host, "nvidia.com/gpu=GPU-4f5c2d1e")
    found = only(report)
    assert status == 1 and found["reason"] == cdi_reasons.NOT_DEFINED
    # Same vendor and class first; "1" is nearer, as text, to a UUID holding a 1.
    assert found["defined"] == ["nvidia.com/gpu=1", "nvidia.com/gpu=0", "nvidia.com/gpu=all", "example.com/net=eth0"]
    assert "(the request names the GPU by uuid, the specs by all and index)" in found["message"]
    assert found["fix"] == cdi_reasons.REASONS[cdi_reasons.NOT_DEFINED][1]


def test_every_reason_is_documented(fake_host: FakeHost) -> None:
    readme = (Path(__file__).resolve().parents[2] / "docs" / "commands" / "cdi.md").read_text()
    for code, (meaning, _) in cdi_reasons.REASONS.items():
        assert f"| `{code}` |" in readme, code
        assert meaning in readme, code


def test_each_engine_found_is_judged_with_its_own_library(
    fake_host: FakeHost, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_host.text("/var/lib/dpkg/status", DPKG.format("containerd", "2.1.4-1") + DPKG.format("podman", "4.3.1+ds1-8"))
    fake_host.text("/etc/containerd/config.toml", "version = 3\n")
    fake_host.text("/var/run/cdi/nvidia.yaml", spec(version="0.6.0"))
    status, report = resolve(capsys, fake_host, "nvidia.com/gpu=0")
    verdicts = {engine["label"]: engine["names"][0] for engine in report["engines"]}
    assert verdicts["containerd 2.1.4"]["resolved"] is True
    assert verdicts["podman 4.3.1"]["reason"] == cdi_reasons.LIBRARY_TOO_OLD
    assert status == 1
    status, _ = resolve(capsys, fake_host, "nvidia.com/gpu=0", "--engine", "containerd")
    assert status == 0


def test_a_kind_wildcard_lists_what_resolves(fake_host: FakeHost, capsys: pytest.CaptureFixture[str]) -> None:
    containerd_node(fake_host).text("/var/run/cdi/nvidia.yaml", spec(names=("0", "all")))
    status, report = resolve(capsys, fake_host, "nvidia.com/gpu=*")
    names = report["engines"][0]["names"]
    assert status == 0 and [(n["name"], n["resolved"]) for n in names] == [
        ("nvidia.com/gpu=0", True),
        ("nvidia.com/gpu=all", True),
    ]
    status, report = resolve(capsys, fake_host, "example.com/fpga=*")
    assert status == 1 and only(report)["reason"] == cdi_reasons.NOT_DEFINED


def test_text_report(fake_host: FakeHost, capsys: pytest.CaptureFixture[str]) -> None:
    containerd_node(fake_host).text("/var/run/cdi/nvidia.yaml", spec())
    status = main(["cdi", "resolve", "--host-root", str(fake_host.root), "nvidia.com/gpu=0", "nvidia.com/gpu=7"])
    out = capsys.readouterr().out
    assert status == 1
    assert out.splitlines()[0] == (
        "containerd 1.7.24 (CDI library v0.7.2); config /etc/containerd/config.toml; spec dirs /etc/cdi, /var/run/cdi"
    )
    assert "  nvidia.com/gpu=0: resolves from /var/run/cdi/nvidia.yaml" in out
    assert "      device: device nodes /dev/nvidia0" in out
    assert "  nvidia.com/gpu=7: unresolvable (not-defined): no spec in /etc/cdi, /var/run/cdi defines it" in out
    assert "      engine error: unresolvable CDI devices nvidia.com/gpu=7" in out
    assert out.endswith("1 of 2 resolve; 1 unresolvable (1 engine)\n")


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["nvidia.com/gpu"], "'nvidia.com/gpu' is not a qualified CDI device name"),
        (["--engine", "docker", "nvidia.com/gpu=0"], "--engine docker: expected crio, containerd or podman"),
        (["--engine", "containerd=1.6.20", "nvidia.com/gpu=0"], "containerd 1.6.20 does not read CDI specs"),
    ],
)
def test_usage_errors(fake_host: FakeHost, capsys: pytest.CaptureFixture[str], args: list[str], error: str) -> None:
    status = main(["cdi", "resolve", "--host-root", str(fake_host.root), *args])
    assert status == 2
    assert error in capsys.readouterr().err


def test_no_engine_on_the_node(fake_host: FakeHost, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["cdi", "resolve", "--host-root", str(fake_host.root), "nvidia.com/gpu=0"])
    assert status == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith("no containerd, cri-o or podman found on the node; name one with --engine")
    )


def test_enable_cdi_in_a_drop_in_the_root_imports(fake_host: FakeHost, capsys: pytest.CaptureFixture[str]) -> None:
    root = 'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n'
    containerd_node(fake_host, config=root).text("/var/run/cdi/nvidia.yaml", spec())
    status, report = resolve(capsys, fake_host, "nvidia.com/gpu=0")
    assert status == 1 and only(report)["reason"] == cdi_reasons.CDI_OFF
    fake_host.text("/etc/containerd/conf.d/50-cdi.toml", CONTAINERD_CDI_ON)
    status, report = resolve(capsys, fake_host, "nvidia.com/gpu=0")
    assert status == 0 and only(report)["resolved"]


def test_a_spec_in_a_subdirectory_is_not_read(fake_host: FakeHost, capsys: pytest.CaptureFixture[str]) -> None:
    containerd_node(fake_host).text("/etc/cdi/nvidia/nvidia.yaml", spec())
    status, report = resolve(capsys, fake_host, "nvidia.com/gpu=0")
    found = only(report)
    assert status == 1 and found["reason"] == cdi_reasons.NOT_SCANNED
    assert (
        "/etc/cdi/nvidia is a subdirectory of /etc/cdi, and the CDI library reads no subdirectory" in found["message"]
    )
    assert found["fix"] == "move /etc/cdi/nvidia/nvidia.yaml up into /etc/cdi"
