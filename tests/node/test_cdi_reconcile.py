"""`cdi reconcile`: CDI spec files rewritten in place for the driver root the node really has."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from nvidia_oci_hook.cli import main as cli_main
from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.node.cdi_reconcile.command import run
from nvidia_oci_hook.node.cdi_reconcile.plans import plan_spec_dirs, write_plans
from tests.helpers import FakeHost
from tests.node.fakenodes import CONTAINER, LIB, container_driver, host_driver, seed_000, seed_003

pytestmark = [pytest.mark.root, pytest.mark.usefixtures("as_root")]

ROOTS = ("/", CONTAINER)

# What `nvidia-ctk cdi generate --driver-root /run/nvidia/driver` writes, plus an operator's comments.
SPEC_000 = f"""\
# generated for the containerized driver
cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0   # GPU 0
      hostPath: /run/nvidia/driver/dev/nvidia0
containerEdits:
  env:
  - NVIDIA_VISIBLE_DEVICES=void
  deviceNodes:
  - path: /dev/nvidiactl
    hostPath: "/run/nvidia/driver/dev/nvidiactl"
  hooks:
  - hookName: createContainer
    path: /run/nvidia/driver/usr/bin/nvidia-smi
    args: [nvidia-smi]
  mounts:
  - hostPath: '/run/nvidia/driver{LIB}/libcuda.so.1'
    containerPath: {LIB}/libcuda.so.1
    options: [ro, nosuid, nodev, bind]
"""

SPEC_000_RECONCILED = f"""\
# generated for the containerized driver
cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0   # GPU 0
      hostPath: /dev/nvidia0
containerEdits:
  env:
  - NVIDIA_VISIBLE_DEVICES=void
  deviceNodes:
  - path: /dev/nvidiactl
    hostPath: "/dev/nvidiactl"
  hooks:
  - hookName: createContainer
    path: /usr/bin/nvidia-smi
    args: [nvidia-smi]
  mounts:
  - hostPath: '{LIB}/libcuda.so.1'
    containerPath: {LIB}/libcuda.so.1
    options: [ro, nosuid, nodev, bind]
"""

CHANGES_000 = [
    "/devices/0/containerEdits/deviceNodes/0/hostPath: /run/nvidia/driver/dev/nvidia0 -> /dev/nvidia0",
    "/containerEdits/deviceNodes/0/hostPath: /run/nvidia/driver/dev/nvidiactl -> /dev/nvidiactl",
    "/containerEdits/mounts/0/hostPath: /run/nvidia/driver/usr/lib/x86_64-linux-gnu/libcuda.so.1 -> "
    "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
    "/containerEdits/hooks/0/path: /run/nvidia/driver/usr/bin/nvidia-smi -> /usr/bin/nvidia-smi",
]


def reconcile(root: Path, *args: str, dirs: tuple[str, ...] = ("/etc/cdi",)) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = run(dirs, str(root), ROOTS, "--dry-run" in args, "--diff" in args, out, err)
    return status, out.getvalue(), err.getvalue()


def spec(host: FakeHost, name: str, text: str) -> Path:
    host.text(f"/etc/cdi/{name}", text)
    return host.root / "etc/cdi" / name


def test_seed_000_yaml_spec_is_moved_to_the_host_driver(fake_host: FakeHost) -> None:
    seed_000(fake_host)
    path = spec(fake_host, "nvidia.yaml", SPEC_000)
    [plan] = plan_spec_dirs(HostView(str(fake_host.root)), ["/etc/cdi"], ROOTS)
    assert plan.path == "/etc/cdi/nvidia.yaml"
    assert sorted(plan.changes) == sorted(CHANGES_000)
    assert plan.problems == []
    assert plan.new_text == SPEC_000_RECONCILED
    assert path.read_text() == SPEC_000  # planning writes nothing

    status, out, err = reconcile(fake_host.root)
    assert status == 0
    assert out == ""
    assert path.read_text() == SPEC_000_RECONCILED
    assert err.startswith("driver root: / (driver files under /: /usr/bin/nvidia-smi, ")
    for change in CHANGES_000:
        assert f"changed /etc/cdi/nvidia.yaml: {change}\n" in err
    assert err.endswith("1 spec file: 1 changed, 0 left unchanged with problems\n")


def test_a_second_run_has_nothing_to_do_and_leaves_the_file_alone(fake_host: FakeHost) -> None:
    seed_000(fake_host)
    path = spec(fake_host, "nvidia.yaml", SPEC_000)
    assert reconcile(fake_host.root)[0] == 0
    os.utime(path, (1_000_000, 1_000_000))
    status, out, err = reconcile(fake_host.root)
    assert status == 0
    assert out == ""
    assert err.splitlines()[-1] == "nothing to do: 1 spec file in /etc/cdi"
    assert not [line for line in err.splitlines() if line.startswith(("changed", "would change"))]
    assert path.stat().st_mtime == 1_000_000
    assert path.read_text() == SPEC_000_RECONCILED


SPEC_000_JSON = """{
  "cdiVersion": "0.5.0",
  "kind": "nvidia.com/gpu",
  "devices": [
    {
      "name": "0",
      "containerEdits": {
        "deviceNodes": [{"path": "/dev/nvidia0", "hostPath": "/run/nvidia/driver/dev/nvidia0"}]
      }
    }
  ],
  "containerEdits": {
    "deviceNodes": [
      {
        "hostPath": "/run/nvidia/driver/dev/nvidiactl",
        "path": "/dev/nvidiactl"
      }
    ]
  }
}
"""


def test_seed_000_json_spec_keeps_its_layout(fake_host: FakeHost) -> None:
    seed_000(fake_host)
    path = spec(fake_host, "nvidia.json", SPEC_000_JSON)
    status, _, err = reconcile(fake_host.root)
    assert status == 0, err
    assert path.read_text() == SPEC_000_JSON.replace("/run/nvidia/driver/dev/", "/dev/")
    assert json.loads(path.read_text())["containerEdits"]["deviceNodes"][0] == {
        "hostPath": "/dev/nvidiactl",
        "path": "/dev/nvidiactl",
    }
    assert reconcile(fake_host.root)[2].splitlines()[-1] == "nothing to do: 1 spec file in /etc/cdi"


SPEC_FOR_HOST = f"""\
cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: all
  containerEdits:
    deviceNodes:
    - {{path: /dev/nvidia0, hostPath: /dev/nvidia0}}
    - path: /dev/nvidiactl
containerEdits:
  mounts:
  - hostPath: {LIB}/libcuda.so.1
    containerPath: {LIB}/libcuda.so.1
"""


def test_container_driver_node_moves_host_paths_under_the_driver_container(fake_host: FakeHost) -> None:
    container_driver(fake_host)
    path = spec(fake_host, "nvidia.yaml", SPEC_FOR_HOST)
    status, _, err = reconcile(fake_host.root)
    assert status == 0, err
    assert path.read_text() == (
        f"""\
cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: all
  containerEdits:
    deviceNodes:
    - {{path: /dev/nvidia0, hostPath: /run/nvidia/driver/dev/nvidia0}}
    - path: /dev/nvidiactl
      hostPath: /run/nvidia/driver/dev/nvidiactl
containerEdits:
  mounts:
  - hostPath: /run/nvidia/driver{LIB}/libcuda.so.1
    containerPath: {LIB}/libcuda.so.1
"""
    )
    assert (
        "changed /etc/cdi/nvidia.yaml: /devices/0/containerEdits/deviceNodes/1/hostPath: (unset) -> "
        "/run/nvidia/driver/dev/nvidiactl\n" in err
    )
    assert reconcile(fake_host.root)[2].splitlines()[-1] == "nothing to do: 1 spec file in /etc/cdi"


def test_whole_components_only(fake_host: FakeHost) -> None:
    host_driver(fake_host)
    fake_host.file("/usr/lib/x.so")
    text = (
        "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: '0'\n  containerEdits:\n    mounts:\n"
        "    - {hostPath: /run/nvidia/driverX/usr/lib/x.so, containerPath: /usr/lib/x.so}\n"
    )
    path = spec(fake_host, "nvidia.yaml", text)
    status, _, err = reconcile(fake_host.root)
    assert status == 1
    assert path.read_text() == text
    assert (
        "problem /etc/cdi/nvidia.yaml: /devices/0/containerEdits/mounts/0/hostPath: mount source (for /usr/lib/x.so) "
        "/run/nvidia/driverX/usr/lib/x.so does not exist on the host, nor under the driver root /; left unchanged\n"
    ) in err


FULLY_SPECIFIED = """\
cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes:
    - path: /dev/nvidia0
      type: c
      major: 195
      minor: 0
"""


def test_host_path_added_where_the_host_has_the_same_device(fake_host: FakeHost) -> None:
    host_driver(fake_host)
    path = spec(fake_host, "nvidia.yaml", FULLY_SPECIFIED)
    status, _, err = reconcile(fake_host.root)
    assert status == 0, err
    assert path.read_text() == FULLY_SPECIFIED.replace(
        "    - path: /dev/nvidia0\n", "    - path: /dev/nvidia0\n      hostPath: /dev/nvidia0\n"
    )
    assert "/devices/0/containerEdits/deviceNodes/0/hostPath: (unset) -> /dev/nvidia0" in err


def test_host_path_not_added_where_the_host_has_another_device(fake_host: FakeHost) -> None:
    host_driver(fake_host)
    path = spec(fake_host, "nvidia.yaml", FULLY_SPECIFIED.replace("minor: 0", "minor: 1"))
    status, _, err = reconcile(fake_host.root)
    assert status == 0, err
    assert path.read_text() == FULLY_SPECIFIED.replace("minor: 0", "minor: 1")
    assert err.splitlines()[-1] == "nothing to do: 1 spec file in /etc/cdi"


def test_another_roots_existing_node_is_replaced_by_the_same_device_at_path(fake_host: FakeHost) -> None:
    host_driver(fake_host)
    fake_host.device(f"{CONTAINER}/dev/nvidia0", "c", 195, 0).device(f"{CONTAINER}/dev/nvidia1", "c", 195, 1)
    text = (
        'cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: "0"\n  containerEdits:\n    deviceNodes:\n'
        "    - path: /dev/nvidia0\n      hostPath: /run/nvidia/driver/dev/nvidia0\n"
        '- name: "1"\n  containerEdits:\n    deviceNodes:\n'
        "    - path: /dev/nvidia0\n      hostPath: /run/nvidia/driver/dev/nvidia1\n"
    )
    path = spec(fake_host, "nvidia.yaml", text)
    status, _, err = reconcile(fake_host.root)
    assert status == 0, err
    assert path.read_text() == text.replace("hostPath: /run/nvidia/driver/dev/nvidia0", "hostPath: /dev/nvidia0")


def test_ambiguous_driver_root_moves_nothing(fake_host: FakeHost) -> None:
    host_driver(fake_host)
    container_driver(fake_host)
    path = spec(fake_host, "nvidia.yaml", SPEC_000.replace("/run/nvidia/driver/", "/opt/other/"))
    status, _, err = reconcile(fake_host.root)
    assert status == 1
    assert path.read_text() == SPEC_000.replace("/run/nvidia/driver/", "/opt/other/")
    assert "driver root: ambiguous (driver files under each of /, /run/nvidia/driver); nothing is moved\n" in err
    assert "and the driver root is ambiguous" in err
    assert not [line for line in err.splitlines() if line.startswith(("changed", "would change"))]


def test_no_driver_root_moves_nothing(fake_host: FakeHost) -> None:
    fake_host.device("/dev/nvidia0", "c", 195, 0)
    path = spec(fake_host, "nvidia.yaml", SPEC_000)
    status, _, err = reconcile(fake_host.root)
    assert status == 1
    assert path.read_text() == SPEC_000
    assert "driver root: none (no nvidia-smi, libnvidia-ml.so.1 or libcuda.so.1 under /, /run/nvidia/driver)" in err
    assert not [line for line in err.splitlines() if line.startswith(("changed", "would change"))]
    assert err.splitlines()[-1] == "1 spec file: 0 changed, 1 left unchanged with problems"


def test_a_path_missing_under_every_root_leaves_the_file_unchanged(fake_host: FakeHost) -> None:
    seed_000(fake_host)
    text = SPEC_000.replace("libcuda.so.1'", "libcuda.so.550.54.14'")
    path = spec(fake_host, "nvidia.yaml", text)
    [plan] = plan_spec_dirs(HostView(str(fake_host.root)), ["/etc/cdi"], ROOTS)
    assert plan.new_text is None
    assert len(plan.problems) == 1
    status, _, err = reconcile(fake_host.root)
    assert status == 1
    assert path.read_text() == text
    assert "libcuda.so.550.54.14 does not exist on the host, nor under the driver root /; left unchanged" in err


def test_dry_run_and_diff_write_nothing(fake_host: FakeHost) -> None:
    seed_000(fake_host)
    path = spec(fake_host, "nvidia.yaml", SPEC_000)
    status, out, err = reconcile(fake_host.root, "--dry-run")
    assert status == 0
    assert out == ""
    assert f"would change /etc/cdi/nvidia.yaml: {CHANGES_000[0]}\n" in err
    assert err.splitlines()[-1] == "1 spec file: 1 would change, 0 left unchanged with problems"
    assert path.read_text() == SPEC_000

    status, out, err = reconcile(fake_host.root, "--diff")
    assert status == 0
    assert path.read_text() == SPEC_000
    lines = out.splitlines()
    assert lines[:2] == ["--- /etc/cdi/nvidia.yaml", "+++ /etc/cdi/nvidia.yaml (reconciled)"]
    assert lines[2].startswith("@@ -")
    assert "-      hostPath: /run/nvidia/driver/dev/nvidia0" in lines
    assert "+      hostPath: /dev/nvidia0" in lines
    assert '+    hostPath: "/dev/nvidiactl"' in lines


def test_unreadable_and_unparsable_files_are_problems(fake_host: FakeHost) -> None:
    seed_000(fake_host)
    spec(fake_host, "bad.yaml", "cdiVersion: [\n")
    fake_host.directory("/etc/cdi/sub.json")
    (fake_host.root / "etc/cdi/binary.json").write_bytes(b"\xff\xfe")
    status, _, err = reconcile(fake_host.root)
    assert status == 1
    assert "problem /etc/cdi/bad.yaml: cannot be parsed" in err
    assert "problem /etc/cdi/binary.json: is not UTF-8 text" in err
    assert "sub.json" not in err


def test_write_plans_writes_only_reconciled_files(fake_host: FakeHost) -> None:
    seed_000(fake_host)
    good = spec(fake_host, "a.yaml", SPEC_000)
    bad_text = SPEC_000.replace("libcuda.so.1'", "libcuda.so.9'")
    bad = spec(fake_host, "b.yaml", bad_text)
    host = HostView(str(fake_host.root))
    plans = plan_spec_dirs(host, ["/etc/cdi"], ROOTS)
    write_plans(host, plans)
    assert good.read_text() == SPEC_000_RECONCILED
    assert bad.read_text() == bad_text


def test_lint_is_clean_after_the_rewrite(fake_host: FakeHost, capsys: pytest.CaptureFixture[str]) -> None:
    seed_000(fake_host)
    path = spec(fake_host, "nvidia.yaml", SPEC_000)
    argv = ["lint", "--host-root", str(fake_host.root), "--kind", "cdi", str(path)]
    assert cli_main(argv) != 0
    assert "CDI102" in capsys.readouterr().out
    assert reconcile(fake_host.root)[0] == 0
    status = cli_main(argv)
    out = capsys.readouterr().out
    assert status == 0, out
    assert "CDI102" not in out


def test_seed_003_spec_for_the_driver_container_has_nothing_to_do(fake_host: FakeHost) -> None:
    seed_003(fake_host)
    path = spec(fake_host, "nvidia.yaml", SPEC_000)
    status, _, err = reconcile(fake_host.root)
    assert status == 0, err
    assert err.splitlines()[-1] == "nothing to do: 1 spec file in /etc/cdi"
    assert path.read_text() == SPEC_000


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (
            '{\n  "path": "/dev/nvidiactl"\n}',
            '{\n  "path": "/dev/nvidiactl",\n  "hostPath": "/run/nvidia/driver/dev/nvidiactl"\n}',
        ),
        ('{"path":"/dev/nvidiactl"}', '{"path":"/dev/nvidiactl","hostPath":"/run/nvidia/driver/dev/nvidiactl"}'),
        (
            '{"path": "/dev/nvidiactl", "type": "c"}',
            '{"path": "/dev/nvidiactl", "hostPath": "/run/nvidia/driver/dev/nvidiactl", "type": "c"}',
        ),
        (
            '{\n        "type": "c",\n        "path": "/dev/nvidiactl"\n      }',
            '{\n        "type": "c",\n        "path": "/dev/nvidiactl",\n'
            '        "hostPath": "/run/nvidia/driver/dev/nvidiactl"\n      }',
        ),
    ],
)
def test_json_host_path_added_in_the_objects_style(fake_host: FakeHost, before: str, after: str) -> None:
    container_driver(fake_host)
    template = '{"cdiVersion": "0.6.0", "kind": "nvidia.com/gpu", "devices": [{"name": "0", "containerEdits": {\n'
    template += '  "deviceNodes": [NODE]}}]}\n'
    path = spec(fake_host, "nvidia.json", template.replace("NODE", before))
    status, _, err = reconcile(fake_host.root)
    assert status == 0, err
    assert path.read_text() == template.replace("NODE", after)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (
            '    - "path": "/dev/nvidiactl"\n',
            '    - "path": "/dev/nvidiactl"\n      "hostPath": "/run/nvidia/driver/dev/nvidiactl"\n',
        ),
        (
            "    - {path: '/dev/nvidiactl'}\n",
            "    - {path: '/dev/nvidiactl', hostPath: '/run/nvidia/driver/dev/nvidiactl'}\n",
        ),
        (
            "    -   path: /dev/nvidiactl  # control\n        type: c\n",
            "    -   path: /dev/nvidiactl  # control\n"
            "        hostPath: /run/nvidia/driver/dev/nvidiactl\n        type: c\n",
        ),
        (
            "    - type: c\n      path: /dev/nvidiactl",
            "    - type: c\n      path: /dev/nvidiactl\n      hostPath: /run/nvidia/driver/dev/nvidiactl",
        ),
    ],
)
def test_yaml_host_path_added_in_the_blocks_style(fake_host: FakeHost, before: str, after: str) -> None:
    container_driver(fake_host)
    template = "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: '0'\n  containerEdits:\n    deviceNodes:\n"
    path = spec(fake_host, "nvidia.yaml", template + before)
    status, _, err = reconcile(fake_host.root)
    assert status == 0, err
    assert path.read_text() == template + after


def test_crlf_yaml_keeps_its_line_breaks(fake_host: FakeHost) -> None:
    container_driver(fake_host)
    text = "cdiVersion: 0.5.0\r\nkind: nvidia.com/gpu\r\ndevices:\r\n- name: '0'\r\n  containerEdits:\r\n"
    text += "    deviceNodes:\r\n    - path: /dev/nvidiactl\r\n"
    path = spec(fake_host, "nvidia.yaml", text)
    status, _, err = reconcile(fake_host.root)
    assert status == 0, err
    assert path.read_bytes().decode() == text + "      hostPath: /run/nvidia/driver/dev/nvidiactl\r\n"


def test_a_spec_too_old_for_host_path_is_a_problem(fake_host: FakeHost) -> None:
    container_driver(fake_host)
    text = "cdiVersion: 0.3.0\nkind: nvidia.com/gpu\ndevices:\n- name: gpu0\n  containerEdits:\n"
    text += "    deviceNodes:\n    - path: /dev/nvidiactl\n"
    path = spec(fake_host, "nvidia.yaml", text)
    status, _, err = reconcile(fake_host.root)
    assert status == 1
    assert path.read_text() == text
    assert "needs a hostPath, which cdiVersion '0.3.0' does not have" in err


def test_an_aliased_value_is_not_edited(fake_host: FakeHost) -> None:
    seed_000(fake_host)
    text = (
        "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: '0'\n  containerEdits:\n    deviceNodes:\n"
        "    - path: /dev/nvidia0\n      hostPath: &node /run/nvidia/driver/dev/nvidia0\n"
        "- name: '1'\n  containerEdits:\n    deviceNodes:\n    - path: /dev/nvidia0\n      hostPath: *node\n"
    )
    path = spec(fake_host, "nvidia.yaml", text)
    status, _, err = reconcile(fake_host.root)
    assert status == 1
    assert path.read_text() == text
    assert "cannot be edited safely" in err


def test_yaml_outside_the_lean_subset_is_read_with_pyyaml(fake_host: FakeHost) -> None:
    seed_000(fake_host)
    text = (
        "%YAML 1.1\n---\ncdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: '0'\n  containerEdits:\n"
        "    deviceNodes:\n    - path: /dev/nvidia0\n      hostPath: /run/nvidia/driver/dev/nvidia0\n"
    )
    path = spec(fake_host, "nvidia.yaml", text)
    status, _, err = reconcile(fake_host.root)
    assert status == 0, err
    assert path.read_text() == text.replace("/run/nvidia/driver/dev/", "/dev/")


def test_the_command_line(fake_host: FakeHost, capsys: pytest.CaptureFixture[str]) -> None:
    seed_000(fake_host)
    path = spec(fake_host, "nvidia.yaml", SPEC_000)
    argv = ["cdi", "reconcile", "--host-root", str(fake_host.root), "--spec-dir", "/etc/cdi"]
    assert cli_main([*argv, "--driver-root", "/", "--driver-root", CONTAINER]) == 0
    assert path.read_text() == SPEC_000_RECONCILED
    assert "1 spec file: 1 changed" in capsys.readouterr().err
    assert cli_main(argv) == 0
    assert capsys.readouterr().err.splitlines()[-1] == "nothing to do: 1 spec file in /etc/cdi"
