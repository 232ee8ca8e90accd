"""A corpus of OCI runtime configs and states for holding our schemas to the upstream runtime-spec schema.

The base documents are generated on this machine at run time by the real tools: `runc spec`, `runc spec
--rootless`, `crun spec`, `crun spec --rootless`, `ctr oci spec`, and the config.json podman writes for a
container it has initialised (from a local busybox image, with throw-away storage and configuration). Four OCI
state documents are written by hand in the shapes runc and crun hand to hooks. Each config is also "enriched":
merged with a fragment that fills every section of the spec (all hook stages, devices, every cgroup controller,
seccomp, Solaris, Windows, VM, z/OS, FreeBSD, and what runtime-spec 1.1.0 to 1.3.0 added to the process and Linux
sections), so that mutations reach every part of the schema.

From those, seeded mutations (random.Random with fixed seeds) delete keys, swap types, push numbers past their
bounds, bend enum strings and patterns, add unknown keys, or make harmless changes; targeted cases probe each
bound and pattern with a recorded expected verdict. Whether a mutated document is valid is decided by the
upstream schema (`upstream_valid`), never by this module.

Run as a script (`python corpus.py podman-spec DIR`), the module generates podman's config under DIR; the
corpus does that in a child process that is a child subreaper, so podman's conmon is reaped (PID 1 on these
machines reaps nothing).
"""

from __future__ import annotations

import copy
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, Union

# The schema files of Debian's golang-github-opencontainers-specs-dev at runtime-spec 1.3.0, the release our schema
# models; tests/oci/setup.sh unpacks them here (Debian 12's own package predates 1.1.0).
UPSTREAM_TOOLS = Path(__file__).resolve().parents[2] / ".tools/oci-schema"
UPSTREAM_SCHEMA_DIR = UPSTREAM_TOOLS / "usr/share/gocode/src/github.com/opencontainers/runtime-spec/schema"
UPSTREAM_ROOTS = {"oci": "config-schema.json", "oci-state": "state-schema.json"}

Key = Union[str, int]
Path_ = tuple[Key, ...]
Entry = tuple[str, str, Any]

DELETE = object()  # a targeted case's value meaning "remove the key or item"


class CorpusError(RuntimeError):
    """The base documents cannot be generated here (missing runtime, not root, a tool failed)."""


# ---------------------------------------------------------------------------------------------------------------
# The upstream verdict


def _has_referencing() -> bool:
    """Whether jsonschema resolves references through the referencing package (jsonschema >= 4.18)."""
    from importlib.metadata import version
    from importlib.util import find_spec

    numbers = re.match(r"(\d+)\.(\d+)", version("jsonschema"))
    release = (int(numbers.group(1)), int(numbers.group(2))) if numbers else (0, 0)
    return release >= (4, 18) and find_spec("referencing") is not None


@cache
def _upstream_validator(kind: str) -> Any:
    import jsonschema

    if not (UPSTREAM_SCHEMA_DIR / UPSTREAM_ROOTS[kind]).is_file():
        raise CorpusError(
            f"{UPSTREAM_SCHEMA_DIR} has no {UPSTREAM_ROOTS[kind]}: run tests/oci/setup.sh (as root; it fetches "
            "Debian's golang-github-opencontainers-specs-dev 1.3.0 from the archive apt's sources name)"
        )
    store = {path.as_uri(): json.loads(path.read_text("utf-8")) for path in sorted(UPSTREAM_SCHEMA_DIR.glob("*.json"))}
    root_uri = (UPSTREAM_SCHEMA_DIR / UPSTREAM_ROOTS[kind]).as_uri()
    if _has_referencing():
        import referencing
        import referencing.jsonschema

        # jsonschema >= 4.18: every file is a resource under its file: URI, so "defs.json#/..." and each file's
        # own "#/definitions/..." resolve against the file that holds them.
        registry = referencing.Registry().with_resources(
            (uri, referencing.Resource.from_contents(contents, default_specification=referencing.jsonschema.DRAFT4))
            for uri, contents in store.items()
        )
        # The registry's lookups, made at each $ref of each document, were most of the corpus tests' time: each
        # reference is looked up once here, by the registry itself, and the schema validated with its target in
        # place (draft-04 ignores a $ref's siblings, as the target in its place does).
        resolver = registry.resolver(base_uri=root_uri)
        schema = _in_place(resolver.lookup(root_uri).contents, resolver, ())
        return jsonschema.Draft4Validator(schema, registry=registry)
    resolver = jsonschema.RefResolver(base_uri=root_uri, referrer=store[root_uri], store=store)
    return jsonschema.Draft4Validator(store[root_uri], resolver=resolver)


def _in_place(schema: Any, resolver: Any, targets: tuple[int, ...]) -> Any:
    """schema with each $ref replaced by what resolver (a referencing.Resolver) finds for it. A reference the
    registry cannot resolve, or one back into a target being replaced (a recursive schema), stays a $ref, for the
    validator to look up as it validates."""
    if isinstance(schema, list):
        return [_in_place(item, resolver, targets) for item in schema]
    if not isinstance(schema, dict):
        return schema
    reference = schema.get("$ref")
    if isinstance(reference, str):
        import referencing.exceptions

        try:
            resolved = resolver.lookup(reference)
        except referencing.exceptions.Unresolvable:
            return schema
        if id(resolved.contents) in targets:
            return schema
        return _in_place(resolved.contents, resolved.resolver, (*targets, id(resolved.contents)))
    return {key: _in_place(value, resolver, targets) for key, value in schema.items()}


class NotComparable(ValueError):
    """The upstream schema gives no verdict on the document."""


def upstream_comparable(kind: str, document: Any) -> bool:
    """Whether the upstream schema can judge document at all.

    v1.3.0's ArrayOfUint32, the items of vm.hwConfig.irqs, refers to "#definitions/uint32" (no slash after the
    #). jsonschema's referencing registry raises on it as soon as there is an item to check, while its older
    RefResolver reads it as uint32 and Go's validator skips it: there is no upstream verdict to hold ours to.
    Such documents are not compared, whichever jsonschema runs; our schema deliberately checks uint32 there.
    """
    if kind != "oci" or not isinstance(document, dict):
        return True
    vm = document.get("vm")
    hardware = vm.get("hwConfig") if isinstance(vm, dict) else None
    irqs = hardware.get("irqs") if isinstance(hardware, dict) else None
    return not (isinstance(irqs, list) and irqs)


def upstream_valid(kind: str, document: Any) -> bool:
    """The Debian-packaged runtime-spec schema's verdict (draft-04, cross-file references resolved)."""
    if not upstream_comparable(kind, document):
        raise NotComparable("the runtime-spec v1.3.0 schema cannot resolve the items of vm.hwConfig.irqs")
    return bool(_upstream_validator(kind).is_valid(document))


# ---------------------------------------------------------------------------------------------------------------
# Base documents


def _need(binary: str) -> str:
    found = shutil.which(binary)
    if found is None:
        raise CorpusError(
            f"{binary!r} is not installed: the schema corpus is generated by runc, crun, ctr (containerd) and "
            "podman (Debian packages runc, crun, containerd, podman, busybox-static)"
        )
    return found


def _run(argv: list[str], timeout: float = 120, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, **kwargs)
    if result.returncode != 0:
        raise CorpusError(f"{' '.join(argv)} failed with status {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result


def _runtime_spec(runtime: str, rootless: bool) -> Any:
    argv = [_need(runtime), "spec"] + (["--rootless"] if rootless else [])
    with tempfile.TemporaryDirectory(prefix=f"oci-corpus-{runtime}-") as directory:
        _run(argv, cwd=directory)
        return json.loads((Path(directory) / "config.json").read_text("utf-8"))


def _ctr_spec() -> Any:
    # Prints containerd's default spec; needs no running daemon.
    return json.loads(_run([_need("ctr"), "oci", "spec"]).stdout)


# podman create options for the two containers whose config.json is kept. The plain one is a base document.
# The second adds a host device: podman then writes the node's whole st_mode as fileMode (0o20666 = 8630 for
# /dev/null, file type bits included), which the upstream schema refuses (maximum 511) and runc accepts.
PODMAN_CONTAINERS = {
    "podman-init": [
        "--annotation", "org.example.corpus=podman",
        "--env", "CORPUS=1",
        "--cap-add", "CAP_SYS_PTRACE",
        "--pids-limit", "512",
        "--memory", "64m",
        "--cpu-shares", "512",
        "--sysctl", "kernel.msgmax=65536",
    ],
    "podman-init-device": ["--device", "/dev/null:/dev/oci-corpus-null:rw"],
}  # fmt: skip


@lru_cache(maxsize=1)
def _podman_specs() -> dict[str, Any]:
    _need("podman")
    _need("busybox")
    if os.geteuid() != 0:
        raise CorpusError("generating podman's specs needs root (podman init mounts the container's storage)")
    with tempfile.TemporaryDirectory(prefix="oci-corpus-podman-") as directory:
        _run(
            [sys.executable, "-m", "tests.documents.corpus", "podman-spec", directory],
            timeout=180,
            cwd=Path(__file__).resolve().parents[2],
        )
        return {name: json.loads((Path(directory) / f"{name}.json").read_text("utf-8")) for name in PODMAN_CONTAINERS}


def _generate_podman_specs(directory: Path) -> None:
    """Create and init the PODMAN_CONTAINERS in a throw-away podman and copy their config.json files out.

    Runs in a child subreaper process, so the conmon that `podman init` leaves behind is reaped here.
    """
    from tests.podman_env import IMAGE, PodmanEnv, become_subreaper, reap_children

    become_subreaper()
    podman = PodmanEnv(directory)

    def run(*args: str) -> str:
        result = podman.run(*args, timeout=120)
        if result.returncode != 0:
            raise CorpusError(f"podman {' '.join(args)} failed:\n{result.stdout}{result.stderr}")
        return result.stdout

    try:
        podman.import_busybox()
        for name, options in PODMAN_CONTAINERS.items():
            container = f"{name}-{os.getpid()}"
            run("create", "--pull=never", "--name", container, *options, IMAGE, "/bin/true")
            run("init", container)
            config = run("inspect", "--format", "{{.OCIConfigPath}}", container).strip()
            shutil.copyfile(config, directory / f"{name}.json")
    finally:
        podman.close()
        reap_children(deadline=time.monotonic() + 10)


_STATE_BASES: dict[str, dict[str, Any]] = {
    "runc-state-creating": {
        "ociVersion": "1.0.2-dev",
        "id": "gpu-job-1",
        "status": "creating",
        "pid": 4242,
        "bundle": "/run/containerd/io.containerd.runtime.v2.task/k8s.io/gpu-job-1",
        "annotations": {"io.kubernetes.cri.container-type": "container", "cdi.k8s.io/gpu": "nvidia.com/gpu=0"},
    },
    "runc-state-created-no-annotations": {
        "ociVersion": "1.0.2-dev",
        "id": "b7c1f0e2a9d3",
        "status": "created",
        "pid": 31337,
        "bundle": "/var/lib/containers/storage/overlay-containers/b7c1f0e2a9d3/userdata",
    },
    "crun-state-created": {
        "ociVersion": "1.0.0",
        "id": "c0ffee",
        "status": "created",
        "pid": 2718,
        "bundle": "/tmp/bundle",
        "root": "/tmp/bundle/rootfs",
        "annotations": {"org.opencontainers.image.title": "busybox"},
    },
    "runc-state-stopped": {
        "ociVersion": "1.0.2-dev",
        "id": "finished",
        "status": "stopped",
        "bundle": "/srv/bundles/finished",
        "annotations": {},
    },
}


@lru_cache(maxsize=1)
def base_documents() -> list[Entry]:
    """The real generated specs and the hand-written states, each as (name, kind, document)."""
    configs = [
        ("runc-spec", _runtime_spec("runc", rootless=False)),
        ("runc-spec-rootless", _runtime_spec("runc", rootless=True)),
        ("crun-spec", _runtime_spec("crun", rootless=False)),
        ("crun-spec-rootless", _runtime_spec("crun", rootless=True)),
        ("ctr-oci-spec", _ctr_spec()),
    ]
    podman = _podman_specs()
    configs.append(("podman-init", podman["podman-init"]))
    entries: list[Entry] = [(name, "oci", document) for name, document in configs]
    entries += [(name, "oci-state", document) for name, document in _STATE_BASES.items()]
    return entries


@lru_cache(maxsize=1)
def other_real_documents() -> list[Entry]:
    """Real generated documents that are not base documents, because the upstream schema may refuse them."""
    return [("podman-init-device", "oci", _podman_specs()["podman-init-device"])]


# ---------------------------------------------------------------------------------------------------------------
# Enrichment: a valid fragment that fills every section, merged into each generated config


def _hook(stage: str) -> dict[str, Any]:
    return {
        "path": "/usr/bin/nvidia-oci-hook",
        "args": ["nvidia-oci-hook", stage],
        "env": ["PATH=/usr/bin:/bin"],
        "timeout": 10,
    }


_HOOK_STAGES = ("prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop")
_ID_MAP = [{"containerID": 0, "hostID": 100000, "size": 65536}]
_BLOCK_THROTTLE = [{"major": 8, "minor": 0, "rate": 1048576}]

_ENRICHMENT: dict[str, Any] = {
    "hostname": "corpus",
    "domainname": "example.org",
    "annotations": {"org.example/owner": "corpus", "cdi.k8s.io/gpu": "nvidia.com/gpu=all"},
    "root": {"readonly": False},
    "process": {
        "terminal": False,
        "consoleSize": {"height": 24, "width": 80},
        "commandLine": "sh -c true",
        "user": {"umask": 18, "additionalGids": [5, 10], "username": "root"},
        "capabilities": {"inheritable": [], "ambient": ["CAP_CHOWN"]},
        "apparmorProfile": "unconfined",
        "oomScoreAdj": 100,
        "selinuxLabel": "system_u:system_r:container_t:s0:c1,c2",
        "noNewPrivileges": True,
        "rlimits": [{"type": "RLIMIT_NPROC", "soft": 1024, "hard": 2048}],
        "ioPriority": {"class": "IOPRIO_CLASS_BE", "priority": 4},
        "scheduler": {
            "policy": "SCHED_DEADLINE",
            "nice": 0,
            "priority": 0,
            "flags": ["SCHED_FLAG_RESET_ON_FORK"],
            "runtime": 10000000,
            "deadline": 20000000,
            "period": 30000000,
        },
        "execCPUAffinity": {"initial": "0", "final": "0-1"},
    },
    "mounts": [
        {
            "destination": "/mnt/idmapped",
            "source": "/srv/data",
            "type": "bind",
            "options": ["rbind", "ro", "idmap"],
            "uidMappings": _ID_MAP,
            "gidMappings": _ID_MAP,
        }
    ],
    "hooks": {stage: [_hook(stage)] for stage in _HOOK_STAGES},
    "linux": {
        "devices": [
            {"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0, "fileMode": 438, "uid": 0, "gid": 0},
            {"path": "/dev/nvidiactl", "type": "c", "major": 195, "minor": 255, "fileMode": 438},
            {"path": "/dev/loop0", "type": "b", "major": 7, "minor": 0},
            {"path": "/dev/corpus-fifo", "type": "p"},
        ],
        "uidMappings": _ID_MAP,
        "gidMappings": _ID_MAP,
        "netDevices": {"eth1": {"name": "ctr1"}},
        "namespaces": [{"type": "cgroup"}, {"type": "time"}, {"type": "network", "path": "/var/run/netns/corpus"}],
        "timeOffsets": {"monotonic": {"secs": 3600, "nanosecs": 0}, "boottime": {"secs": -60, "nanosecs": 500}},
        "resources": {
            "devices": [{"allow": True, "type": "c", "major": 195, "minor": 0, "access": "rw"}],
            "pids": {"limit": 1024},
            "blockIO": {
                "weight": 500,
                "leafWeight": 300,
                "weightDevice": [{"major": 8, "minor": 0, "weight": 500, "leafWeight": 300}],
                "throttleReadBpsDevice": _BLOCK_THROTTLE,
                "throttleWriteBpsDevice": _BLOCK_THROTTLE,
                "throttleReadIOPSDevice": _BLOCK_THROTTLE,
                "throttleWriteIOPSDevice": _BLOCK_THROTTLE,
            },
            "cpu": {
                "cpus": "0-1",
                "mems": "0",
                "shares": 1024,
                "quota": 100000,
                "burst": 0,
                "period": 100000,
                "realtimeRuntime": 0,
                "realtimePeriod": 1000000,
                "idle": 0,
            },
            "hugepageLimits": [{"pageSize": "2MB", "limit": 0}, {"pageSize": "1GB", "limit": 1073741824}],
            "memory": {
                "limit": 536870912,
                "reservation": 268435456,
                "swap": 536870912,
                "kernel": -1,
                "kernelTCP": -1,
                "swappiness": 60,
                "disableOOMKiller": False,
                "useHierarchy": True,
                "checkBeforeUpdate": False,
            },
            "network": {"classID": 1048577, "priorities": [{"name": "eth0", "priority": 5}]},
            "rdma": {"mlx5_0": {"hcaHandles": 3, "hcaObjects": 10000}},
            "unified": {"memory.high": "max", "io.weight": "default 100"},
        },
        "cgroupsPath": "/oci-corpus/container",
        "rootfsPropagation": "private",
        "seccomp": {
            "defaultAction": "SCMP_ACT_ERRNO",
            "defaultErrnoRet": 1,
            "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86"],
            "flags": ["SECCOMP_FILTER_FLAG_LOG"],
            "listenerPath": "/run/corpus-seccomp.sock",
            "listenerMetadata": "corpus",
            "syscalls": [
                {"names": ["read", "write"], "action": "SCMP_ACT_ALLOW"},
                {"names": ["mkdir"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1},
                {
                    "names": ["personality"],
                    "action": "SCMP_ACT_ALLOW",
                    "args": [
                        {"index": 0, "value": 0, "op": "SCMP_CMP_EQ"},
                        {"index": 0, "value": 8, "valueTwo": 8, "op": "SCMP_CMP_MASKED_EQ"},
                    ],
                },
            ],
        },
        "sysctl": {"net.ipv4.ip_forward": "1"},
        "maskedPaths": ["/proc/driver/nvidia/params"],
        "readonlyPaths": ["/proc/driver/nvidia"],
        "mountLabel": "system_u:object_r:container_file_t:s0:c1,c2",
        "intelRdt": {
            "closID": "corpus",
            "schemata": ["L3:0=ff", "MB:0=50"],
            "l3CacheSchema": "L3:0=ff",
            "memBwSchema": "MB:0=50",
            "enableMonitoring": True,
        },
        "memoryPolicy": {"mode": "MPOL_BIND", "nodes": "0", "flags": ["MPOL_F_STATIC_NODES"]},
        "personality": {"domain": "LINUX", "flags": []},
    },
    "solaris": {
        "milestone": "svc:/milestone/container:default",
        "limitpriv": "default",
        "maxShmMemory": "512m",
        "cappedCPU": {"ncpus": "8"},
        "cappedMemory": {"physical": "512m", "swap": "512m"},
        "anet": [
            {
                "linkname": "net0",
                "lowerLink": "net2",
                "allowedAddress": "172.17.0.2/16",
                "configureAllowedAddress": "true",
                "defrouter": "172.17.0.1/16",
                "macAddress": "02:42:f8:52:c7:16",
                "linkProtection": "mac-nospoof, ip-nospoof",
            }
        ],
    },
    "windows": {
        "layerFolders": ["C:\\layers\\layer1", "C:\\layers\\layer2"],
        "devices": [{"id": "24E552D7-6523-47F7-A647-D3465BF1F5CA", "idType": "class"}],
        "resources": {
            "memory": {"limit": 2097152},
            "cpu": {"count": 2, "shares": 256, "maximum": 5000, "affinity": {"mask": 3, "group": 0}},
            "storage": {"iops": 1000, "bps": 1000000, "sandboxSize": 20},
        },
        "network": {
            "endpointList": ["7a010682-17e0-4455-a838-02e5d9655fe6"],
            "allowUnqualifiedDNSQuery": True,
            "DNSSearchList": ["a.com"],
            "networkSharedContainerName": "shared",
            "networkNamespace": "ns",
        },
        "credentialSpec": {"ActiveDirectoryConfig": {"GroupManagedServiceAccounts": []}},
        "servicing": False,
        "ignoreFlushesDuringBoot": True,
        "hyperv": {"utilityVMPath": "C:\\path\\to\\uvm"},
    },
    "vm": {
        "hypervisor": {"path": "/usr/bin/qemu-system-x86_64", "parameters": ["-machine", "q35"]},
        "kernel": {"path": "/boot/vmlinuz", "parameters": ["console=ttyS0"], "initrd": "/boot/initrd.img"},
        "image": {"path": "/var/lib/images/rootfs.qcow2", "format": "qcow2"},
        "hwConfig": {
            "deviceTree": "/boot/corpus.dtb",
            "vcpus": 2,
            "memory": 1073741824,
            "dtdevs": ["/soc/serial@1c28000"],
            "iomems": [{"firstGFN": 0, "firstMFN": 4096, "nrMFNs": 16}, {"firstMFN": 8192, "nrMFNs": 1}],
            "irqs": [],
        },
    },
    "zos": {"namespaces": [{"type": "pid"}, {"type": "mount", "path": "/proc/1/ns/mnt"}]},
    "freebsd": {
        "devices": [{"path": "null", "mode": 438}],
        "jail": {
            "parent": "host",
            "host": "new",
            "ip4": "inherit",
            "ip4Addr": ["192.0.2.10"],
            "ip6": "disable",
            "ip6Addr": [],
            "vnet": "inherit",
            "interface": "em0",
            "vnetInterfaces": ["epair0b"],
            "sysvmsg": "new",
            "sysvsem": "new",
            "sysvshm": "disable",
            "enforceStatfs": 2,
            "allow": {
                "setHostname": False,
                "rawSockets": False,
                "chflags": False,
                "mount": ["nullfs"],
                "quotas": False,
                "socketAf": False,
                "mlock": False,
                "reservedPorts": False,
                "suser": True,
            },
        },
    },
}


def _merge(base: Any, extra: Any) -> Any:
    """Objects merge key by key, arrays are concatenated, anything else is replaced."""
    if isinstance(base, dict) and isinstance(extra, dict):
        merged = dict(base)
        for key, value in extra.items():
            merged[key] = _merge(base[key], value) if key in base else copy.deepcopy(value)
        return merged
    if isinstance(base, list) and isinstance(extra, list):
        return copy.deepcopy(base) + copy.deepcopy(extra)
    return copy.deepcopy(extra)


def enrich(document: Any) -> Any:
    return _merge(document, _ENRICHMENT)


# ---------------------------------------------------------------------------------------------------------------
# Targeted cases: a path in an enriched config (or a state), the value to put there, and the verdict expected


def _stage_cases() -> list[tuple[str, Path_, Any, bool]]:
    cases: list[tuple[str, Path_, Any, bool]] = []
    for stage in _HOOK_STAGES:
        cases += [
            (f"hooks.{stage} timeout 0", ("hooks", stage, -1, "timeout"), 0, False),
            (f"hooks.{stage} path missing", ("hooks", stage, -1, "path"), DELETE, False),
        ]
    return cases


_DEVICE = ("linux", "devices", -4)  # the enriched /dev/nvidia0 entry
_RESOURCES = ("linux", "resources")
_BLKIO = (*_RESOURCES, "blockIO")
_SECCOMP = ("linux", "seccomp")
_SYSCALL = (*_SECCOMP, "syscalls", -1)

CONFIG_CASES: list[tuple[str, Path_, Any, bool]] = [
    ("ociVersion missing", ("ociVersion",), DELETE, False),
    ("ociVersion number", ("ociVersion",), 1.0, False),
    ("ociVersion free-form", ("ociVersion",), "not a version", True),
    ("ociVersion 1.0.2-dev", ("ociVersion",), "1.0.2-dev", True),
    ("ociVersion 1.3.0+dev", ("ociVersion",), "1.3.0+dev", True),
    ("document is an array", (), [], False),
    ("document is null", (), None, False),
    ("root.path missing", ("root", "path"), DELETE, False),
    ("root.readonly as string", ("root", "readonly"), "true", False),
    ("root missing", ("root",), DELETE, True),
    ("process.cwd missing", ("process", "cwd"), DELETE, False),
    ("process.cwd relative", ("process", "cwd"), "relative/dir", True),
    ("process missing", ("process",), DELETE, True),
    ("process.args null", ("process", "args"), None, False),
    ("process.env with a number", ("process", "env"), ["A=1", 2], False),
    ("process.env entry without =", ("process", "env"), ["NOEQUALS"], True),
    ("process.terminal as string", ("process", "terminal"), "yes", False),
    ("consoleSize width missing", ("process", "consoleSize", "width"), DELETE, False),
    ("consoleSize height 1.0", ("process", "consoleSize", "height"), 1.0, False),
    ("consoleSize height -1", ("process", "consoleSize", "height"), -1, False),
    ("consoleSize height max uint64", ("process", "consoleSize", "height"), 2**64 - 1, True),
    ("consoleSize height over uint64", ("process", "consoleSize", "height"), 2**64, False),
    ("user.uid max uint32", ("process", "user", "uid"), 2**32 - 1, True),
    ("user.uid over uint32", ("process", "user", "uid"), 2**32, False),
    ("user.uid negative", ("process", "user", "uid"), -1, False),
    ("user.gid 0.0", ("process", "user", "gid"), 0.0, False),
    ("user.umask over uint32", ("process", "user", "umask"), 2**32, False),
    ("user.additionalGids as strings", ("process", "user", "additionalGids"), ["5"], False),
    ("user.username number", ("process", "user", "username"), 0, False),
    ("oomScoreAdj -1000", ("process", "oomScoreAdj"), -1000, True),
    ("oomScoreAdj unbounded", ("process", "oomScoreAdj"), 2**70, True),
    ("oomScoreAdj 1.5", ("process", "oomScoreAdj"), 1.5, False),
    ("noNewPrivileges 1", ("process", "noNewPrivileges"), 1, False),
    ("capabilities.ambient as string", ("process", "capabilities", "ambient"), "CAP_CHOWN", False),
    ("capabilities unknown name", ("process", "capabilities", "ambient"), ["CAP_NOT_A_THING"], True),
    ("capabilities unknown set", ("process", "capabilities", "extra"), 5, True),
    ("rlimit type lower case", ("process", "rlimits", -1, "type"), "RLIMIT_nproc", False),
    ("rlimit type trailing newline", ("process", "rlimits", -1, "type"), "RLIMIT_NPROC\n", True),
    ("rlimit type with digit", ("process", "rlimits", -1, "type"), "RLIMIT_NPROC2", False),
    ("rlimit type unknown name", ("process", "rlimits", -1, "type"), "RLIMIT_BOGUS", True),
    ("rlimit soft missing", ("process", "rlimits", -1, "soft"), DELETE, False),
    ("rlimit hard negative", ("process", "rlimits", -1, "hard"), -1, False),
    ("rlimit hard over uint64", ("process", "rlimits", -1, "hard"), 2**64, False),
    ("rlimit soft above hard", ("process", "rlimits", -1, "soft"), 4096, True),
    ("hostname number", ("hostname",), 5, False),
    ("domainname null", ("domainname",), None, False),
    ("mounts as object", ("mounts",), {}, False),
    ("mount destination missing", ("mounts", 0, "destination"), DELETE, False),
    ("mount source missing", ("mounts", 0, "source"), DELETE, True),
    ("mount options as string", ("mounts", 0, "options"), "ro", False),
    ("mount idmap size over uint32", ("mounts", -1, "uidMappings", 0, "size"), 2**32, False),
    ("mount idmap hostID missing", ("mounts", -1, "gidMappings", 0, "hostID"), DELETE, False),
    *_stage_cases(),
    ("hook timeout 1", ("hooks", "prestart", -1, "timeout"), 1, True),
    ("hook timeout 1.0", ("hooks", "poststop", -1, "timeout"), 1.0, False),
    ("hook timeout unbounded", ("hooks", "poststart", -1, "timeout"), 2**70, True),
    ("hook path relative", ("hooks", "createRuntime", -1, "path"), "relative/hook", True),
    ("hook env as string", ("hooks", "createContainer", -1, "env"), "PATH=/bin", False),
    ("hooks unknown stage", ("hooks", "precreate"), [{"nonsense": 1}], True),
    ("hooks.prestart as object", ("hooks", "prestart"), {}, False),
    ("annotation number value", ("annotations", "n"), 1, False),
    ("annotation empty key, number value", ("annotations", ""), 1, True),
    ("annotation newline key, number value", ("annotations", "\n"), 1, True),
    ("annotation 'a\\n' key, number value", ("annotations", "a\n"), 1, False),
    ("annotations as array", ("annotations",), [], False),
    ("device fileMode 511", (*_DEVICE, "fileMode"), 511, True),
    ("device fileMode 512", (*_DEVICE, "fileMode"), 512, False),
    ("device fileMode 513", (*_DEVICE, "fileMode"), 513, False),
    ("device fileMode -1", (*_DEVICE, "fileMode"), -1, False),
    ("device fileMode 438.0", (*_DEVICE, "fileMode"), 438.0, False),
    ("device type u", (*_DEVICE, "type"), "u", True),
    ("device type c + newline", (*_DEVICE, "type"), "c\n", True),
    ("device type c + two newlines", (*_DEVICE, "type"), "c\n\n", False),
    ("device type C", (*_DEVICE, "type"), "C", False),
    ("device type cb", (*_DEVICE, "type"), "cb", False),
    ("device type empty", (*_DEVICE, "type"), "", False),
    ("device type missing", (*_DEVICE, "type"), DELETE, False),
    ("device path missing", (*_DEVICE, "path"), DELETE, False),
    ("device major missing", (*_DEVICE, "major"), DELETE, True),
    ("device major negative", (*_DEVICE, "major"), -1, True),
    ("device major max int64", (*_DEVICE, "major"), 2**63 - 1, True),
    ("device major over int64", (*_DEVICE, "major"), 2**63, False),
    ("device minor min int64", (*_DEVICE, "minor"), -(2**63), True),
    ("device minor under int64", (*_DEVICE, "minor"), -(2**63) - 1, False),
    ("device minor as string", (*_DEVICE, "minor"), "0", False),
    ("device uid over uint32", (*_DEVICE, "uid"), 2**32, False),
    ("linux.devices as object", ("linux", "devices"), {"path": "/dev/x", "type": "c"}, False),
    ("cgroup rule allow missing", (*_RESOURCES, "devices", -1, "allow"), DELETE, False),
    ("cgroup rule allow as string", (*_RESOURCES, "devices", -1, "allow"), "true", False),
    ("cgroup rule type free string", (*_RESOURCES, "devices", -1, "type"), "z", True),
    ("cgroup rule access free string", (*_RESOURCES, "devices", -1, "access"), "xyz", True),
    ("cgroup rule major -1", (*_RESOURCES, "devices", -1, "major"), -1, True),
    ("pids.limit missing", (*_RESOURCES, "pids", "limit"), DELETE, False),
    ("pids.limit -1", (*_RESOURCES, "pids", "limit"), -1, True),
    ("pids.limit 1.0", (*_RESOURCES, "pids", "limit"), 1.0, False),
    ("blockIO weight 65535", (*_BLKIO, "weight"), 65535, True),
    ("blockIO weight 65536", (*_BLKIO, "weight"), 65536, False),
    ("blockIO leafWeight -1", (*_BLKIO, "leafWeight"), -1, False),
    ("weightDevice major missing", (*_BLKIO, "weightDevice", 0, "major"), DELETE, False),
    ("weightDevice weight 65536", (*_BLKIO, "weightDevice", 0, "weight"), 65536, False),
    ("weightDevice as string", (*_BLKIO, "weightDevice", 0), "8:0 500", False),
    ("weightDevice unknown key", (*_BLKIO, "weightDevice", 0, "extra"), "x", True),
    ("throttle rate negative", (*_BLKIO, "throttleReadBpsDevice", 0, "rate"), -1, False),
    ("throttle rate missing", (*_BLKIO, "throttleWriteBpsDevice", 0, "rate"), DELETE, True),
    ("throttle minor missing", (*_BLKIO, "throttleReadIOPSDevice", 0, "minor"), DELETE, False),
    ("throttle entry as number", (*_BLKIO, "throttleWriteIOPSDevice", 0), 8, False),
    ("cpu.quota -1", (*_RESOURCES, "cpu", "quota"), -1, True),
    ("cpu.period -1", (*_RESOURCES, "cpu", "period"), -1, False),
    ("cpu.shares over uint64", (*_RESOURCES, "cpu", "shares"), 2**64, False),
    ("cpu.idle 1.0", (*_RESOURCES, "cpu", "idle"), 1.0, False),
    ("cpu.cpus as number", (*_RESOURCES, "cpu", "cpus"), 3, False),
    ("cpu.burst negative", (*_RESOURCES, "cpu", "burst"), -1, False),
    ("hugepage 2MB + newline", (*_RESOURCES, "hugepageLimits", 0, "pageSize"), "2MB\n", True),
    ("hugepage 2mb", (*_RESOURCES, "hugepageLimits", 0, "pageSize"), "2mb", False),
    ("hugepage 02MB", (*_RESOURCES, "hugepageLimits", 0, "pageSize"), "02MB", False),
    ("hugepage 1TB", (*_RESOURCES, "hugepageLimits", 0, "pageSize"), "1TB", False),
    ("hugepage 64KB", (*_RESOURCES, "hugepageLimits", 0, "pageSize"), "64KB", True),
    ("hugepage limit missing", (*_RESOURCES, "hugepageLimits", 1, "limit"), DELETE, False),
    ("memory.limit -1", (*_RESOURCES, "memory", "limit"), -1, True),
    ("memory.swap over int64", (*_RESOURCES, "memory", "swap"), 2**63, False),
    ("memory.swappiness -1", (*_RESOURCES, "memory", "swappiness"), -1, False),
    ("memory.swappiness 200", (*_RESOURCES, "memory", "swappiness"), 200, True),
    ("memory.disableOOMKiller 0", (*_RESOURCES, "memory", "disableOOMKiller"), 0, False),
    ("network.classID over uint32", (*_RESOURCES, "network", "classID"), 2**32, False),
    ("network priority name missing", (*_RESOURCES, "network", "priorities", 0, "name"), DELETE, False),
    ("rdma value a number", (*_RESOURCES, "rdma", "mlx5_1"), 5, False),
    ("rdma empty key, number value", (*_RESOURCES, "rdma", ""), 5, False),
    ("rdma hcaHandles -1", (*_RESOURCES, "rdma", "mlx5_0", "hcaHandles"), -1, False),
    ("rdma empty limits", (*_RESOURCES, "rdma", "mlx5_1"), {}, True),
    ("unified number value", (*_RESOURCES, "unified", "cpu.max"), 100000, False),
    ("unified empty key, number value", (*_RESOURCES, "unified", ""), 1, True),
    ("namespace type time", ("linux", "namespaces", -1, "type"), "time", True),
    ("namespace type Time", ("linux", "namespaces", -1, "type"), "Time", False),
    ("namespace type missing", ("linux", "namespaces", -1, "type"), DELETE, False),
    ("namespace path number", ("linux", "namespaces", -1, "path"), 1, False),
    ("namespace as string", ("linux", "namespaces", -1), "pid", False),
    ("uidMapping containerID missing", ("linux", "uidMappings", -1, "containerID"), DELETE, False),
    ("gidMapping size 1.0", ("linux", "gidMappings", -1, "size"), 1.0, False),
    ("seccomp defaultAction missing", (*_SECCOMP, "defaultAction"), DELETE, False),
    ("seccomp defaultAction KILL_THREAD", (*_SECCOMP, "defaultAction"), "SCMP_ACT_KILL_THREAD", True),
    ("seccomp defaultAction lower case", (*_SECCOMP, "defaultAction"), "scmp_act_errno", False),
    ("seccomp arch LOONGARCH64", (*_SECCOMP, "architectures", -1), "SCMP_ARCH_LOONGARCH64", True),
    ("seccomp arch SHEB", (*_SECCOMP, "architectures", -1), "SCMP_ARCH_SHEB", True),
    ("seccomp arch SPARC", (*_SECCOMP, "architectures", -1), "SCMP_ARCH_SPARC", False),
    ("seccomp flag unknown", (*_SECCOMP, "flags", -1), "SECCOMP_FILTER_FLAG_NEW_LISTENER", False),
    ("seccomp defaultErrnoRet -1", (*_SECCOMP, "defaultErrnoRet"), -1, False),
    ("syscall names empty", (*_SYSCALL, "names"), [], False),
    ("syscall action missing", (*_SYSCALL, "action"), DELETE, False),
    ("syscall errnoRet over uint32", (*_SYSCALL, "errnoRet"), 2**32, False),
    ("syscall arg op unknown", (*_SYSCALL, "args", -1, "op"), "SCMP_CMP_IN", False),
    ("syscall arg value missing", (*_SYSCALL, "args", -1, "value"), DELETE, False),
    ("syscall arg valueTwo missing", (*_SYSCALL, "args", -1, "valueTwo"), DELETE, True),
    ("syscall arg valueTwo -1", (*_SYSCALL, "args", -1, "valueTwo"), -1, False),
    ("sysctl number value", ("linux", "sysctl", "kernel.shmmax"), 1, False),
    ("maskedPaths with a number", ("linux", "maskedPaths", -1), 7, False),
    ("mountLabel number", ("linux", "mountLabel"), 1, False),
    ("cgroupsPath number", ("linux", "cgroupsPath"), 1, False),
    ("rootfsPropagation rslave", ("linux", "rootfsPropagation"), "rslave", False),
    ("rootfsPropagation unbindable", ("linux", "rootfsPropagation"), "unbindable", True),
    ("rootfsPropagation empty", ("linux", "rootfsPropagation"), "", False),
    ("memBwSchema + newline", ("linux", "intelRdt", "memBwSchema"), "MB:0=50\n", True),
    ("memBwSchema two lines", ("linux", "intelRdt", "memBwSchema"), "MB:0=50\nL3:0=ff", False),
    ("memBwSchema lower case", ("linux", "intelRdt", "memBwSchema"), "mb:0=50", False),
    ("intelRdt.enableCMT as string", ("linux", "intelRdt", "enableCMT"), "true", True),
    ("intelRdt.schemata as string", ("linux", "intelRdt", "schemata"), "L3:0=ff", False),
    ("intelRdt.enableMonitoring as string", ("linux", "intelRdt", "enableMonitoring"), "true", False),
    ("ioPriority class missing", ("process", "ioPriority", "class"), DELETE, False),
    ("ioPriority class lower case", ("process", "ioPriority", "class"), "ioprio_class_be", False),
    ("ioPriority priority missing", ("process", "ioPriority", "priority"), DELETE, True),
    ("ioPriority priority over int32", ("process", "ioPriority", "priority"), 2**31, False),
    ("scheduler policy missing", ("process", "scheduler", "policy"), DELETE, False),
    ("scheduler policy SCHED_NORMAL", ("process", "scheduler", "policy"), "SCHED_NORMAL", False),
    ("scheduler nice min int32", ("process", "scheduler", "nice"), -(2**31), True),
    ("scheduler nice under int32", ("process", "scheduler", "nice"), -(2**31) - 1, False),
    ("scheduler flag unknown", ("process", "scheduler", "flags", -1), "SCHED_FLAG_ALL", False),
    ("scheduler runtime negative", ("process", "scheduler", "runtime"), -1, False),
    ("execCPUAffinity list with range", ("process", "execCPUAffinity", "initial"), "0-3, 7", True),
    ("execCPUAffinity + newline", ("process", "execCPUAffinity", "final"), "0-3\n", True),
    ("execCPUAffinity with a letter", ("process", "execCPUAffinity", "final"), "0-3,x", False),
    ("timeOffsets secs as string", ("linux", "timeOffsets", "monotonic", "secs"), "3600", False),
    ("timeOffsets nanosecs negative", ("linux", "timeOffsets", "boottime", "nanosecs"), -1, False),
    ("timeOffsets other clock, anything", ("linux", "timeOffsets", "realtime"), 5, True),
    ("netDevices value a string", ("linux", "netDevices", "eth2"), "ctr2", False),
    ("netDevices name number", ("linux", "netDevices", "eth1", "name"), 1, False),
    ("netDevices empty entry", ("linux", "netDevices", "eth2"), {}, True),
    ("memoryPolicy mode missing", ("linux", "memoryPolicy", "mode"), DELETE, True),
    ("memoryPolicy mode unknown", ("linux", "memoryPolicy", "mode"), "MPOL_NUMA", False),
    ("memoryPolicy flag unknown", ("linux", "memoryPolicy", "flags", -1), "MPOL_F_MOF", False),
    ("personality LINUX32", ("linux", "personality", "domain"), "LINUX32", True),
    ("personality linux64", ("linux", "personality", "domain"), "LINUX64", False),
    ("personality as string", ("linux", "personality"), "LINUX", False),
    ("personality as array", ("linux", "personality"), [], False),
    ("personality flags with a number", ("linux", "personality", "flags"), [1], False),
    ("solaris anet linkname number", ("solaris", "anet", 0, "linkname"), 0, False),
    ("solaris cappedCPU as string", ("solaris", "cappedCPU"), "8", False),
    ("windows layerFolders empty", ("windows", "layerFolders"), [], False),
    ("windows layerFolders missing", ("windows", "layerFolders"), DELETE, False),
    ("windows device idType vpci", ("windows", "devices", 0, "idType"), "vpci", False),
    ("windows device id missing", ("windows", "devices", 0, "id"), DELETE, False),
    ("windows cpu.shares 65536", ("windows", "resources", "cpu", "shares"), 65536, False),
    ("windows credentialSpec as array", ("windows", "credentialSpec"), [], False),
    ("windows credentialSpec anything", ("windows", "credentialSpec"), {"x": [1, None]}, True),
    ("vm kernel missing", ("vm", "kernel"), DELETE, False),
    ("vm kernel.path missing", ("vm", "kernel", "path"), DELETE, False),
    ("vm hypervisor.path missing", ("vm", "hypervisor", "path"), DELETE, False),
    ("vm hypervisor missing", ("vm", "hypervisor"), DELETE, True),
    ("vm image format iso", ("vm", "image", "format"), "iso", False),
    ("vm image format missing", ("vm", "image", "format"), DELETE, False),
    ("windows cpu.affinity as array", ("windows", "resources", "cpu", "affinity"), [{"mask": 3, "group": 0}], False),
    ("windows cpu.affinity group -1", ("windows", "resources", "cpu", "affinity", "group"), -1, False),
    ("vm hwConfig vcpus over uint32", ("vm", "hwConfig", "vcpus"), 2**32, False),
    ("vm hwConfig irqs as string", ("vm", "hwConfig", "irqs"), "5", False),
    ("vm iomem nrMFNs missing", ("vm", "hwConfig", "iomems", 0, "nrMFNs"), DELETE, False),
    ("vm second iomem unchecked", ("vm", "hwConfig", "iomems", 1), {"firstMFN": -1}, True),
    ("zos devices, anything", ("zos", "devices"), [{"major": "x"}], True),
    ("zos namespace type network", ("zos", "namespaces", 0, "type"), "network", False),
    ("zos namespace type missing", ("zos", "namespaces", -1, "type"), DELETE, False),
    ("freebsd device mode 512", ("freebsd", "devices", 0, "mode"), 512, False),
    ("freebsd device path missing", ("freebsd", "devices", 0, "path"), DELETE, True),
    ("freebsd vnet disable", ("freebsd", "jail", "vnet"), "disable", False),
    ("freebsd ip4 disable", ("freebsd", "jail", "ip4"), "disable", True),
    ("freebsd enforceStatfs 255", ("freebsd", "jail", "enforceStatfs"), 255, True),
    ("freebsd enforceStatfs 256", ("freebsd", "jail", "enforceStatfs"), 256, False),
    ("freebsd allow.mount as string", ("freebsd", "jail", "allow", "mount"), "nullfs", False),
]

STATE_CASES: list[tuple[str, Path_, Any, bool]] = [
    *[(f"{key} missing", (key,), DELETE, False) for key in ("ociVersion", "id", "status", "bundle")],
    ("pid missing", ("pid",), DELETE, True),
    ("annotations missing", ("annotations",), DELETE, True),
    ("status paused", ("status",), "paused", False),
    ("status Running", ("status",), "Running", False),
    ("status running + newline", ("status",), "running\n", False),
    ("status empty", ("status",), "", False),
    ("status number", ("status",), 1, False),
    ("pid -1", ("pid",), -1, False),
    ("pid 0", ("pid",), 0, True),
    ("pid 1.0", ("pid",), 1.0, False),
    ("pid over uint64", ("pid",), 2**64, True),
    ("pid as string", ("pid",), "42", False),
    ("pid null", ("pid",), None, False),
    ("pid true", ("pid",), True, False),
    ("bundle null", ("bundle",), None, False),
    ("bundle relative", ("bundle",), "bundle", True),
    ("id number", ("id",), 5, False),
    ("ociVersion number", ("ociVersion",), 1.0, False),
    ("annotation number value", ("annotations", "n"), 1, False),
    ("annotation empty key, number value", ("annotations", ""), 1, True),
    ("annotations as array", ("annotations",), [], False),
    ("extra root key", ("root",), 7, True),
    ("document is an array", (), [], False),
]


# ---------------------------------------------------------------------------------------------------------------
# Editing documents by path


def _parent(document: Any, path: Path_) -> Any:
    node = document
    for key in path[:-1]:
        node = node[key]
    return node


def _has_parent(document: Any, path: Path_) -> bool:
    try:
        _parent(document, path)
    except (KeyError, IndexError, TypeError):
        return False
    return True


def apply(document: Any, path: Path_, value: Any) -> Any:
    """A deep copy of document with value at path (DELETE removes it); an empty path replaces the document."""
    if not path:
        return copy.deepcopy(value)
    result = copy.deepcopy(document)
    parent = _parent(result, path)
    key = path[-1]
    if value is DELETE and isinstance(parent, dict):
        parent.pop(key, None)
    elif value is DELETE:
        del parent[key]
    else:
        parent[key] = copy.deepcopy(value)
    return result


def _paths(node: Any, prefix: Path_ = ()) -> list[Path_]:
    """Every path below node; of a long array only the first two items and the last are walked."""
    found: list[Path_] = []
    if isinstance(node, dict):
        children: list[tuple[Key, Any]] = list(node.items())
    elif isinstance(node, list):
        indexes = range(len(node)) if len(node) <= 3 else (0, 1, len(node) - 1)
        children = [(index, node[index]) for index in indexes]
    else:
        return found
    for key, child in children:
        path = (*prefix, key)
        found.append(path)
        found += _paths(child, path)
    return found


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _pointer(path: Path_) -> str:
    return "/" + "/".join(str(key).replace("\n", "\\n") for key in path)


# ---------------------------------------------------------------------------------------------------------------
# Random mutations

_SAMPLES: list[Any] = ["text", "", 7, -7, 0, 2.5, 1.0, True, False, None, [], ["x"], [1], {}, {"k": "v"}, {"k": 1}]
_NUMBERS: list[Any] = [
    -1, 0, 1, 511, 512, 513, 65535, 65536, 2**31 - 1, 2**32 - 1, 2**32, 2**63 - 1, 2**63,
    -(2**63), -(2**63) - 1, 2**64 - 1, 2**64, 1.5, 1.0, 0.0, -2.5, 1e30,
]  # fmt: skip
_NEW_KEYS = ["x-extra", "", "\n", "zz", "type", "path", "limit", "major"]


def _string_variants(text: str) -> list[str]:
    return ["bogus", "", text + "\n", text + "\n\n", "\n" + text, text.lower(), text.upper(), text + "x", text[:1]]


class _Mutator:
    def __init__(self, rng: random.Random, document: Any) -> None:
        self.rng = rng
        self.document = document

    def leaves(self, test: Any) -> list[Path_]:
        return [path for path in _paths(self.document) if test(_parent(self.document, path)[path[-1]])]

    def containers(self, kind: type) -> list[Path_]:
        paths = [(), *_paths(self.document)]
        result = []
        for path in paths:
            node = self.document if not path else _parent(self.document, path)[path[-1]]
            if isinstance(node, kind):
                result.append(path)
        return result

    def node(self, path: Path_) -> Any:
        return self.document if not path else _parent(self.document, path)[path[-1]]

    def op_delete(self) -> str | None:
        paths = _paths(self.document)
        if not paths:
            return None
        path = self.rng.choice(paths)
        self.document = apply(self.document, path, DELETE)
        return f"delete {_pointer(path)}"

    def op_retype(self) -> str | None:
        paths = [(), *_paths(self.document)] if self.rng.random() < 0.02 else _paths(self.document)
        if not paths:
            return None
        path = self.rng.choice(paths)
        current = _kind(self.node(path))
        value = self.rng.choice([sample for sample in _SAMPLES if _kind(sample) != current])
        self.document = apply(self.document, path, value)
        return f"retype {_pointer(path)} to {json.dumps(value)}"

    def op_number(self) -> str | None:
        paths = self.leaves(lambda value: _kind(value) == "number")
        if not paths:
            return None
        path = self.rng.choice(paths)
        value = self.rng.choice(_NUMBERS)
        self.document = apply(self.document, path, value)
        return f"number {_pointer(path)} = {value!r}"

    def op_string(self) -> str | None:
        paths = self.leaves(lambda value: isinstance(value, str))
        if not paths:
            return None
        path = self.rng.choice(paths)
        value = self.rng.choice(_string_variants(self.node(path)))
        self.document = apply(self.document, path, value)
        return f"string {_pointer(path)} = {value!r}"

    def op_rename_key(self) -> str | None:
        paths = [path for path in _paths(self.document) if isinstance(path[-1], str)]
        if not paths:
            return None
        path = self.rng.choice(paths)
        old = str(path[-1])
        new = self.rng.choice([old.upper(), old[:1].upper() + old[1:], old + "\n", "", old + "s"])
        parent_path = path[:-1]
        parent = dict(self.node(parent_path))
        value = parent.pop(old)
        parent[new] = value
        self.document = apply(self.document, parent_path, parent)
        return f"rename {_pointer(path)} to {new!r}"

    def op_add_key(self) -> str | None:
        paths = self.containers(dict)
        if not paths:
            return None
        path = self.rng.choice(paths)
        key = self.rng.choice(_NEW_KEYS)
        value = self.rng.choice(_SAMPLES)
        self.document = apply(self.document, (*path, key), value)
        return f"add {_pointer((*path, key))} = {json.dumps(value)}"

    def op_append(self) -> str | None:
        paths = self.containers(list)
        if not paths:
            return None
        path = self.rng.choice(paths)
        items = self.node(path)
        value = self.rng.choice(items) if items and self.rng.random() < 0.5 else self.rng.choice(_SAMPLES)
        self.document = apply(self.document, path, [*items, value])
        return f"append to {_pointer(path)}: {json.dumps(value)[:60]}"

    def op_benign(self) -> str | None:
        """A change that keeps the type: another small integer, another string, the other boolean."""
        paths = self.leaves(lambda value: _kind(value) in ("number", "boolean", "string"))
        if not paths:
            return None
        path = self.rng.choice(paths)
        current = self.node(path)
        if isinstance(current, bool):
            value: Any = not current
        elif isinstance(current, str):
            value = self.rng.choice(["changed", current + "-2", current.strip() or "x"])
        else:
            value = self.rng.choice([0, 1, 2, 100, 4096])
        self.document = apply(self.document, path, value)
        return f"set {_pointer(path)} = {value!r}"

    OPERATIONS = (
        ("op_delete", 4),
        ("op_retype", 4),
        ("op_number", 3),
        ("op_string", 3),
        ("op_rename_key", 1),
        ("op_add_key", 2),
        ("op_append", 2),
        ("op_benign", 4),
    )

    def mutate(self) -> str:
        names = [name for name, _weight in self.OPERATIONS]
        weights = [weight for _name, weight in self.OPERATIONS]
        steps = self.rng.choices([1, 2, 3], weights=[7, 2, 1])[0]
        labels: list[str] = []
        for _attempt in range(100):
            if len(labels) == steps:
                break
            label = getattr(self, self.rng.choices(names, weights=weights)[0])()
            if label is not None:
                labels.append(label)
        return "; ".join(labels)


def mutations(seed: str, document: Any, count: int) -> list[tuple[str, Any]]:
    """count seeded random mutations of document, as (label, mutated document)."""
    rng = random.Random(seed)
    result = []
    for _index in range(count):
        mutator = _Mutator(rng, document)
        label = mutator.mutate()
        result.append((label, mutator.document))
    return result


# ---------------------------------------------------------------------------------------------------------------
# The corpus

TARGETED_CONFIG_BASES = ("runc-spec", "podman-init")
CONFIG_MUTATIONS_ENRICHED = 150
CONFIG_MUTATIONS_PLAIN = 50
STATE_MUTATIONS = 75


@lru_cache(maxsize=1)
def targeted() -> list[tuple[str, str, Any, bool]]:
    """The targeted cases, as (name, kind, document, expected verdict)."""
    result = []
    for name, kind, document in base_documents():
        if name in TARGETED_CONFIG_BASES:
            base, cases = enrich(document), CONFIG_CASES
        elif kind == "oci":
            continue
        else:
            base, cases = document, STATE_CASES
        prefix = f"{name}+enriched" if kind == "oci" else name
        for label, path, value, expected in cases:
            if not _has_parent(base, path):
                continue  # e.g. an annotation case for a state that has no annotations
            result.append((f"{prefix}: {label}", kind, apply(base, path, value), expected))
    return result


@lru_cache(maxsize=1)
def corpus() -> list[Entry]:
    """Every document of the corpus, as (name, kind, document). Cached: do not modify the documents."""
    entries: list[Entry] = []
    for name, kind, document in base_documents():
        entries.append((f"{name}", kind, document))
        if kind == "oci":
            enriched = enrich(document)
            entries.append((f"{name}+enriched", kind, enriched))
            plain = mutations(f"{name}/plain", document, CONFIG_MUTATIONS_PLAIN)
            rich = mutations(f"{name}/enriched", enriched, CONFIG_MUTATIONS_ENRICHED)
            entries += [(f"{name} #{index}: {label}", kind, doc) for index, (label, doc) in enumerate(plain)]
            entries += [(f"{name}+enriched #{index}: {label}", kind, doc) for index, (label, doc) in enumerate(rich)]
        else:
            states = mutations(name, document, STATE_MUTATIONS)
            entries += [(f"{name} #{index}: {label}", kind, doc) for index, (label, doc) in enumerate(states)]
    entries += other_real_documents()
    entries += [(name, kind, document) for name, kind, document, _expected in targeted()]
    # A mutation can put items into vm.hwConfig.irqs, where the upstream schema has no verdict.
    return [(name, kind, document) for name, kind, document in entries if upstream_comparable(kind, document)]


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[1] == "podman-spec":
        _generate_podman_specs(Path(argv[2]))
        return 0
    print(f"usage: {argv[0]} podman-spec DIRECTORY", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
