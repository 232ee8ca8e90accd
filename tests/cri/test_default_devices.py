"""A device node given the container path of a device every container has (CRI009, CRI010): what each engine does,
measured on cri-o 1.37 and containerd 1.7.24 and 2.1.9 with runc 1.1.5 (tests/e2e/cri_cases.py, the `gpu/` cases):
a GPU's node (c 195:0, no driver loaded) at /dev/null is refused, `error reopening /dev/null inside container: open
/dev/null: no such device or address`; at /dev/zero or /dev/tty the container starts with the GPU there."""

from __future__ import annotations

from typing import Optional

import pytest

from nvidia_oci_hook.findings import OUTCOME_REFUSED, Problem
from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.rules.base import Context, all_rules
from nvidia_oci_hook.rules.cri import REOPEN_ERROR
from tests.cri.test_cri import cri, device
from tests.helpers import FakeHost

pytestmark = pytest.mark.root  # device nodes (mknod)

WITHOUT_DRIVER = "Character devices:\n  1 mem\n  5 /dev/tty\n\nBlock devices:\n  7 loop\n"
WITH_DRIVER = "Character devices:\n  1 mem\n195 nvidia-frontend\n\nBlock devices:\n  7 loop\n"


def problems(fake_host: FakeHost, value: object, proc_devices: Optional[str]) -> list[tuple[str, Problem]]:
    fake_host.device("/dev/nvidia0", "c", 195, 0).device("/dev/urandom", "c", 1, 9)
    if proc_devices is not None:
        fake_host.text("/proc/devices", proc_devices)
    context = Context(host=HostView(str(fake_host.root)))
    return [
        (rule.code, problem)
        for rule in all_rules()
        if rule.code in ("CRI001", "CRI009", "CRI010") and rule.check is not None
        for problem in rule.check(value, context)
    ]


def test_a_gpu_at_dev_null_without_its_driver_is_refused_by_each_engine_in_its_words(
    fake_host: FakeHost, as_root: None
) -> None:
    found = problems(fake_host, cri([device("/dev/null", "/dev/nvidia0")]), WITHOUT_DRIVER)
    assert [(code, p.engines, p.outcome) for code, p in found] == [
        ("CRI009", frozenset({"containerd"}), OUTCOME_REFUSED),
        ("CRI009", frozenset({"crio"}), OUTCOME_REFUSED),
    ]
    containerd, crio = (p.message for _, p in found)
    assert f"when it starts it (`failed to create containerd task: failed to create shim task: OCI runtime create " \
           f"failed: {REOPEN_ERROR}`)" in containerd  # fmt: skip
    assert f"when it creates it (`container create failed: ... {REOPEN_ERROR}`)" in crio
    assert {p.hint for _, p in found} == {"give the device a container path of its own, such as /dev/nvidia0"}


def test_privileged_cri_o_refuses_it_first_for_its_own_reason(fake_host: FakeHost, as_root: None) -> None:
    fake_host.device("/dev/null", "c", 1, 3)
    found = problems(fake_host, cri([device("/dev/null", "/dev/nvidia0")], privileged=True), WITHOUT_DRIVER)
    assert [(code, p.engines) for code, p in found] == [
        ("CRI001", frozenset({"crio"})),
        ("CRI009", frozenset({"containerd"})),
    ]
    assert found[0][1].hint == "give the device a container path of its own, such as /dev/nvidia0"


@pytest.mark.parametrize(
    "proc_devices, said",
    [(WITH_DRIVER, "a driver serves major 195 on the host"), (None, "where no driver serves major 195, CRI009")],
    ids=["driver-loaded", "unknown"],
)
def test_where_the_open_succeeds_or_may_the_container_starts_with_the_gpu_as_dev_null(
    fake_host: FakeHost, as_root: None, proc_devices: Optional[str], said: str
) -> None:
    found = problems(fake_host, cri([device("/dev/null", "/dev/nvidia0")]), proc_devices)
    ((code, problem),) = found
    assert (code, problem.engines, problem.outcome) == ("CRI010", None, None)
    assert problem.message.startswith(
        "/dev/nvidia0 (c 195:0) is given the container path /dev/null, the kernel's c 1:3 in every other container: "
        "the container starts"
    )
    assert said in problem.message


@pytest.mark.parametrize(
    "container, host, codes",
    [
        ("/dev/zero", "/dev/nvidia0", ["CRI010"]),
        ("/dev/null", "/dev/urandom", ["CRI010"]),  # opens: the container's /dev/null is /dev/urandom
        ("/dev/urandom", "/dev/urandom", []),
        ("/dev/nvidia0", "/dev/nvidia0", []),
    ],
)
def test_other_default_paths_and_nodes(
    fake_host: FakeHost, as_root: None, container: str, host: str, codes: list[str]
) -> None:
    found = problems(fake_host, cri([device(container, host)]), WITHOUT_DRIVER)
    assert [code for code, _ in found] == codes
