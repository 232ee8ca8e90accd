"""A GPU's node (c 195:0, no NVIDIA driver loaded here) as the container's /dev/null, in the OCI config itself: runc
and crun open /dev/null while they set the container up and refuse the container in the words DEV005 quotes;
/dev/urandom's node there (c 1:9) opens, and the container runs. The CRI form is tests/e2e/cri_cases.py's `gpu/`
cases (CRI009, CRI010)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nvidia_oci_hook.rules.base import Context
from nvidia_oci_hook.rules.devices import default_device_replaced
from tests.e2e.bundles import Runtime, base_config, bundle_rootfs, write_bundle

pytestmark = [pytest.mark.root, pytest.mark.runtime]

REFUSALS = {
    "runc": "error reopening /dev/null inside container: open /dev/null: no such device or address",
    "crun": "failed open()ing /dev/null: No such device or address",
}


def driver_serves(major: int) -> bool:
    section = Path("/proc/devices").read_text().split("Block devices")[0]
    return any(line.split()[:1] == [str(major)] for line in section.splitlines())


@pytest.mark.parametrize("name", ["runc", "crun"])
def test_a_dev_null_no_driver_serves_is_refused_in_the_words_dev005_quotes(tmp_path: Path, name: str) -> None:
    assert os.geteuid() == 0, "needs root"
    assert not driver_serves(195), "NVIDIA's driver is loaded here: the GPU's node would open"
    rootfs = bundle_rootfs(tmp_path)
    outcomes = {}
    configs = {}
    for major, minor in ((195, 0), (1, 9)):
        config = configs[major] = base_config(rootfs, "stat -c %t:%T /dev/null")
        config["linux"]["devices"] = [{"path": "/dev/null", "type": "c", "major": major, "minor": minor}]
        rule = {"allow": True, "type": "c", "major": major, "minor": minor, "access": "rw"}
        config["linux"]["resources"]["devices"].append(rule)
        bundle = write_bundle(tmp_path / f"bundle-{major}", config)
        outcomes[major] = Runtime(name, tmp_path / "state").cycle(bundle, f"dev-null-{major}")
    assert not outcomes[195].created and REFUSALS[name] in outcomes[195].create_error, outcomes[195].create_error
    assert outcomes[1].created and outcomes[1].output.strip() == "1:9", outcomes[1].output
    (said,) = default_device_replaced(configs[195], Context())
    assert all(words in said.message for words in REFUSALS.values())
