"""What a user gives lint is one input, whatever its shape: the files of a directory or of one command line are
judged together (a DaemonSet and the ConfigMap holding its entrypoint are files of their own in the GPU Operator's
assets), and a stream is read as Kubernetes manifests whatever its line endings, byte order mark, or whether it
holds any object at all (`helm template --show-only` of a template that renders nothing)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from nvidia_oci_hook.cli import main
from tests.kubernetes.test_rules_nvidia_env import TWO_MARKER_ENTRYPOINT, TWO_MARKER_LINE

CONFIG_MAP, DAEMON_SET = (part.strip() + "\n" for part in TWO_MARKER_ENTRYPOINT.split("\n---\n"))


def lint_json(capsys: pytest.CaptureFixture[str], *arguments: str) -> tuple[int, list[dict[str, Any]]]:
    capsys.readouterr()
    status = main(["lint", "--offline", "--format", "json", *arguments])
    return status, json.loads(capsys.readouterr().out)["files"]


def findings(files: list[dict[str, Any]]) -> list[tuple[str, str, int]]:
    return sorted(
        (Path(file["path"]).name, finding["code"], finding["line"]) for file in files for finding in file["findings"]
    )


def test_the_stream_finds_the_entrypoints_marker(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "stream.yaml").write_text(TWO_MARKER_ENTRYPOINT.lstrip())
    status, files = lint_json(capsys, str(tmp_path / "stream.yaml"))
    assert status == 1 and ("stream.yaml", "K8S002", TWO_MARKER_LINE) in findings(files), files


@pytest.mark.parametrize("given", ["directory", "files"])
def test_a_config_map_in_a_file_of_its_own_is_read_with_the_workload_that_mounts_it(
    given: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assets = tmp_path / "assets"
    assets.mkdir()
    (assets / "0400_configmap.yaml").write_text(CONFIG_MAP)
    (assets / "0500_daemonset.yaml").write_text(DAEMON_SET)
    paths = (
        [str(assets)]
        if given == "directory"
        else [str(assets / "0500_daemonset.yaml"), str(assets / "0400_configmap.yaml")]
    )
    status, files = lint_json(capsys, *paths)
    # The line of the DaemonSet's args in its own file: the stream's line less the ConfigMap's and `---`.
    config_map_lines = CONFIG_MAP.count("\n") + 1
    assert status == 1 and findings(files) == [("0500_daemonset.yaml", "K8S002", TWO_MARKER_LINE - config_map_lines)]
    alone = lint_json(capsys, str(assets / "0500_daemonset.yaml"))
    assert alone == (0, [{"path": str(assets / "0500_daemonset.yaml"), "kind": "kubernetes", "findings": []}])


NOTHING = [
    "---\n# Source: gpu-operator/templates/nodefeaturerules.yaml\n",
    "---\n# Source: a.yaml\n---\n# Source: b.yaml\n",
    "# only a comment\n",
    "---\n---\n...\n",
    "--- # an empty document\n\n",
]


@pytest.mark.parametrize("text", NOTHING)
@pytest.mark.parametrize("endings", ["\n", "\r\n"])
@pytest.mark.parametrize("source", ["file", "stdin"])
def test_a_stream_of_no_object_is_kubernetes_with_nothing_to_judge(
    text: str,
    endings: str,
    source: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    raw = text.replace("\n", endings).encode()
    if source == "stdin":
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(raw)))
        argument = "-"
    else:
        (tmp_path / "rendered.yaml").write_bytes(raw)
        argument = str(tmp_path / "rendered.yaml")
    status, files = lint_json(capsys, argument)
    assert status == 0 and [(file["kind"], file["findings"]) for file in files] == [("kubernetes", [])], files


@pytest.mark.parametrize(("prefix", "endings"), [(b"", b"\r\n"), (b"\xef\xbb\xbf", b"\n"), (b"\xef\xbb\xbf", b"\r\n")])
def test_line_endings_and_a_byte_order_mark_change_nothing(
    prefix: bytes, endings: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = tmp_path / "plain.yaml"
    plain.write_text(TWO_MARKER_ENTRYPOINT.lstrip())
    saved = tmp_path / "saved.yaml"
    saved.write_bytes(prefix + TWO_MARKER_ENTRYPOINT.lstrip().encode().replace(b"\n", endings))
    expected = lint_json(capsys, str(plain))
    status, files = lint_json(capsys, str(saved))
    assert [file["kind"] for file in files] == ["kubernetes"]
    assert (status, [(code, line) for _, code, line in findings(files)]) == (
        expected[0],
        [(code, line) for _, code, line in findings(expected[1])],
    )
