"""`lint --engine containerd=VERSION` on containerd configurations: each finding is one for the series that break
on the file, and a release judges only by its own; a release not modelled is judged by the nearest series, and
every finding says so; containerd 1.6 reads no CDI specs, so it judges configurations and no CDI spec."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nvidia_oci_hook.cli import main
from nvidia_oci_hook.kinds.containerd.versions import release_note, series_of
from tests.helpers import FakeHost

LOCAL_DATE = "version = 2\nroot = 2024-01-31\n"
V2_SNAPSHOTTER = 'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd]\n  snapshotter = "overlay"\n'
V3 = 'version = 3\n[plugins."io.containerd.cri.v1.runtime"]\n  enable_cdi = true\n'


def codes(capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, *engine: str) -> list[str]:
    config = tmp_path / "config.toml"
    config.write_text(text)
    args = ["lint", "--kind", "containerd", "--offline", "--format", "json"]
    main([*args, *(f"--engine=containerd={release}" for release in engine), str(config)])
    out, err = capsys.readouterr()
    assert err == "", err
    return sorted(finding["code"] for finding in json.loads(out)["files"][0]["findings"])


@pytest.mark.parametrize(
    "text, every, by_release",
    [
        (LOCAL_DATE, ["CTD001", "CTD004"], {"1.6.20": ["CTD001", "CTD004"], "1.7.24": ["CTD001", "CTD004"],
                                            "2.1.9": ["CTD001"], "2.2.7": ["CTD001"]}),
        (V2_SNAPSHOTTER, ["CTD120"], {"1.6.20": ["CTD120"], "1.7.24": ["CTD120"], "2.1.9": [], "2.0.5": []}),
        # 1.6 reads a version 3 file as version 2, in which the runtime plugin's enable_cdi is ignored; 1.7.24
        # refuses the version (1.7.20 and later do).
        (V3, ["CTD106"], {"1.6.20": ["CTD101", "CTD106"], "1.7.24": ["CTD002", "CTD106"],
                          "1.7.19": ["CTD101", "CTD106"], "2.1.9": [], "2.3.4": []}),
    ],
    ids=["local-date", "v2-snapshotter", "version-3"],
)  # fmt: skip
def test_a_release_judges_by_its_own_series(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, every: list[str], by_release: dict[str, list[str]]
) -> None:
    assert codes(capsys, tmp_path, text) == every
    for release, expected in by_release.items():
        assert codes(capsys, tmp_path, text, release) == expected, release


def test_a_release_not_modelled_is_judged_by_the_nearest_series(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert (series_of("1.6.20"), series_of("2.4.1"), series_of("1.5.9"), series_of("v2.1.9")) == (
        "1.6", "2.3", "1.6", "2.1",
    )  # fmt: skip
    assert release_note("2.1.9") == "containerd 2.1.9"
    config = tmp_path / "config.toml"
    config.write_text(LOCAL_DATE)
    main(["lint", "--kind", "containerd", "--offline", "--format", "json", "--engine", "containerd=1.5.9", str(config)])
    findings = json.loads(capsys.readouterr().out)["files"][0]["findings"]
    assert sorted(f["code"] for f in findings) == ["CTD001", "CTD004"]
    note = "[containerd 1.5.9 (not modelled: judged as containerd 1.6, the nearest series modelled)]"
    assert all(f["message"].endswith(note) for f in findings), findings


def test_containerd_16_judges_configurations_and_no_cdi_spec(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert codes(capsys, tmp_path, LOCAL_DATE, "1.6.20") == ["CTD001", "CTD004"]
    spec = tmp_path / "spec.yaml"
    spec.write_text("cdiVersion: 0.5.0\nkind: example.com/c\ndevices: []\n")  # a class the library panics on
    status = main(["lint", "--engine", "containerd=1.6.20", str(spec)])
    _, err = capsys.readouterr()
    assert status == 2 and "containerd 1.6.20 does not read CDI specs" in err, err
    # With an engine that reads them beside it, the spec is judged by that one alone.
    both = main(
        ["lint", "--format", "json", "--engine", "containerd=1.6.20", "--engine", "containerd=1.7.24", str(spec)]
    )
    with_both = capsys.readouterr().out
    alone = main(["lint", "--format", "json", "--engine", "containerd=1.7.24", str(spec)])
    assert (both, with_both) == (alone, capsys.readouterr().out)
    assert "containerd 1.7.24" in with_both  # the spec's findings name the release that judged it


@pytest.mark.parametrize("release, expected", [("1.7.24~ds1-6", True), ("2.1.4~ds1-1", False)])
def test_lint_node_judges_as_the_release_it_finds(
    fake_host: FakeHost, capsys: pytest.CaptureFixture[str], release: str, expected: bool
) -> None:
    fake_host.text("/etc/containerd/config.toml", LOCAL_DATE)
    fake_host.text("/var/lib/dpkg/status", f"Package: containerd\nStatus: install ok installed\nVersion: {release}\n\n")
    main(["lint", "--node", "--host-root", str(fake_host.root), "--format", "json", "--select", "CTD004"])
    report = json.loads(capsys.readouterr().out)
    found = [f["code"] for entry in report["files"] for f in entry["findings"]]
    assert found == (["CTD004"] if expected else []), report
