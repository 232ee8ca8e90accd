"""The nvidia-oci-hook-lint hook of .pre-commit-hooks.yaml, run by the real pre-commit in a repository of manifests:
a manifest with a finding fails the commit with the finding's code and line, its fix passes, and YAML and JSON
files that are no manifests (a CI workflow, a package.json) pass without a word.

pre-commit builds the hook's virtualenv from PyPI once for the module (click, PyYAML, jsonschema and this project:
ten seconds to a minute, by how fast the index answers); the hook repository is a commit of this working tree,
uncommitted changes included, so the hook under test is the one being edited."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.kubernetes.cases import DRA_PLUGIN, DRA_PLUGIN_MOUNT_LINE

REPOSITORY = Path(__file__).resolve().parents[2]
# Not resolved: a virtualenv's python is a link to the system's, and its pre-commit is beside the link.
PRE_COMMIT = Path(sys.executable).with_name("pre-commit")
HOOK = "nvidia-oci-hook-lint"

pytestmark = pytest.mark.skipif(not PRE_COMMIT.is_file(), reason=f"pre-commit is not installed ({PRE_COMMIT})")

DRA_DRIVER, MOUNT_LINE = DRA_PLUGIN, DRA_PLUGIN_MOUNT_LINE

# Read by content, as `lint` does without --kind, these are a CDI spec and a config.json, each with errors.
WORKFLOW = """\
name: CI
on:
  push:
    branches: [main]
jobs:
  test:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: make test
"""
PACKAGE_JSON = '{"name": "dashboards", "version": "1.0.0", "private": true}\n'


def _git(cwd: Path, *args: str, env: dict[str, str]) -> str:
    # A developer's global configuration may sign commits or name no author; these repositories need neither.
    command = ["git", "-c", "user.name=test", "-c", "user.email=test@example.invalid", "-c", "commit.gpgsign=false"]
    return subprocess.run(
        [*command, *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def _environment(cache: Path) -> dict[str, str]:
    # GIT_DIR and its kin, set when the suite itself runs from a git hook, would point every git call at this
    # repository; pip's and virtualenv's caches are kept in the test's directory as pre-commit's is.
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update(
        PRE_COMMIT_HOME=str(cache / "pre-commit"),
        PIP_CACHE_DIR=str(cache / "pip"),
        VIRTUALENV_OVERRIDE_APP_DATA=str(cache / "virtualenv"),
        PRE_COMMIT_COLOR="never",
    )
    return env


def _hook_repository(destination: Path, env: dict[str, str]) -> str:
    """This working tree as pre-commit fetches a hook repository: committed, with what is not yet committed."""
    try:
        listed = _git(REPOSITORY, "ls-files", "-z", "--cached", "--others", "--exclude-standard", env=env)
    except subprocess.CalledProcessError:
        pytest.skip(f"{REPOSITORY} is not a git checkout")
    destination.mkdir()
    for name in filter(None, listed.split("\0")):
        source = REPOSITORY / name
        if not source.is_file() and not source.is_symlink():
            continue
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)
    _git(destination, "init", "-q", env=env)
    _git(destination, "add", "-A", env=env)
    _git(destination, "commit", "-q", "--no-verify", "-m", "working tree", env=env)
    return _git(destination, "rev-parse", "HEAD", env=env)


class Manifests:
    """A repository of manifests that uses the hook."""

    def __init__(self, root: Path, config: str, env: dict[str, str]) -> None:
        self.root = root
        self.env = env
        root.mkdir()
        _git(root, "init", "-q", env=env)
        self.write(".pre-commit-config.yaml", config)

    def write(self, name: str, text: str) -> None:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        _git(self.root, "add", name, env=self.env)

    def pre_commit(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(PRE_COMMIT), *args],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=600,
        )

    def run_hook(self, *files: str) -> subprocess.CompletedProcess[str]:
        # --verbose shows the hook's output when it passes too, so that "quietly" can be seen to hold.
        selection = ["--files", *files] if files else ["--all-files"]
        return self.pre_commit("run", HOOK, "--verbose", *selection)


@pytest.fixture(scope="module")
def new_repository(tmp_path_factory: pytest.TempPathFactory) -> Callable[[], Manifests]:
    """A factory of manifest repositories that share one pre-commit home, where the hook's environment is built
    once, here."""
    base = tmp_path_factory.mktemp("pre-commit")
    env = _environment(base / "cache")
    rev = _hook_repository(base / "hook", env)
    config = f"repos:\n- repo: {base / 'hook'}\n  rev: {rev}\n  hooks:\n  - id: {HOOK}\n"
    count = 0

    def new() -> Manifests:
        nonlocal count
        count += 1
        return Manifests(base / f"manifests{count}", config, env)

    started = time.monotonic()
    installed = new().pre_commit("install-hooks")
    assert installed.returncode == 0, installed.stdout + installed.stderr
    print(f"pre-commit built the hook's environment in {time.monotonic() - started:.0f}s")
    return new


def test_a_manifest_with_a_finding_fails_and_its_fix_passes(new_repository: Callable[[], Manifests]) -> None:
    repository = new_repository()
    repository.write("deploy/dra-driver.yaml", DRA_DRIVER)
    repository.write(".github/workflows/ci.yaml", WORKFLOW)

    failed = repository.run_hook()
    output = failed.stdout + failed.stderr
    assert failed.returncode == 1, output
    assert "Failed" in output and f"- hook id: {HOOK}" in output, output
    assert f"deploy/dra-driver.yaml:{MOUNT_LINE}:" in output and " K8S001 " in output, output
    assert "ci.yaml" not in output, output

    repository.write("deploy/dra-driver.yaml", DRA_DRIVER.replace("mountPath: /dev", "mountPath: /host/dev"))
    passed = repository.run_hook()
    output = passed.stdout + passed.stderr
    assert passed.returncode == 0, output
    assert "Passed" in output and "K8S" not in output, output


@pytest.mark.parametrize(
    ("name", "text"),
    [(".github/workflows/ci.yaml", WORKFLOW), ("dashboards/package.json", PACKAGE_JSON)],
    ids=["workflow", "package.json"],
)
def test_a_file_that_is_no_manifest_passes_quietly(
    new_repository: Callable[[], Manifests], name: str, text: str
) -> None:
    repository = new_repository()
    repository.write(name, text)
    repository.write("deploy/dra-driver.yaml", DRA_DRIVER.replace("mountPath: /dev", "mountPath: /host/dev"))

    result = repository.run_hook(name)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    # Passed, not "(no files to check)Skipped": the file was handed to lint, which found nothing in it.
    assert "Passed" in output and "Skipped" not in output, output
    assert f"{name}:" not in output and "error" not in output, output


def test_the_hook_manifest_is_valid() -> None:
    result = subprocess.run(
        [str(PRE_COMMIT), "validate-manifest", str(REPOSITORY / ".pre-commit-hooks.yaml")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
