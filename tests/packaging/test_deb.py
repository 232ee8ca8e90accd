"""The Debian package, built by scripts/package and installed into a throwaway Debian 12 chroot.

The chroot (mmdebstrap, variant apt, with the package's dependencies) is cached as a tarball under
.tools/deb-chroot/ keyed by what it includes, so a rerun only unpacks it. One install, then the checks in order:
the commands run, the shipped hooks.d files and an example lint, the files are where they belong, removal
leaves the conffiles, purge leaves nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest

from nvidia_oci_hook import config

pytestmark = [pytest.mark.root, pytest.mark.runtime]

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "nvidia-oci-hook"
CLEAN_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
# The package's Depends on Debian 12, what its maintainer scripts call (deb-systemd-helper), and awk, which the
# fronts read config.json with: de facto essential (lintian refuses a Depends on it), but not in an apt variant.
CHROOT_INCLUDE = ("python3", "python3-click", "python3-yaml", "python3-jsonschema", "mawk", "init-system-helpers")
CHROOT_CACHE = REPO / ".tools" / "deb-chroot"
SOURCES = "/etc/apt/sources.list.d/debian.sources"
CONFFILES = (
    "/etc/containers/containers.conf.d/50-nvidia-oci-hook.conf",
    "/etc/nvidia-oci-hook/config.yaml",
    "/etc/default/nvidia-oci-hook-metrics",
    "/etc/logrotate.d/nvidia-oci-hook",
)
TIMER_LINK = "etc/systemd/system/timers.target.wants/nvidia-oci-hook-metrics.timer"


def _version() -> str:
    for line in (REPO / "pyproject.toml").read_text(encoding="utf-8").splitlines():
        if line.startswith("version = "):
            return line.split('"')[1]
    raise AssertionError("no version in pyproject.toml")


def _run(argv: list[str], **kwargs) -> subprocess.CompletedProcess[str]:
    env = {"PATH": CLEAN_PATH, "LC_ALL": "C.UTF-8", "HOME": "/root"}
    return subprocess.run(argv, env=env, capture_output=True, text=True, check=False, **kwargs)


def _need(tool: str) -> None:
    if shutil.which(tool, path=CLEAN_PATH) is None:
        pytest.fail(f"{tool} is missing (apt-get install {tool}; scripts/setup test installs it)")


@pytest.fixture(scope="module")
def timings() -> dict[str, float]:
    found: dict[str, float] = {}
    yield found
    sys.stderr.write("\ndeb install test timings: " + ", ".join(f"{k} {v:.1f}s" for k, v in found.items()) + "\n")


# The session's: the suites that install it (this one, test_deb_podman.py) run in one lane, on one worker, and
# take the one build.
@pytest.fixture(scope="session")
def deb() -> Path:
    if os.geteuid() != 0:
        pytest.fail("the package test needs root (dpkg in a chroot); run the suite as root, as CI does")
    path = REPO / "dist" / f"{PACKAGE}_{_version()}_all.deb"
    started = time.monotonic()
    # NVIDIA_OCI_HOOK_TEST_DEB=reuse: take dist/ as scripts/package left it (CI builds once, tests after).
    if os.environ.get("NVIDIA_OCI_HOOK_TEST_DEB") != "reuse" or not path.exists():
        result = _run([str(REPO / "scripts" / "package"), "deb"], cwd=REPO)
        assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    sys.stderr.write(f"\ndeb built in {time.monotonic() - started:.1f}s\n")
    assert path.exists()
    return path


def _chroot_tarball(timings: dict[str, float]) -> Path:
    _need("mmdebstrap")
    key = hashlib.sha256(" ".join(CHROOT_INCLUDE).encode() + Path(SOURCES).read_bytes()).hexdigest()[:12]
    tarball = CHROOT_CACHE / f"bookworm-apt-{key}.tar"
    if tarball.exists():
        return tarball
    started = time.monotonic()
    CHROOT_CACHE.mkdir(parents=True, exist_ok=True)
    partial = tarball.with_suffix(".partial.tar")
    result = _run(
        [
            "mmdebstrap",
            "--variant=apt",
            "--mode=root",
            "--quiet",
            f"--include={','.join(CHROOT_INCLUDE)}",
            "bookworm",
            str(partial),
            SOURCES,
        ],
    )
    assert result.returncode == 0, result.stderr[-4000:]
    partial.rename(tarball)
    timings["chroot (cold)"] = time.monotonic() - started
    return tarball


@pytest.fixture(scope="module")
def chroot(tmp_path_factory: pytest.TempPathFactory, deb: Path, timings: dict[str, float]) -> Path:
    tarball = _chroot_tarball(timings)
    started = time.monotonic()
    root = tmp_path_factory.mktemp("debian12")
    with tarfile.open(tarball) as archive:
        # filter="tar" where Python has it: device nodes and ownership kept, no warning under -W error.
        kwargs: dict[str, Any] = {"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}
        archive.extractall(root, **kwargs)
    shutil.copy(deb, root / "tmp" / deb.name)
    timings["unpack"] = time.monotonic() - started
    started = time.monotonic()
    result = _in(root, "dpkg", "-i", f"/tmp/{deb.name}")
    assert result.returncode == 0, result.stdout + result.stderr
    timings["install"] = time.monotonic() - started
    return root


def _in(root: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return _run(["chroot", str(root), *argv])


def test_commands_run(chroot: Path) -> None:
    result = _in(chroot, "nvidia-oci-hook", "--version")
    assert result.returncode == 0, result.stderr
    assert _version() in result.stdout
    # The wrapper, given nothing to do, answers as a runtime would: it exists and starts.
    assert _in(chroot, "python3", "-c", "import nvidia_oci_hook.runtime.wrapper").returncode == 0


def test_example_lints_offline(chroot: Path) -> None:
    example = "/usr/share/doc/nvidia-oci-hook/examples/gpu-container.json"
    result = _in(chroot, "nvidia-oci-hook", "lint", "--offline", example)
    # An example may carry findings (that is what it shows); the tool must read it and not fail (exit 2).
    assert result.returncode in (0, 1), result.stdout + result.stderr
    assert "internal error" not in result.stderr


def test_installed_hooks_lint(chroot: Path) -> None:
    result = _in(
        chroot,
        "nvidia-oci-hook",
        "lint",
        "--format",
        "json",
        "/usr/share/containers/oci/hooks.d/nvidia-oci-hook-guard.json",
        "/usr/share/nvidia-oci-hook/hooks.d/nvidia-oci-hook-precreate.json",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    codes = sorted(
        (finding["code"], os.path.basename(entry["path"]))
        for entry in json.loads(result.stdout)["files"]
        for finding in entry["findings"]
    )
    assert codes == [("HKD109", "nvidia-oci-hook-precreate.json")], result.stdout


def test_package_contents(chroot: Path) -> None:
    listed = set(_in(chroot, "dpkg", "-L", PACKAGE).stdout.split())
    for path in (
        "/usr/bin/nvidia-oci-hook",
        "/usr/bin/nvidia-oci-runtime",
        "/usr/share/containers/oci/hooks.d/nvidia-oci-hook-guard.json",
        "/usr/share/nvidia-oci-hook/hooks.d/nvidia-oci-hook-precreate.json",
        *CONFFILES,
        "/lib/systemd/system/nvidia-oci-hook-cdi-reconcile.path",
        "/lib/systemd/system/nvidia-oci-hook-cdi-reconcile.service",
        "/lib/systemd/system/nvidia-oci-hook-metrics.service",
        "/lib/systemd/system/nvidia-oci-hook-metrics.timer",
        "/lib/udev/rules.d/71-nvidia-oci-hook.rules",
        "/usr/share/man/man1/nvidia-oci-hook.1.gz",
        "/usr/share/man/man1/nvidia-oci-runtime.1.gz",
        "/usr/share/bash-completion/completions/nvidia-oci-hook",
        "/usr/share/zsh/vendor-completions/_nvidia-oci-hook",
        "/usr/share/fish/vendor_completions.d/nvidia-oci-hook.fish",
        "/usr/share/doc/nvidia-oci-hook/copyright",
        "/usr/share/doc/nvidia-oci-hook/changelog.gz",
        "/usr/share/doc/nvidia-oci-hook/examples/gpu-container.json",
    ):
        assert path in listed, path
    # cri-o must never find the precreate stage in a directory it reads.
    assert not [p for p in listed if p.startswith("/usr/share/containers/oci/hooks.d/") and "precreate" in p]
    # Both commands are sh fronts that start Debian's python3 from the package's site directory only when needed.
    for command in ("nvidia-oci-hook", "nvidia-oci-runtime"):
        front = (chroot / "usr/bin" / command).read_text(encoding="utf-8")
        assert front.splitlines()[0] == "#!/bin/sh", front
        assert "exec '/usr/bin/python3' -IS -c " in front
        assert 'sys.path.append("/usr/lib/python3/dist-packages")' in front
        assert "state='/run/nvidia-oci-hook'" in front
    dispatcher = (chroot / "usr/bin/nvidia-oci-runtime").read_text(encoding="utf-8")
    assert "config='/etc/nvidia-oci-hook/config.yaml'" in dispatcher
    conffiles = _in(chroot, "dpkg-query", "--showformat=${Conffiles}", "--show", PACKAGE).stdout
    assert sorted(line.split()[0] for line in conffiles.strip().splitlines()) == sorted(CONFFILES)
    # The path unit is enabled by the maintainer scripts (no systemd runs in the chroot: nothing is started).
    assert (chroot / "etc/systemd/system/paths.target.wants/nvidia-oci-hook-cdi-reconcile.path").is_symlink()
    # So is the metrics timer, which the maintainer scripts also start (and stop on removal) where systemd runs.
    assert os.readlink(chroot / TIMER_LINK) == "/lib/systemd/system/nvidia-oci-hook-metrics.timer"
    postinst = (chroot / "var/lib/dpkg/info/nvidia-oci-hook.postinst").read_text(encoding="utf-8")
    assert "deb-systemd-helper unmask 'nvidia-oci-hook-metrics.timer'" in postinst
    assert "deb-systemd-invoke $_dh_action 'nvidia-oci-hook-metrics.timer'" in postinst
    assert "nvidia-oci-hook-metrics.service" not in postinst  # started by the timer alone
    prerm = (chroot / "var/lib/dpkg/info/nvidia-oci-hook.prerm").read_text(encoding="utf-8")
    assert "deb-systemd-invoke stop 'nvidia-oci-hook-metrics.timer'" in prerm
    metrics_env = (chroot / "etc/default/nvidia-oci-hook-metrics").read_text(encoding="utf-8")
    assert "\nTEXTFILE_DIR=/var/lib/prometheus/node-exporter\n" in metrics_env
    rotate = (chroot / "etc/logrotate.d/nvidia-oci-hook").read_text(encoding="utf-8")
    assert "/var/log/nvidia-oci-hook.log {" in rotate and "copytruncate" not in rotate.split("{", 1)[1]
    dropin = (chroot / CONFFILES[0].lstrip("/")).read_text(encoding="utf-8")
    assert '"/usr/share/nvidia-oci-hook/hooks.d"' in dropin and '"/usr/share/containers/oci/hooks.d"' in dropin


def test_metrics_units_verify(chroot: Path, tmp_path: Path) -> None:
    """systemd-analyze verify on the installed metrics units, with this machine's systemd (the chroot has none).
    The one thing it cannot see from here is the command, which lives in the chroot: that error alone is left."""
    _need("systemd-analyze")
    units = []
    for kind in ("service", "timer"):
        units.append(tmp_path / f"nvidia-oci-hook-metrics.{kind}")
        shutil.copy(chroot / f"lib/systemd/system/nvidia-oci-hook-metrics.{kind}", units[-1])
    result = _run(["systemd-analyze", "verify", "--man=no", *map(str, units)], cwd=tmp_path)
    command = "/usr/bin/nvidia-oci-hook"
    assert os.access(chroot / command.lstrip("/"), os.X_OK)
    expected = (
        ""
        if os.access(command, os.X_OK)
        else (f"nvidia-oci-hook-metrics.service: Command {command} is not executable: No such file or directory\n")
    )
    assert (result.stdout, result.stderr) == ("", expected), result


def test_remove_then_purge(chroot: Path) -> None:
    # A log written by the tool and a locally changed config: remove keeps the config, purge removes both.
    (chroot / "var/log/nvidia-oci-hook.log").write_text("{}\n", encoding="utf-8")
    config_file = chroot / "etc/nvidia-oci-hook/config.yaml"
    config_file.write_text(config_file.read_text(encoding="utf-8") + "log:\n  syslog: false\n", encoding="utf-8")
    changed = config_file.read_text(encoding="utf-8")
    # An upgrade (the same package installed again) keeps the locally changed configuration, without a prompt.
    debs = [name for name in os.listdir(chroot / "tmp") if name.endswith(".deb")]
    result = _in(chroot, "dpkg", "-i", f"/tmp/{debs[0]}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert config_file.read_text(encoding="utf-8") == changed
    # The record the sh fronts keep, as a container start through them leaves it.
    (chroot / "run/nvidia-oci-hook").mkdir(parents=True, exist_ok=True, mode=0o700)
    (chroot / "run/nvidia-oci-hook/settings").write_text("absent\n", encoding="utf-8")
    # The metrics file the service wrote: remove takes it, or node_exporter would serve its last values for ever.
    textfile = chroot / "var/lib/prometheus/node-exporter"
    textfile.mkdir(parents=True, exist_ok=True)
    (textfile / "nvidia-oci-hook.prom").write_text("nvidia_oci_hook_build_info 1\n", encoding="utf-8")
    (textfile / "other.prom").write_text("other 1\n", encoding="utf-8")
    result = _in(chroot, "dpkg", "--remove", PACKAGE)
    assert result.returncode == 0, result.stdout + result.stderr
    assert not (chroot / "run/nvidia-oci-hook").exists(), "remove leaves the fronts' record on /run"
    assert os.listdir(textfile) == ["other.prom"]
    status = _in(chroot, "dpkg-query", "--showformat=${Status}", "--show", PACKAGE).stdout
    assert status == "deinstall ok config-files", status
    left = sorted(_in(chroot, "dpkg", "-L", PACKAGE).stdout.split())
    assert [p for p in left if (chroot / p.lstrip("/")).is_file()] == sorted(CONFFILES)
    assert not (chroot / "usr/bin/nvidia-oci-hook").exists()
    assert not (chroot / "usr/lib/python3/dist-packages/nvidia_oci_hook").exists()
    result = _in(chroot, "dpkg", "--purge", PACKAGE)
    assert result.returncode == 0, result.stdout + result.stderr
    assert _in(chroot, "dpkg-query", "--show", PACKAGE).returncode != 0
    for gone in (
        "etc/nvidia-oci-hook",
        *(path.lstrip("/") for path in CONFFILES),
        "var/log/nvidia-oci-hook.log",
        "etc/systemd/system/paths.target.wants/nvidia-oci-hook-cdi-reconcile.path",
        TIMER_LINK,
        "usr/share/nvidia-oci-hook",
        "usr/share/doc/nvidia-oci-hook",
    ):
        assert not (chroot / gone).exists(), gone


def test_default_config_lists_every_key(tmp_path: Path) -> None:
    """The shipped config.yaml names every key, and with every line uncommented it is exactly the defaults."""
    result = _run([sys.executable, str(REPO / "packaging" / "generate-docs"), str(tmp_path)])
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "config.yaml").read_text(encoding="utf-8")
    assert config.load_settings(str(tmp_path / "config.yaml"), environ={}).__dict__ == config.Settings().__dict__
    # A setting line is `#`, the YAML indentation, `key: value`; documentation lines are `# ...` or `#  # ...`.
    setting = re.compile(r"^#( *)([a-z_]+):")
    uncommented = "\n".join(line[1:] for line in text.splitlines() if setting.match(line))
    for key in config.SETTINGS:
        assert f"{key.name.split('.')[-1]}:" in uncommented, key.name
    (tmp_path / "all.yaml").write_text(uncommented + "\n", encoding="utf-8")
    assert config.load_settings(str(tmp_path / "all.yaml"), environ={}).__dict__ == config.Settings().__dict__
    for page in ("nvidia-oci-hook.1", "nvidia-oci-runtime.1"):
        assert (tmp_path / "man" / page).read_text(encoding="utf-8").startswith(".TH ")
