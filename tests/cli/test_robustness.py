"""Bad input of every kind: a finding or one clear line, the documented exit status, never a traceback."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nvidia_oci_hook.cli import main
from tests.helpers import lint_value


def lint_file(path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nvidia_oci_hook", "lint", "--format", "json", *extra, str(path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def only_finding(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr == ""
    (finding,) = json.loads(proc.stdout)["files"][0]["findings"]
    return finding  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["/nonexistent/config.json"],
            "nvidia-oci-hook: /nonexistent/config.json: cannot open: No such file or directory",
        ),
        (["/"], "nvidia-oci-hook: /: is a directory holding no documents of a kind this tool reads"),
        (["--host-root", "/nonexistent", "/dev/null"], "nvidia-oci-hook: --host-root /nonexistent: not a directory"),
    ],
)
def test_unreadable_path_is_one_line_and_exit_two(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["lint", *args]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == message + "\n"


def test_unreadable_file(tmp_path: Path) -> None:
    # Root reads any file; without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH it obeys the mode like anyone.
    path = tmp_path / "config.json"
    path.write_text("{}")
    path.chmod(0)
    proc = subprocess.run(
        ["setpriv", "--bounding-set=-dac_override,-dac_read_search", sys.executable, "-m", "nvidia_oci_hook",
         "lint", str(path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == f"nvidia-oci-hook: {path}: cannot open: Permission denied\n"


def test_invalid_json_has_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{\n  "ociVersion": "1.0.2",\n  "process": {"cwd": "/",}\n}\n')
    finding = only_finding(lint_file(path))
    assert finding["code"] == "DOC001" and finding["line"] == 3
    assert finding["message"].startswith("invalid JSON: ")


@pytest.mark.parametrize(
    ("content", "code"),
    [
        (b"", "DOC001"),
        (b"\n\n", "DOC001"),
        (b'{"ociVersion": "1.0.2", "hostname": "\xff\xfe"}', "DOC002"),
        (b"\xef\xbb\xbf{}", "DOC001"),
        (b"[1, 2, 3]", "SCH001"),
        (b'"config"', "SCH001"),
        (b"null", "SCH001"),
        (b"[" * 10000 + b"]" * 10000, "DOC003"),
        (b"[" * 20000 + b"]" * 20000, "DOC003"),
        (b'{"a":' * 20000 + b"1" + b"}" * 20000, "DOC003"),
    ],
)
def test_hostile_documents_give_a_finding(tmp_path: Path, content: bytes, code: str) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(content)
    proc = lint_file(path, "--offline", "--fail-on", "warning")
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr == ""
    assert code in [f["code"] for f in json.loads(proc.stdout)["files"][0]["findings"]]


def test_hundred_megabyte_file_is_refused_quickly(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    with path.open("wb") as handle:
        handle.write(b'{"ociVersion": "1.0.2", "process": {"cwd": "/", "env": [')
        chunk = b'"X=' + b"x" * 1000 + b'",'
        for _ in range(100 * 1024):
            handle.write(chunk)
        handle.write(b'"Y=1"]}}')
    assert path.stat().st_size > 100 * 1000 * 1000
    finding = only_finding(lint_file(path))
    assert finding["code"] == "DOC004"
    assert "more than the 33554432 bytes this tool reads" in finding["message"]


def _mutations(value: Any, rng: random.Random, count: int) -> list[Any]:
    """Copies of value with one subtree replaced by a value of another type."""
    replacements: list[Any] = [None, True, 0, -1, 2**70, 1.5, "", "x", [], [1, "a"], {}, {"path": 1}]
    paths: list[list[Any]] = []

    def walk(node: Any, path: list[Any]) -> None:
        paths.append(path)
        if isinstance(node, dict):
            for key, item in node.items():
                walk(item, [*path, key])
        elif isinstance(node, list):
            for index, item in enumerate(node):
                walk(item, [*path, index])

    walk(value, [])
    results = []
    for _ in range(count):
        copy = json.loads(json.dumps(value))
        path = rng.choice(paths)
        if not path:
            results.append(rng.choice(replacements))
            continue
        parent = copy
        for part in path[:-1]:
            parent = parent[part]
        parent[path[-1]] = rng.choice(replacements)
        results.append(copy)
    return results


def test_wrong_types_anywhere_never_crash_a_rule(fake_host: Any, as_root: None) -> None:
    example = json.loads((Path(__file__).parents[2] / "examples" / "privileged-host-dev.json").read_text())
    stale = json.loads((Path(__file__).parents[2] / "examples" / "stale-driver-root.json").read_text())
    fake_host.device("/dev/nvidia0", "c", 195, 0).executable("/usr/bin/nvidia-ctk")
    rng = random.Random(20261130)
    checked = 0
    for base in (example, stale):
        for mutated in _mutations(base, rng, 600):
            findings = lint_value(mutated, host_root=fake_host.root)
            checked += 1
            assert all(f.line is None or f.line >= 1 for f in findings)
    assert checked == 1200
