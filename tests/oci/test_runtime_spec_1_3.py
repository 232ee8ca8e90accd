"""Every config field that runtime-spec 1.1.0 to 1.3.0 added or changed, held to the upstream v1.3.0 schema.

Each case puts one value at one path of a config that fills every such field. Our schema (schema_problems, the
fast check and our jsonschema validator) must reach the verdict of the runtime-spec's own v1.3.0 schema files
under jsonschema's Draft4Validator. Those files come from Debian's golang-github-opencontainers-specs-dev 1.3.0,
which tests/oci/setup.sh fetches (as root, from the Debian archive apt's sources name; scripts/setup runs it).
Each case also says which verdict it is written to provoke, checked against upstream alone, so that a case that
stops reaching its field fails instead of passing without testing anything.

Upstream's schema has no verdict on the items of vm.hwConfig.irqs (its reference there is broken), so those cases
check our choice, uint32, on its own.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from nvidia_oci_hook.cli import main
from nvidia_oci_hook.kinds.schema import _Compiler, fast_check, schema_problems, validator_for
from tests.documents.corpus import (
    DELETE,
    UPSTREAM_TOOLS,
    NotComparable,
    Path_,
    apply,
    upstream_comparable,
    upstream_valid,
)

Case = tuple[str, Path_, Any, bool]  # field, where, value (DELETE removes the key), the verdict it is meant to get

RELEASE = "1.3.0"

# The config `runc spec` writes once runc is built on runtime-spec 1.3.0 (libcontainer/specconv's Example() on a
# cgroup v2 host), with the time namespace and the clock offsets a container that shifts its clocks adds.
RUNC_SPEC: dict[str, Any] = {
    "ociVersion": "1.3.0",
    "process": {
        "terminal": True,
        "user": {"uid": 0, "gid": 0},
        "args": ["sh"],
        "env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "TERM=xterm"],
        "cwd": "/",
        "capabilities": {
            "bounding": ["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"],
            "effective": ["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"],
            "permitted": ["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"],
        },
        "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}],
        "noNewPrivileges": True,
    },
    "root": {"path": "rootfs", "readonly": True},
    "hostname": "runc",
    "mounts": [
        {"destination": "/proc", "type": "proc", "source": "proc"},
        {
            "destination": "/dev",
            "type": "tmpfs",
            "source": "tmpfs",
            "options": ["nosuid", "strictatime", "mode=755", "size=65536k"],
        },
        {
            "destination": "/dev/pts",
            "type": "devpts",
            "source": "devpts",
            "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"],
        },
        {
            "destination": "/dev/shm",
            "type": "tmpfs",
            "source": "shm",
            "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"],
        },
        {"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue", "options": ["nosuid", "noexec", "nodev"]},
        {"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "noexec", "nodev", "ro"]},
        {
            "destination": "/sys/fs/cgroup",
            "type": "cgroup",
            "source": "cgroup",
            "options": ["nosuid", "noexec", "nodev", "relatime", "ro"],
        },
    ],
    "linux": {
        "resources": {"devices": [{"allow": False, "access": "rwm"}]},
        "namespaces": [
            {"type": "pid"},
            {"type": "network"},
            {"type": "ipc"},
            {"type": "uts"},
            {"type": "mount"},
            {"type": "cgroup"},
            {"type": "time"},
        ],
        "timeOffsets": {"monotonic": {"secs": 86400, "nanosecs": 0}, "boottime": {"secs": 86400, "nanosecs": 0}},
        "maskedPaths": [
            "/proc/acpi",
            "/proc/asound",
            "/proc/kcore",
            "/proc/keys",
            "/proc/latency_stats",
            "/proc/timer_list",
            "/proc/timer_stats",
            "/proc/sched_debug",
            "/sys/firmware",
            "/proc/scsi",
            "/sys/devices/virtual/tpm",
        ],
        "readonlyPaths": ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"],
    },
}

_IOMEM = {"firstGFN": 0, "firstMFN": 4096, "nrMFNs": 16}
_ALLOW = ("setHostname", "rawSockets", "chflags", "quotas", "socketAf", "mlock", "reservedPorts", "suser")


def filled() -> dict[str, Any]:
    """RUNC_SPEC with every field added or changed from 1.1.0 to 1.3.0 set to a valid value."""
    config = copy.deepcopy(RUNC_SPEC)
    config["process"].update(
        {
            "ioPriority": {"class": "IOPRIO_CLASS_BE", "priority": 4},
            "scheduler": {
                "policy": "SCHED_OTHER",
                "nice": -5,
                "priority": 0,
                "flags": ["SCHED_FLAG_RESET_ON_FORK"],
                "runtime": 0,
                "deadline": 0,
                "period": 0,
            },
            "execCPUAffinity": {"initial": "0-3,7", "final": "4"},
        }
    )
    config["linux"].update(
        {
            "devices": [{"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0, "fileMode": 438}],
            "netDevices": {"eth1": {"name": "ctr1"}},
            "intelRdt": {"closID": "gpu", "schemata": ["L3:0=ff", "MB:0=50"], "enableMonitoring": True},
            "memoryPolicy": {"mode": "MPOL_BIND", "nodes": "0-1", "flags": ["MPOL_F_STATIC_NODES"]},
            "seccomp": {"defaultAction": "SCMP_ACT_ALLOW", "architectures": ["SCMP_ARCH_X86_64"]},
        }
    )
    config["windows"] = {"layerFolders": ["C:\\layers\\base"], "resources": {"cpu": {"affinity": {"mask": 3}}}}
    config["vm"] = {
        "kernel": {"path": "/boot/vmlinuz"},
        "hwConfig": {
            "deviceTree": "/boot/board.dtb",
            "vcpus": 2,
            "memory": 1073741824,
            "dtdevs": ["/soc/serial@1c28000"],
            "iomems": [_IOMEM],
            "irqs": [],
        },
    }
    config["zos"] = {"namespaces": [{"type": "pid"}]}
    config["freebsd"] = {
        "devices": [{"path": "null", "mode": 438}],
        "jail": {
            "parent": "host",
            "host": "new",
            "ip4": "inherit",
            "ip4Addr": ["192.0.2.10"],
            "ip6": "disable",
            "ip6Addr": [],
            "vnet": "new",
            "interface": "em0",
            "vnetInterfaces": ["epair0b"],
            "sysvmsg": "new",
            "sysvsem": "new",
            "sysvshm": "new",
            "enforceStatfs": 2,
            "allow": {**dict.fromkeys(_ALLOW, False), "mount": ["nullfs"]},
        },
    }
    return config


def _cases(field: str, path: Path_, valid: list[Any], invalid: list[Any]) -> list[Case]:
    return [(field, path, value, True) for value in valid] + [(field, path, value, False) for value in invalid]


_IOPRIO = ("process", "ioPriority")
_SCHED = ("process", "scheduler")
_AFFINITY = ("process", "execCPUAffinity")
_OFFSETS = ("linux", "timeOffsets")
_RDT = ("linux", "intelRdt")
_MPOL = ("linux", "memoryPolicy")
_HW = ("vm", "hwConfig")
_JAIL = ("freebsd", "jail")
_CPU_LISTS = ["0-3,7", "0-3, 7", "", "3-1", "0-3\n"]  # the pattern checks characters only; $ passes one "\n"
_SHARING_MODES = ["disable", "new", "inherit"]

CASES: list[Case] = [
    *_cases("ociVersion", ("ociVersion",), ["1.3.0", "1.3.0+dev", "1.0.2-dev", "anything"], [1.3, None]),
    # process.ioPriority (1.1.0)
    *_cases("ioPriority", _IOPRIO, [{"class": "IOPRIO_CLASS_IDLE"}], [{"priority": 4}, "IOPRIO_CLASS_BE", {}]),
    *_cases(
        "ioPriority.class",
        (*_IOPRIO, "class"),
        ["IOPRIO_CLASS_RT", "IOPRIO_CLASS_BE", "IOPRIO_CLASS_IDLE"],
        ["IOPRIO_CLASS_NONE", "ioprio_class_be", "IOPRIO_CLASS_BE\n", 2, DELETE],
    ),
    *_cases("ioPriority.priority", (*_IOPRIO, "priority"), [0, 7, -(2**31), 2**31 - 1, DELETE], [2**31, "4", 4.0]),
    # process.scheduler (1.1.0)
    *_cases("scheduler", _SCHED, [{"policy": "SCHED_FIFO", "priority": 50}], [{"priority": 50}, [], "SCHED_FIFO"]),
    *_cases(
        "scheduler.policy",
        (*_SCHED, "policy"),
        ["SCHED_OTHER", "SCHED_FIFO", "SCHED_RR", "SCHED_BATCH", "SCHED_ISO", "SCHED_IDLE", "SCHED_DEADLINE"],
        ["SCHED_NORMAL", "sched_fifo", "", DELETE],
    ),
    *_cases(
        "scheduler.flags",
        (*_SCHED, "flags"),
        [
            [flag]
            for flag in (
                "SCHED_FLAG_RESET_ON_FORK",
                "SCHED_FLAG_RECLAIM",
                "SCHED_FLAG_DL_OVERRUN",
                "SCHED_FLAG_KEEP_POLICY",
                "SCHED_FLAG_KEEP_PARAMS",
                "SCHED_FLAG_UTIL_CLAMP_MIN",
                "SCHED_FLAG_UTIL_CLAMP_MAX",
            )
        ]
        + [[]],
        [["SCHED_FLAG_ALL"], ["SCHED_FLAG_RECLAIM", "SCHED_FLAG_KEEP_ALL"], "SCHED_FLAG_RECLAIM", [1]],
    ),
    *_cases("scheduler.nice", (*_SCHED, "nice"), [-20, 19, -(2**31), 2**31 - 1], [-(2**31) - 1, 2**31, 1.0, "0"]),
    *_cases("scheduler.priority", (*_SCHED, "priority"), [99, -(2**31)], [2**31, True]),
    *[
        case
        for name in ("runtime", "deadline", "period")
        for case in _cases(f"scheduler.{name}", (*_SCHED, name), [0, 2**64 - 1], [-1, 2**64, "0"])
    ],
    # process.execCPUAffinity (1.2.1)
    *_cases("execCPUAffinity", _AFFINITY, [{}, {"final": "1"}], [[], "0-3"]),
    *[
        case
        for name in ("initial", "final")
        for case in _cases(
            f"execCPUAffinity.{name}", (*_AFFINITY, name), _CPU_LISTS, ["0-3;7", "a", "0-3\n\n", "\n0", 3]
        )
    ],
    # linux.namespaces: the time namespace (1.1.0)
    *_cases(
        "namespace type",
        ("linux", "namespaces", -1),
        [{"type": "time"}, {"type": "time", "path": "/proc/1/ns/time"}],
        [{"type": "Time"}, {"type": "time_for_children"}, {"path": "/proc/1/ns/time"}],
    ),
    # linux.timeOffsets (1.1.0)
    *_cases("timeOffsets", _OFFSETS, [{}, {"realtime": 5}, {"monotonic": {}}], [[], "86400"]),
    *[
        case
        for clock in ("monotonic", "boottime")
        for case in [
            *_cases(f"timeOffsets.{clock}", (*_OFFSETS, clock), [{"secs": -3600}], [[], 3600]),
            *_cases(
                f"timeOffsets.{clock}.secs",
                (*_OFFSETS, clock, "secs"),
                [-(2**63), 2**63 - 1, DELETE],
                ["3600", 2**63, 1.5],
            ),
            *_cases(
                f"timeOffsets.{clock}.nanosecs",
                (*_OFFSETS, clock, "nanosecs"),
                [999999999, 2**32 - 1],
                [-1, 2**32, "0"],
            ),
        ]
    ],
    # linux.netDevices (1.3.0)
    *_cases(
        "netDevices",
        ("linux", "netDevices"),
        [{}, {"eth0": {}}, {"": {"name": ""}}, {"eth0": {"name": "ctr0", "x-extra": 1}}],
        [{"eth0": "ctr0"}, {"eth0": None}, {"eth0": []}, [], {"eth0": {"name": 0}}],
    ),
    # linux.memoryPolicy (1.3.0)
    *_cases("memoryPolicy", _MPOL, [{}, {"nodes": "0"}], [[], "MPOL_BIND"]),
    *_cases(
        "memoryPolicy.mode",
        (*_MPOL, "mode"),
        [
            "MPOL_DEFAULT",
            "MPOL_BIND",
            "MPOL_INTERLEAVE",
            "MPOL_WEIGHTED_INTERLEAVE",
            "MPOL_PREFERRED",
            "MPOL_PREFERRED_MANY",
            "MPOL_LOCAL",
            DELETE,
        ],
        ["MPOL_NUMA", "mpol_bind", 2],
    ),
    *_cases("memoryPolicy.nodes", (*_MPOL, "nodes"), ["", "0-3,7", "anything"], [0, ["0"]]),
    *_cases(
        "memoryPolicy.flags",
        (*_MPOL, "flags"),
        [["MPOL_F_NUMA_BALANCING"], ["MPOL_F_RELATIVE_NODES"], ["MPOL_F_STATIC_NODES"], []],
        [["MPOL_F_MOF"], "MPOL_F_STATIC_NODES"],
    ),
    # linux.intelRdt (schemata and enableMonitoring in 1.3.0, enableCMT and enableMBM removed)
    *_cases("intelRdt.schemata", (*_RDT, "schemata"), [[], ["L3:0=ff;1=f0"]], ["L3:0=ff", [1], {}]),
    *_cases("intelRdt.enableMonitoring", (*_RDT, "enableMonitoring"), [True, False], ["true", 1]),
    *_cases("intelRdt.enableCMT", (*_RDT, "enableCMT"), [True, "yes", 1, None], []),
    *_cases("intelRdt.enableMBM", (*_RDT, "enableMBM"), [False, "no"], []),
    *_cases("intelRdt.memBwSchema", (*_RDT, "memBwSchema"), ["MB:0=50"], ["L3:0=ff"]),
    # linux.devices[].fileMode: at most 511 from 1.3.0
    *_cases("device fileMode", ("linux", "devices", 0, "fileMode"), [0, 438, 511], [512, 8630, -1, 438.0]),
    # linux.seccomp.architectures: four more in 1.2.1
    *_cases(
        "seccomp architecture",
        ("linux", "seccomp", "architectures", 0),
        ["SCMP_ARCH_LOONGARCH64", "SCMP_ARCH_M68K", "SCMP_ARCH_SH", "SCMP_ARCH_SHEB", "SCMP_ARCH_RISCV64"],
        ["SCMP_ARCH_SPARC", "SCMP_ARCH_SH4", "scmp_arch_sh"],
    ),
    # windows.resources.cpu.affinity (1.2.1): an object in the schema
    *_cases(
        "windows cpu affinity",
        ("windows", "resources", "cpu", "affinity"),
        [{}, {"mask": 3, "group": 0}, {"mask": 2**64 - 1, "group": 2**32 - 1}],
        [[{"mask": 3, "group": 0}], [], {"mask": -1}, {"group": 2**32}, "0x3"],
    ),
    # vm.hwConfig (1.3.0)
    *_cases("vm.hwConfig", _HW, [{}, {"x-extra": 1}], [[], "board"]),
    *_cases("vm.hwConfig.deviceTree", (*_HW, "deviceTree"), ["/boot/board.dtb"], [1]),
    *_cases("vm.hwConfig.vcpus", (*_HW, "vcpus"), [0, 2**32 - 1], [-1, 2**32, "2"]),
    *_cases("vm.hwConfig.memory", (*_HW, "memory"), [2**64 - 1], [-1, 2**64]),
    *_cases("vm.hwConfig.dtdevs", (*_HW, "dtdevs"), [[], ["/soc/gpu"]], [[1], "/soc/gpu"]),
    *_cases(
        "vm.hwConfig.iomems",
        (*_HW, "iomems"),
        [[], [_IOMEM], [{"firstMFN": 0, "nrMFNs": 0}], [_IOMEM, {"bogus": 1}], [_IOMEM, "x"], [_IOMEM, {"nrMFNs": -1}]],
        [[{"firstMFN": 1}], [{"nrMFNs": 1}], [{"bogus": 1}, _IOMEM], ["x"], [{**_IOMEM, "firstGFN": -1}], {}],
    ),
    *_cases("vm.hwConfig.irqs", (*_HW, "irqs"), [[]], ["5", {}]),
    # zos.namespaces (1.2.1), zos.devices gone
    *_cases(
        "zos namespace",
        ("zos", "namespaces", 0),
        [{"type": kind} for kind in ("mount", "pid", "uts", "ipc")] + [{"type": "pid", "path": "/proc/1/ns/pid"}],
        [{"type": kind} for kind in ("network", "user", "cgroup", "time", "PID")] + [{}, {"type": "pid", "path": 1}],
    ),
    *_cases("zos.namespaces", ("zos", "namespaces"), [[]], [{}, "pid"]),
    *_cases("zos.devices", ("zos", "devices"), [[{"major": "x"}], "anything"], []),
    # freebsd (1.3.0)
    *_cases("freebsd", ("freebsd",), [{}], [[], "jail"]),
    *_cases("freebsd device", ("freebsd", "devices", 0), [{}, {"path": "pf"}], [{"path": 1}, "null"]),
    *_cases("freebsd device mode", ("freebsd", "devices", 0, "mode"), [0, 511], [512, -1, "0666"]),
    *[
        case
        for name in ("host", "vnet")
        for case in _cases(f"freebsd jail.{name}", (*_JAIL, name), ["new", "inherit"], ["disable", "New", 1])
    ],
    *[
        case
        for name in ("ip4", "ip6", "sysvmsg", "sysvsem", "sysvshm")
        for case in _cases(f"freebsd jail.{name}", (*_JAIL, name), _SHARING_MODES, ["none", "", True])
    ],
    *_cases("freebsd jail.enforceStatfs", (*_JAIL, "enforceStatfs"), [0, 2, 255], [256, -1, 2.0, "2"]),
    *[
        case
        for name in ("parent", "interface")
        for case in _cases(f"freebsd jail.{name}", (*_JAIL, name), ["x"], [1, None])
    ],
    *[
        case
        for name in ("ip4Addr", "ip6Addr", "vnetInterfaces")
        for case in _cases(f"freebsd jail.{name}", (*_JAIL, name), [[], ["x"]], ["x", [1]])
    ],
    *_cases("freebsd jail", _JAIL, [{}], [[]]),
    *_cases("freebsd jail.allow", (*_JAIL, "allow"), [{}], [[], "mount"]),
    *[
        case
        for name in _ALLOW
        for case in _cases(f"freebsd jail.allow.{name}", (*_JAIL, "allow", name), [True], ["true", 1])
    ],
    *_cases("freebsd jail.allow.mount", (*_JAIL, "allow", "mount"), [[], ["nullfs", "tmpfs"]], ["nullfs", [1]]),
]

# The items of vm.hwConfig.irqs, which upstream's v1.3.0 schema cannot judge, as our schema judges them: uint32.
IRQS: list[tuple[Any, bool]] = [
    ([0], True),
    ([5, 4294967295], True),
    ([-1], False),
    ([4294967296], False),
    (["5"], False),
    ([5.0], False),
    ([None], False),
    ([5, "x"], False),
]


def _label(value: Any) -> str:
    return "delete" if value is DELETE else json.dumps(value)


def _ids(cases: list[Case]) -> list[str]:
    return [f"{field}={_label(value)}" for field, _path, value, _valid in cases]


def _ours(document: Any) -> tuple[bool, bool, bool]:
    """Our three verdicts: schema_problems() finds nothing, the fast check, our jsonschema validator."""
    return (
        not list(schema_problems("oci", document)),
        fast_check("oci")(document),
        bool(validator_for("oci").is_valid(document)),
    )


def test_upstream_schema_is_the_modelled_release() -> None:
    version = UPSTREAM_TOOLS / "version"
    assert version.is_file(), f"{version} is missing: run tests/oci/setup.sh (as root; it fetches from Debian)"
    assert version.read_text().strip().startswith(f"{RELEASE}-")


def test_case_names_are_unique() -> None:
    duplicates = [name for name, count in Counter(_ids(CASES)).items() if count > 1]
    assert not duplicates


def test_every_field_has_a_valid_and_an_invalid_case() -> None:
    # The removed intelRdt.enableCMT, intelRdt.enableMBM and zos.devices are unknown keys now: nothing to refuse.
    unchecked = {"intelRdt.enableCMT", "intelRdt.enableMBM", "zos.devices"}
    verdicts: dict[str, set[bool]] = {}
    for field, _path, _value, valid in CASES:
        verdicts.setdefault(field, set()).add(valid)
    one_sided = sorted(field for field, seen in verdicts.items() if seen != {True, False} and field not in unchecked)
    assert not one_sided
    assert all(verdicts[field] == {True} for field in unchecked)


def test_filled_config_is_valid() -> None:
    config = filled()
    assert upstream_valid("oci", config)
    assert _ours(config) == (True, True, True)


@pytest.mark.parametrize(("field", "path", "value", "valid"), CASES, ids=_ids(CASES))
def test_verdict_is_upstream_v1_3_0s(field: str, path: Path_, value: Any, valid: bool) -> None:
    document = apply(filled(), path, value)
    upstream = upstream_valid("oci", document)
    assert upstream == valid, f"the case is meant to be {'valid' if valid else 'invalid'} for upstream"
    assert _ours(document) == (upstream, upstream, upstream)


@pytest.mark.parametrize(("irqs", "valid"), IRQS, ids=[json.dumps(irqs) for irqs, _valid in IRQS])
def test_irqs_items_are_uint32(irqs: list[Any], valid: bool) -> None:
    document = apply(filled(), (*_HW, "irqs"), irqs)
    assert not upstream_comparable("oci", document)
    with pytest.raises(NotComparable):
        upstream_valid("oci", document)
    assert _ours(document) == (valid, valid, valid)


@pytest.mark.parametrize(
    "version", ["1.0.0", "1.0.1", "1.0.2", "1.0.2-dev", "1.1.0", "1.1.0-rc.3", "1.2.0", "1.2.1", "1.3.0", "1.3.0+dev"]
)
def test_every_version_a_runtime_writes_is_accepted(version: str) -> None:
    document = {**RUNC_SPEC, "ociVersion": version}
    assert not list(schema_problems("oci", document))
    assert upstream_valid("oci", document)


def test_config_of_a_current_runc_has_no_schema_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert not list(schema_problems("oci", RUNC_SPEC))
    assert upstream_valid("oci", RUNC_SPEC)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(RUNC_SPEC, indent=4))
    main(["lint", "--offline", "--format", "json", str(path)])
    (result,) = json.loads(capsys.readouterr().out)["files"]
    assert result["kind"] == "oci"
    assert [finding for finding in result["findings"] if finding["code"] == "SCH001"] == []


@pytest.mark.parametrize(
    "value",
    [[], [1], ["x"], [1, "x"], ["x", "x"], [1, "x", None], [1, 2, 3], "not an array", {"0": "x"}],
    ids=json.dumps,
)
def test_fast_check_reads_tuple_form_items_as_jsonschema_does(value: Any) -> None:
    schema = {"items": [{"type": "integer"}, {"type": "string"}]}
    assert _Compiler(schema).compile(schema)(value) == jsonschema.Draft7Validator(schema).is_valid(value)
