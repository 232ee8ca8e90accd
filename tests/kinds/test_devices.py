from __future__ import annotations

from nvidia_oci_hook.kinds.devices import DeviceAccess, nvidia_node
from nvidia_oci_hook.kinds.oci import OCIConfig


def access(rules: list[dict[str, object]]) -> DeviceAccess:
    return DeviceAccess(OCIConfig({"linux": {"resources": {"devices": rules}}}).device_rules)


def test_last_matching_rule_decides_each_letter() -> None:
    rules = [
        {"allow": False, "access": "rwm"},
        {"allow": True, "type": "c", "major": 195, "access": "rwm"},
        {"allow": False, "type": "c", "major": 195, "minor": 1, "access": "w"},
    ]
    assert access(rules).granted("c", 195, 0) == "rwm"
    assert access(rules).granted("c", 195, 1) == "rm"
    assert access(rules).granted("b", 195, 0) == "m"  # runc's trailing "b *:* m"
    assert access(rules).granted("c", 1, 3) == "rwm"  # runc always allows /dev/null


def test_wildcards_and_minus_one() -> None:
    rules = [
        {"allow": False, "access": "rwm"},
        {"allow": True, "type": "a", "major": -1, "minor": -1, "access": "rw"},
    ]
    assert access(rules).granted("c", 10, 229) == "rwm"
    assert access(rules).granted("u", 10, 229) == "rwm"


def test_deny_after_allow_all() -> None:
    rules = [{"allow": True, "access": "rwm"}, {"allow": False, "type": "c", "major": 195, "access": "rwm"}]
    assert access(rules).granted("c", 195, 0) == "m"


def test_nvidia_node_numbers() -> None:
    assert nvidia_node("/dev/nvidia3") is not None and nvidia_node("/dev/nvidia3").minor == 3  # type: ignore[union-attr]
    ctl = nvidia_node("/dev/nvidiactl")
    assert ctl is not None and (ctl.major, ctl.minor) == (195, 255)
    uvm = nvidia_node("/dev/nvidia-uvm-tools")
    assert uvm is not None and (uvm.major, uvm.minor) == (None, 1)
    assert nvidia_node("/dev/nvidia-caps/nvidia-cap12").minor == 12  # type: ignore[union-attr]
    assert nvidia_node("/dev/nvidiax") is None
