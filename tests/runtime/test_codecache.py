"""The state directory's code cache: written after a run that imported the package's modules from their files,
serving them on the next run only while each source is unchanged and the file is this user's own, and never
changing what a run does."""

from __future__ import annotations

import json
import marshal
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.engine.support import config, device
from tests.runtime.support import INTERPRETER, launchers, run, settled, write_config

REPOSITORY = Path(__file__).resolve().parents[2]

# The guard as the hook's front starts it, reporting what the cache served.
PROGRAM = """
import sys
sys.path.append({parent!r})
from nvidia_oci_hook.runtime import codecache
cache = codecache.install({state!r})
from nvidia_oci_hook.runtime.hooks import main
status = main(["prestart"], None, {state!r}, {stdin!r})
print(" ".join(sorted(cache.served)))
print(status)
"""


def cache_file_of(interpreter: str) -> str:
    program = "from nvidia_oci_hook.runtime.codecache import CACHE_FILE; print(CACHE_FILE)"
    result = subprocess.run(
        [interpreter, "-I", "-S", "-c", f"import sys; sys.path.append({str(REPOSITORY)!r}); {program}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip()


def package_copy(directory: Path) -> Path:
    """A copy of the package whose sources a test may change; the directory that holds it."""
    shutil.copytree(
        REPOSITORY / "nvidia_oci_hook", directory / "nvidia_oci_hook", ignore=shutil.ignore_patterns("__pycache__")
    )
    return directory


class Guard:
    """A GPU container's bundle, the settings, a state directory and a package copy to run the guard with."""

    def __init__(self, tmp_path: Path) -> None:
        self.parent = package_copy(tmp_path / "package")
        self.state = tmp_path / "state"
        self.state.mkdir(mode=0o700)
        bundle = tmp_path / "bundle"
        bundle.mkdir()
        value = config()
        value["linux"]["devices"] = [device("/dev/nvidia0", 195, 0), device("/dev/nvidiactl", 195, 255)]
        (bundle / "config.json").write_text(json.dumps(value))
        self.settings = write_config(tmp_path / "config.yaml", log={"file": str(tmp_path / "log"), "syslog": False})
        self.stdin = json.dumps({"ociVersion": "1.0.2", "id": "c1", "status": "creating", "bundle": str(bundle)})

    @property
    def cache(self) -> Path:
        """The cache file, once a run wrote it: the interpreter's own, which need not be the one running pytest."""
        (path,) = self.state.glob("code.*")
        return path

    def run(self) -> tuple[set[str], int, str]:
        """(the modules served from the cache, the guard's status, its stderr)."""
        program = PROGRAM.format(parent=str(self.parent), state=str(self.state), stdin=self.stdin)
        result = subprocess.run(
            [INTERPRETER, "-I", "-S", "-c", program],
            capture_output=True,
            text=True,
            env={"NVIDIA_OCI_HOOK_CONFIG": str(self.settings)},
            timeout=60,
            check=False,
        )
        served, status = result.stdout.split("\n")[:2]
        return set(served.split()), int(status), result.stderr

    def entries(self) -> dict[str, Any]:
        _magic, _directory, entries = marshal.loads(self.cache.read_bytes())
        return entries


def test_the_first_run_writes_the_cache_and_the_next_is_served_from_it_with_the_same_outcome(tmp_path: Path) -> None:
    guard = Guard(tmp_path)
    served, status, stderr = guard.run()
    assert served == set()
    assert guard.cache.stat().st_mode & 0o777 == 0o600
    kept = set(guard.entries())
    assert {"nvidia_oci_hook.runtime.hooks", "nvidia_oci_hook.engine.pipeline", "nvidia_oci_hook.host"} <= kept
    # What the fronts' programs import before the finder is in place stays theirs.
    assert kept.isdisjoint({"nvidia_oci_hook", "nvidia_oci_hook.runtime", "nvidia_oci_hook.runtime.codecache"})
    assert status == 1 and "refusing container c1: [DEV003]" in stderr, stderr  # the guard did real work

    again, second_status, second_stderr = guard.run()
    assert again == kept
    assert (second_status, second_stderr) == (status, stderr)
    assert set(guard.entries()) == kept  # nothing new imported: the file is left as it was


def test_a_changed_source_is_imported_from_its_file_and_kept_again(tmp_path: Path) -> None:
    guard = Guard(tmp_path)
    _, status, stderr = guard.run()
    changed = guard.parent / "nvidia_oci_hook/engine/transforms.py"
    info = changed.stat()
    changed.write_text(changed.read_text() + "\nCHANGED_HERE = True\n")
    os.utime(changed, ns=(info.st_atime_ns, info.st_mtime_ns))  # the same time, another size
    served, *outcome = guard.run()
    assert "nvidia_oci_hook.engine.transforms" not in served and "nvidia_oci_hook.engine.pipeline" in served
    assert outcome == [status, stderr]
    entry = guard.entries()["nvidia_oci_hook.engine.transforms"]
    assert entry[2] == changed.stat().st_size
    assert b"CHANGED_HERE" in entry[4]
    served, *_ = guard.run()
    assert "nvidia_oci_hook.engine.transforms" in served


@pytest.mark.parametrize(
    "spoil",
    [
        pytest.param(lambda guard: guard.state.chmod(0o770), id="directory-others-can-write"),
        pytest.param(lambda guard: guard.cache.chmod(0o620), id="file-others-can-write"),
        pytest.param(lambda guard: guard.cache.write_bytes(b"\x00garbage"), id="damaged"),
        pytest.param(lambda guard: guard.cache.write_bytes(guard.cache.read_bytes()[:-100]), id="truncated"),
        pytest.param(
            lambda guard: guard.cache.write_bytes(
                marshal.dumps((b"\0\0\0\0", str(guard.parent / "nvidia_oci_hook"), guard.entries()))
            ),
            id="another-interpreter",
        ),
        pytest.param(
            lambda guard: guard.cache.write_bytes(marshal.dumps((*marshal.loads(guard.cache.read_bytes())[:2], [1]))),
            id="entries-not-a-table",
        ),
        pytest.param(
            lambda guard: guard.cache.write_bytes(
                marshal.dumps(
                    (
                        *marshal.loads(guard.cache.read_bytes())[:2],
                        {**guard.entries(), "nvidia_oci_hook.io": ("io.py", False, 1, 1)},
                    )
                )
            ),
            id="entry-of-another-shape",
        ),
        pytest.param(lambda guard: _linked(guard.cache), id="a-link"),
    ],
)
def test_a_cache_file_it_cannot_vouch_for_serves_nothing(tmp_path: Path, spoil: Any) -> None:
    guard = Guard(tmp_path)
    _, status, stderr = guard.run()
    spoil(guard)
    served, *outcome = guard.run()
    assert served == set()
    assert outcome == [status, stderr]


def _linked(path: Path) -> None:
    target = path.with_name("elsewhere")
    path.rename(target)
    path.symlink_to(target.name)


def test_another_package_directory_is_not_served_from_this_ones_cache(tmp_path: Path) -> None:
    guard = Guard(tmp_path)
    guard.run()
    kept = guard.cache.read_bytes()
    guard.parent = package_copy(tmp_path / "other")
    served, status, _ = guard.run()
    assert served == set() and status == 1
    assert guard.cache.read_bytes() != kept  # written again, for the package now in use


def test_code_that_does_not_load_falls_back_to_the_source(tmp_path: Path) -> None:
    guard = Guard(tmp_path)
    _, status, stderr = guard.run()
    magic, directory, entries = marshal.loads(guard.cache.read_bytes())
    origin, is_package, size, mtime, _code = entries["nvidia_oci_hook.engine.records"]
    entries["nvidia_oci_hook.engine.records"] = (origin, is_package, size, mtime, b"not marshal")
    entries["nvidia_oci_hook.kinds.oci"] = (*entries["nvidia_oci_hook.kinds.oci"][:4], marshal.dumps(42))
    guard.cache.write_bytes(marshal.dumps((magic, directory, entries)))
    served, *outcome = guard.run()
    assert {"nvidia_oci_hook.engine.records", "nvidia_oci_hook.kinds.oci", "nvidia_oci_hook.host"} <= served
    assert outcome == [status, stderr]


def test_the_hook_front_keeps_the_cache_beside_its_record(tmp_path: Path) -> None:
    guard = Guard(tmp_path)
    hook, _ = launchers(tmp_path / "bin")
    environment = {"NVIDIA_OCI_HOOK_CONFIG": str(settled(guard.settings))}
    outcomes = []
    for _ in range(2):
        result = run([str(hook), "hook", "prestart"], stdin=guard.stdin.encode(), env=environment)
        outcomes.append((result.returncode, result.stderr))
    state = tmp_path / "bin/state"
    assert sorted(path.name for path in state.iterdir()) == sorted([cache_file_of(INTERPRETER), "settings"])
    assert outcomes[0] == outcomes[1] and outcomes[0][0] == 1, outcomes
