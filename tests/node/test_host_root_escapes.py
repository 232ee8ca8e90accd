"""Every command that takes --host-root stays inside it: on node roots whose links and files lead out (absolute
and climbing links, links in the last component, loops, ".." in state files, imports, command lines, CDI specs
and hooks.d files), each command, run as the real CLI under strace, looks up nothing outside the root but what the
interpreter itself reads, and leaves the outside byte for byte as it was. A host root mounted read-only is refused
in one line before anything is tried.

The layouts and the harness are in escapes.py; the no-escape layout is the baseline that proves the harness.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.helpers import FakeHost
from tests.node.escapes import (
    CASES,
    STRACE,
    Case,
    Outcome,
    close_fork_servers,
    given_files,
    run_case,
    run_plain,
    snapshot,
    snapshot_changes,
    working_node,
)

pytestmark = pytest.mark.root


@pytest.fixture(scope="module")
def outcomes(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Future[Outcome]]:
    """The selected cases, run at once: each one is a node build and one or two traced commands, and strace makes
    them slow enough that running them side by side is most of the module's time saved."""
    if STRACE is None:
        pytest.skip("strace is not installed (scripts/setup test installs it)")
    if os.geteuid() != 0:
        pytest.fail("this test needs root (mknod); run the suite as root, as CI does")
    wanted: dict[str, Case] = {}
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        if getattr(item, "originalname", None) == "test_stays_inside" and callspec is not None:
            case = callspec.params["case"]
            wanted[case.id] = case
    pool = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2))
    request.addfinalizer(close_fork_servers)
    request.addfinalizer(pool.shutdown)
    return {key: pool.submit(run_case, case, tmp_path_factory.mktemp(key)) for key, case in wanted.items()}


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.id)
def test_stays_inside(case: Case, outcomes: dict[str, Future[Outcome]]) -> None:
    outcome = outcomes[case.id].result()
    if outcome.problems:
        summary = "; ".join(outcome.escaped) or "stayed inside, but"
        pytest.fail(f"{summary}\n\n" + "\n\n".join(outcome.problems), pytrace=False)


READ_ONLY_COMMANDS = {
    "doctor-fix": lambda root: ["doctor", "--host-root", root, "--fix"],
    "configure-crio": lambda root: ["configure", "--runtime", "crio", "--host-root", root],
    "cdi-reconcile": lambda root: ["cdi", "reconcile", "--host-root", root],
}


@pytest.fixture
def read_only_root(tmp_path: Path, as_root: None) -> Iterator[tuple[FakeHost, Path]]:
    """A node with work for every repair, and the same node bind-mounted read-only, as the DaemonSet mounts it."""
    node = FakeHost(tmp_path / "node")
    node.root.mkdir()
    working_node(node, "host")
    mounted = tmp_path / "mounted"
    mounted.mkdir()
    subprocess.run(["mount", "--bind", str(node.root), str(mounted)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(mounted)], check=True)
        yield node, mounted
    finally:
        subprocess.run(["umount", str(mounted)], check=True)


@pytest.mark.parametrize("command", sorted(READ_ONLY_COMMANDS))
def test_a_read_only_host_root_is_refused_in_one_line(
    command: str, read_only_root: tuple[FakeHost, Path], tmp_path: Path
) -> None:
    node, mounted = read_only_root
    settings, _ = given_files(tmp_path / "given", ("nvidia.com/gpu=0",))
    before = snapshot(node.root)
    result = run_plain(["--config", str(settings), *READ_ONLY_COMMANDS[command](str(mounted))])
    lines = result.stderr.splitlines()
    assert result.returncode == 2, f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    # The words, not a path that happens to hold them: the kernel's EROFS text alone is "Read-only file system".
    said = lines[0].replace(str(mounted), "ROOT") if len(lines) == 1 else ""
    assert re.search(r"\bread-only\b", said), result.stderr
    assert "internal error" not in lines[0], result.stderr
    assert snapshot_changes(before, snapshot(node.root)) == []
