"""`configure --runtime crio|containerd|podman` on fake node roots: what it writes, idempotence, --dry-run,
--undo removing exactly its own, and the engine's own loader (this project's) accepting the result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_cli import run

CRIO_CONF = """\
# the node's own cri-o configuration, with a comment to keep
[crio.runtime]
default_runtime = "crun"
hooks_dir = ["/usr/share/containers/oci/hooks.d", "/opt/hooks"]
"""
CONTAINERD = """\
# containerd config, managed by hand
version = 2

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = true   # keep this comment
"""


def _root(tmp_path: Path, files: dict[str, str], runtime: str = "/usr/bin/nvidia-oci-runtime") -> Path:
    """A node with the files, and the wrapper where the packages install it (runtime "": none at all)."""
    root = tmp_path / "node"
    for path, text in files.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    if runtime:
        program = root / runtime.lstrip("/")
        program.parent.mkdir(parents=True, exist_ok=True)
        program.write_text("#!/bin/sh\n")
        program.chmod(0o755)
    root.mkdir(parents=True, exist_ok=True)
    return root


def _configure(capsys: pytest.CaptureFixture[str], root: Path, *args: str) -> tuple[int, str, str]:
    return run(capsys, "configure", "--host-root", str(root), *args)


def test_crio_drop_in_keeps_existing_hooks_dirs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _root(tmp_path, {"/etc/crio/crio.conf": CRIO_CONF})
    status, out, _ = _configure(capsys, root, "--runtime", "crio")
    assert status == 0 and "crio: did write /etc/crio/crio.conf.d/99-nvidia-oci-hook.conf" in out
    text = (root / "etc/crio/crio.conf.d/99-nvidia-oci-hook.conf").read_text()
    assert 'hooks_dir = ["/usr/share/containers/oci/hooks.d", "/opt/hooks", "/etc/containers/oci/hooks.d"]' in text
    assert 'runtime_path = "/usr/bin/nvidia-oci-runtime"' in text
    assert (root / "etc/crio/crio.conf").read_text() == CRIO_CONF
    # cri-o's loader, as this project emulates it, reads the merged result without an error.
    status, out, _ = run(capsys, "lint", "--offline", "--format", "json", str(root / "etc/crio"))
    assert json.loads(out)["summary"]["error"] == 0, out
    status, out, _ = _configure(capsys, root, "--runtime", "crio")
    assert (status, out) == (0, "crio: nothing to change\n")
    status, out, _ = _configure(capsys, root, "--runtime", "crio", "--undo")
    assert status == 0 and not (root / "etc/crio/crio.conf.d/99-nvidia-oci-hook.conf").exists()
    assert (root / "etc/crio/crio.conf").read_text() == CRIO_CONF


def test_containerd_imports_line_and_drop_in(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _root(tmp_path, {"/etc/containerd/config.toml": CONTAINERD})
    status, out, _ = _configure(capsys, root, "--runtime", "containerd", "--dry-run")
    assert status == 0 and '+imports = ["/etc/containerd/conf.d/*.toml"]' in out
    assert not (root / "etc/containerd/conf.d").exists()
    status, out, _ = _configure(capsys, root, "--runtime", "containerd")
    config = (root / "etc/containerd/config.toml").read_text()
    assert config.startswith("# containerd config, managed by hand\nversion = 2\n# Added by nvidia-oci-hook configure")
    assert config.endswith("SystemdCgroup = true   # keep this comment\n")
    drop_in = (root / "etc/containerd/conf.d/99-nvidia-oci-hook.toml").read_text()
    assert 'BinaryName = "/usr/bin/nvidia-oci-runtime"' in drop_in and "SystemdCgroup = true" in drop_in
    assert 'container_annotations = ["cdi.k8s.io/*"]' in drop_in
    status, out, _ = _configure(capsys, root, "--runtime", "containerd")
    assert out == "containerd: nothing to change\n"
    status, out, _ = _configure(capsys, root, "--runtime", "containerd", "--undo")
    assert (root / "etc/containerd/config.toml").read_text() == CONTAINERD
    assert not (root / "etc/containerd/conf.d/99-nvidia-oci-hook.toml").exists()


def test_podman_drop_in(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _root(tmp_path, {})
    status, _, _ = _configure(capsys, root, "--runtime", "podman")
    text = (root / "etc/containers/containers.conf.d/50-nvidia-oci-hook-runtime.conf").read_text()
    assert status == 0 and 'nvidia = ["/usr/bin/nvidia-oci-runtime"]' in text
    assert 'hooks_dir = ["/usr/share/containers/oci/hooks.d", "/usr/share/nvidia-oci-hook/hooks.d"]' in text


@pytest.mark.parametrize(
    ("files", "engine", "message"),
    [
        ({}, "containerd", "config.toml does not exist"),
        ({"/etc/containerd/config.toml": "[plugins]\n"}, "containerd", "is config version 1"),
        (
            {"/etc/containerd/config.toml": 'version = 2\nimports = ["/x/*.toml"]\n'},
            "containerd",
            "add it to that list",
        ),
        ({"/etc/crio/crio.conf": "[crio.runtime\n"}, "crio", "invalid TOML"),
        ({"/etc/crio/crio.conf.d/99-nvidia-oci-hook.conf": "mine\n"}, "crio", "was not written by configure"),
    ],
)
def test_refusals_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], files: dict[str, str], engine: str, message: str
) -> None:
    status, out, err = _configure(capsys, _root(tmp_path, files), "--runtime", engine)
    assert status == 2 and out == "" and message in err and err.count("\n") == 1


def test_undo_leaves_files_it_did_not_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _root(tmp_path, {"/etc/crio/crio.conf.d/99-nvidia-oci-hook.conf": "someone else's\n"})
    status, out, _ = _configure(capsys, root, "--runtime", "crio", "--undo")
    assert (status, out) == (0, "crio: nothing to undo\n")
    assert (root / "etc/crio/crio.conf.d/99-nvidia-oci-hook.conf").read_text() == "someone else's\n"


@pytest.mark.parametrize("engine", ["crio", "containerd", "podman"])
def test_the_runtime_written_is_one_that_exists(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], engine: str
) -> None:
    files = {"/etc/containerd/config.toml": CONTAINERD} if engine == "containerd" else {}
    # Not installed at all: refused, since the engine would drop the handler and every pod asking for it fail.
    root = _root(tmp_path / "none", files, runtime="")
    status, out, err = _configure(capsys, root, "--runtime", engine)
    assert status == 2 and out == "" and err.count("\n") == 1, err
    assert "no nvidia-oci-runtime in" in err and "would drop a handler whose runtime is missing" in err
    assert not (root / "etc/crio/crio.conf.d").exists() and not (root / "etc/containerd/conf.d").exists()
    # Installed by hand under /usr/local/bin: that path is written.
    root = _root(tmp_path / "local", files, runtime="/usr/local/bin/nvidia-oci-runtime")
    status, out, _ = _configure(capsys, root, "--runtime", engine)
    written = "\n".join(path.read_text() for path in root.rglob("*nvidia-oci-hook*") if path.is_file())
    assert status == 0 and '"/usr/local/bin/nvidia-oci-runtime"' in written and "/usr/bin/nvidia-oci" not in written


def test_a_guard_file_naming_a_missing_program_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    guard = {"version": "1.0.0", "hook": {"path": "/usr/bin/nvidia-oci-hook"}, "when": {"always": True},
             "stages": ["createRuntime"]}  # fmt: skip
    root = _root(tmp_path, {"/usr/share/containers/oci/hooks.d/nvidia-oci-hook-guard.json": json.dumps(guard)})
    status, _, err = _configure(capsys, root, "--runtime", "crio")
    assert status == 2 and "runs /usr/bin/nvidia-oci-hook, which does not exist" in err, err
    (root / "usr/bin/nvidia-oci-hook").write_text("#!/bin/sh\n")
    status, _, _ = _configure(capsys, root, "--runtime", "crio")
    assert status == 0
