"""The CDI library and cri-o lstat device nodes: a symbolic link is not a device node to them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import FakeHost, codes, lint_value

pytestmark = pytest.mark.root


def spec(host_path: str) -> bytes:
    return json.dumps(
        {
            "cdiVersion": "0.5.0",
            "kind": "nvidia.com/gpu",
            "devices": [
                {"name": "0", "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0", "hostPath": host_path}]}}
            ],
        }
    ).encode()


def linked_host(host: FakeHost) -> FakeHost:
    host.device("/run/nvidia/driver/dev/nvidia0", "c", 195, 0).directory("/dev")
    host.symlink("/dev/nvidia0", "/run/nvidia/driver/dev/nvidia0").symlink("/dev/nvidia1", "/run/nvidia/driver/dev/x")
    return host


def test_linked_node_is_not_a_device_node(fake_host: FakeHost, as_root: None) -> None:
    linked_host(fake_host)
    found = lint_value(spec("/dev/nvidia0"), host_root=fake_host.root)
    (mismatch,) = [f for f in found if f.code == "CDI103"]
    assert "symbolic link" in mismatch.message and "not a device node" in mismatch.message
    assert "CDI103" not in codes(lint_value(spec("/run/nvidia/driver/dev/nvidia0"), host_root=fake_host.root))


def test_dangling_link_is_not_reported_as_missing(fake_host: FakeHost, as_root: None) -> None:
    linked_host(fake_host)
    found = codes(lint_value(spec("/dev/nvidia1"), host_root=fake_host.root))
    assert "CDI103" in found and "CDI101" not in found


def test_crio_additional_device_behind_a_link(fake_host: FakeHost, as_root: None, tmp_path: Path) -> None:
    from tests.crio.support import lint_dir, write_tree

    linked_host(fake_host)
    tree = write_tree(
        tmp_path / "etc-crio", {"crio.conf": '[crio.runtime]\nadditional_devices = ["/dev/nvidia0:/dev/nvidia0:rw"]\n'}
    )
    assert "CRO105" in codes(lint_dir(tree, host_root=fake_host.root))
    tree = write_tree(
        tmp_path / "etc-crio-2",
        {"crio.conf": '[crio.runtime]\nadditional_devices = ["/run/nvidia/driver/dev/nvidia0:/dev/nvidia0:rw"]\n'},
    )
    assert "CRO105" not in codes(lint_dir(tree, host_root=fake_host.root))
