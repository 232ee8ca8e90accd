"""The RPMs (packaging/rpm): built on Debian 12 with rpmbuild, installed into an empty root, run on Python 3.9.

The EL packages they depend on (python3, python3-click, ...) do not exist here, so `rpm -i --nodeps`; the code
then runs on pyenv's 3.9: the EL9 package with click/PyYAML/jsonschema from .venv-py39, the EL8 package with
nothing but its own bundled vendor directory (-I -S), which proves the bundle complete. Set
NVIDIA_OCI_HOOK_RPM_REUSE=1 to test the RPMs already in dist/ instead of building them (about 6 s).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIST = os.path.join(ROOT, "dist")
ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C.UTF-8", "HOME": os.environ.get("HOME", "/root")}
PYENV = os.path.join(os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv")), "versions")

sys.path.insert(0, ROOT)
from nvidia_oci_hook import __version__  # noqa: E402

# Needs rpm and rpmlint from Debian (scripts/setup test installs them); a missing tool fails, never skips.
pytestmark = [pytest.mark.root, pytest.mark.runtime]


def _python39() -> str:
    found = sorted(glob.glob(os.path.join(PYENV, "3.9.*", "bin", "python3.9")))
    if not found:
        pytest.fail("no pyenv Python 3.9 (scripts/setup test needs one)")
    return found[-1]


def _rpm(target: str) -> str:
    return os.path.join(DIST, f"nvidia-oci-hook-{__version__}-1.{target}.noarch.rpm")


@pytest.fixture(scope="module")
def rpms() -> dict[str, str]:
    if not (os.environ.get("NVIDIA_OCI_HOOK_RPM_REUSE") and all(os.path.exists(_rpm(t)) for t in ("el8", "el9"))):
        result = subprocess.run(
            [os.path.join(ROOT, "packaging", "rpm", "build")], env=ENV, capture_output=True, text=True, timeout=300
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert " 0 errors, 0 warnings" in result.stdout, result.stdout
    return {target: _rpm(target) for target in ("el8", "el9")}


def _install(rpm: str, root: str) -> None:
    # The scriptlets need a /bin/sh; systemctl is absent, which they must tolerate.
    os.makedirs(os.path.join(root, "bin"))
    busybox = shutil.which("busybox", path=ENV["PATH"])
    if busybox is None:
        pytest.fail("busybox-static is not installed (scripts/setup installs it)")
    shutil.copy(busybox, os.path.join(root, "bin", "busybox"))
    os.symlink("busybox", os.path.join(root, "bin", "sh"))
    result = subprocess.run(
        ["rpm", "--force-debian", "--root", root, "--dbpath", "/var/lib/rpm", "-i", "--nodeps", rpm],
        env=ENV,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0 and not result.stderr, result.stdout + result.stderr
    verify = subprocess.run(
        ["rpm", "--root", root, "--dbpath", "/var/lib/rpm", "-V", "--nodeps", "nvidia-oci-hook"],
        env=ENV,
        capture_output=True,
        text=True,
    )
    assert (verify.returncode, verify.stdout, verify.stderr) == (0, "", "")


def _run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, **kwargs)  # type: ignore[call-overload]


def test_metadata(rpms: dict[str, str]) -> None:
    el9 = _run(["rpm", "-qp", "--requires", rpms["el9"]], env=ENV).stdout.split("\n")
    for needed in (
        "python(abi) = 3.9",
        "python3-click",
        "python3-pyyaml",
        "python3-jsonschema",
        "python3-tomli",
        "/usr/bin/python3.9",
    ):
        assert needed in el9
    el8 = _run(["rpm", "-qp", "--requires", rpms["el8"]], env=ENV).stdout.split("\n")
    assert "python3.11" in el8 and "/usr/bin/python3.11" in el8
    assert "/usr/bin/awk" in el8 and "/usr/bin/awk" in el9  # the fronts' one reader of config.json
    assert not [line for line in el8 if "click" in line or "python(abi)" in line]
    files = _run(["rpm", "-qp", "--list", rpms["el8"]], env=ENV).stdout.split("\n")
    assert not [name for name in files if name.endswith((".so", ".c", ".pyx"))]
    assert "/usr/lib/udev/rules.d/71-nvidia-oci-hook.rules" in files
    for target in ("el8", "el9"):
        files = _run(["rpm", "-qp", "--list", rpms[target]], env=ENV).stdout.split("\n")
        for unit in ("nvidia-oci-hook-metrics.service", "nvidia-oci-hook-metrics.timer"):
            assert f"/usr/lib/systemd/system/{unit}" in files, (target, unit)
        assert "/usr/lib/systemd/system-preset/50-nvidia-oci-hook.preset" in files
        configs = _run(["rpm", "-qp", "--configfiles", rpms[target]], env=ENV).stdout.split()
        assert configs == [
            "/etc/containers/containers.conf.d/50-nvidia-oci-hook.conf",
            "/etc/logrotate.d/nvidia-oci-hook",
            "/etc/nvidia-oci-hook/config.yaml",
            "/etc/sysconfig/nvidia-oci-hook-metrics",
        ], target
        # The scriptlets enable the timer through its preset on install, stop and disable it on erase, restart
        # it on upgrade.
        scripts = _run(["rpm", "-qp", "--scripts", rpms[target]], env=ENV).stdout
        post, preun, postun = (scripts.split(f"{name} scriptlet")[1].split("scriptlet")[0] for name in (
            "postinstall", "preuninstall", "postuninstall"))  # fmt: skip
        assert "preset" in post and "nvidia-oci-hook-metrics.timer" in post, post
        assert "disable --now" in preun and "nvidia-oci-hook-metrics.timer" in preun, preun
        assert "try-restart" in postun and "nvidia-oci-hook-metrics.timer" in postun, postun


def test_el9_installs_and_runs_on_python39(rpms: dict[str, str], tmp_path: os.PathLike[str]) -> None:
    python = _python39()
    root = os.path.join(str(tmp_path), "root")
    _install(rpms["el9"], root)
    site = os.path.join(root, "usr/lib/python3.9/site-packages")
    with open(
        os.path.join(root, "usr/lib/systemd/system-preset/50-nvidia-oci-hook.preset"), encoding="utf-8"
    ) as handle:
        assert "enable nvidia-oci-hook-metrics.timer\n" in handle.read()
    with open(os.path.join(root, "etc/sysconfig/nvidia-oci-hook-metrics"), encoding="utf-8") as handle:
        assert "\nTEXTFILE_DIR=/var/lib/prometheus/node-exporter\n" in handle.read()
    with open(os.path.join(root, "etc/logrotate.d/nvidia-oci-hook"), encoding="utf-8") as handle:
        assert "/var/log/nvidia-oci-hook.log {" in handle.read()
    assert sorted(glob.glob(os.path.join(site, "nvidia_oci_hook", "__pycache__", "entry.*.pyc"))) == [
        os.path.join(site, "nvidia_oci_hook", "__pycache__", "entry.cpython-39.pyc")
    ]
    with open(os.path.join(root, "usr/bin/nvidia-oci-hook"), encoding="utf-8") as handle:
        launcher = handle.read()
    assert launcher.startswith("#!/bin/sh\n") and "exec '/usr/bin/python3.9' -IS -c " in launcher
    assert 'sys.path.append("/usr/lib/python3.9/site-packages")' in launcher
    deps = glob.glob(os.path.join(ROOT, ".venv-py39", "lib", "python3.9", "site-packages"))
    if not deps:
        pytest.fail(".venv-py39 is missing (scripts/setup test builds it)")
    env = dict(ENV, PYTHONPATH=f"{site}:{deps[0]}", PYTHONDONTWRITEBYTECODE="1")
    version = _run([python, "-m", "nvidia_oci_hook", "--version"], env=env, cwd=str(tmp_path))
    assert version.returncode == 0 and __version__ in version.stdout, version.stdout + version.stderr
    # The shipped hook files, linted by the installed package.
    hooks = [
        os.path.join(root, "usr/share/containers/oci/hooks.d/nvidia-oci-hook-guard.json"),
        os.path.join(root, "usr/share/nvidia-oci-hook/hooks.d/nvidia-oci-hook-precreate.json"),
    ]
    lint = _run([python, "-m", "nvidia_oci_hook", "lint", "--host-root", root, *hooks], env=env, cwd=str(tmp_path))
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_el8_bundle_is_complete_on_python39(rpms: dict[str, str], tmp_path: os.PathLike[str]) -> None:
    python = _python39()
    root = os.path.join(str(tmp_path), "root")
    _install(rpms["el8"], root)
    parent = os.path.join(root, "usr/lib/nvidia-oci-hook")
    with open(os.path.join(root, "usr/bin/nvidia-oci-hook"), encoding="utf-8") as handle:
        launcher = handle.read()
    assert launcher.startswith("#!/bin/sh\n") and "exec '/usr/bin/python3.11' -IS -c " in launcher
    assert 'sys.path.append("/usr/lib/nvidia-oci-hook")\nsys.path.append("/usr/lib/nvidia-oci-hook/vendor")\n' in (
        launcher
    )
    # The code the front hands every command to, its paths moved into the root, on 3.9 with -I -S: no
    # site-packages at all; the CLI then runs site.main(), so -S alone would not keep site-packages out: hide
    # them with an empty prefix. The code drops argv[0] ("-c"): "-" stands for the front's own path.
    program = launcher.split("-IS -c '", 1)[1].split('\' "$0"', 1)[0]
    program = program.replace('"/usr/lib/nvidia-oci-hook', '"' + parent)
    check = (
        "import sys\n"
        "import site; site.ENABLE_USER_SITE = False; site.PREFIXES[:] = []\n"
        "try:\n" + "".join(f"    {line}\n" for line in program.strip().split("\n")) + "finally:\n"
        f"    assert all(not m.__file__ or m.__file__.startswith(({parent!r}, sys.base_prefix)) for m in"
        " list(sys.modules.values()) if getattr(m, '__file__', None)), 'imported from outside the bundle'\n"
    )
    env = {"PATH": ENV["PATH"]}
    version = _run([python, "-I", "-S", "-c", check, "-", "--version"], env=env, cwd=str(tmp_path))
    assert version.returncode == 0 and __version__ in version.stdout, version.stdout + version.stderr
    hook = os.path.join(root, "usr/share/containers/oci/hooks.d/nvidia-oci-hook-guard.json")
    lint = _run([python, "-I", "-S", "-c", check, "-", "lint", "--host-root", root, hook], env=env, cwd=str(tmp_path))
    assert (lint.returncode, lint.stdout) == (0, "no problems in 1 file\n"), lint.stdout + lint.stderr
    # Every bundled dependency imports from the bundle on 3.9 (jsonschema's validators, yaml, tomli).
    imports = _run(
        [
            python,
            "-I",
            "-S",
            "-c",
            f"import sys; sys.path.append({os.path.join(parent, 'vendor')!r}); "
            "import click, yaml, jsonschema, tomli; jsonschema.Draft7Validator({'type': 'object'}).validate({}); "
            "print(yaml.safe_load('a: [1]'), yaml.__with_libyaml__, jsonschema.__version__)",
        ],
        env=env,
        cwd=str(tmp_path),
    )
    assert imports.returncode == 0 and imports.stdout.startswith("{'a': [1]} False 4.17.3"), (
        imports.stdout + imports.stderr
    )


def test_el9_upgrade_keeps_changed_configuration_and_erase_leaves_only_it(
    rpms: dict[str, str], tmp_path: os.PathLike[str]
) -> None:
    root = os.path.join(str(tmp_path), "root")
    _install(rpms["el9"], root)
    config = os.path.join(root, "etc/nvidia-oci-hook/config.yaml")
    with open(config, "a", encoding="utf-8") as handle:
        handle.write("log:\n  syslog: false\n")
    with open(config, encoding="utf-8") as handle:
        changed = handle.read()
    rpm = ["rpm", "--force-debian", "--root", root, "--dbpath", "/var/lib/rpm", "--nodeps"]
    upgrade = subprocess.run([*rpm, "-U", "--replacepkgs", rpms["el9"]], env=ENV, capture_output=True, text=True)
    assert upgrade.returncode == 0, upgrade.stdout + upgrade.stderr
    with open(config, encoding="utf-8") as handle:
        assert handle.read() == changed  # %config(noreplace)
    erase = subprocess.run([*rpm, "-e", "nvidia-oci-hook"], env=ENV, capture_output=True, text=True)
    assert erase.returncode == 0, erase.stdout + erase.stderr
    left = sorted(
        os.path.relpath(os.path.join(directory, name), root)
        for directory, _, names in os.walk(root)
        for name in names
        if not os.path.relpath(directory, root).startswith(("var/lib/rpm", "bin"))
    )
    assert left == ["etc/nvidia-oci-hook/config.yaml.rpmsave"], left
