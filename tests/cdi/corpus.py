"""CDI specs for the tests: NVIDIA-style specs in the shape `nvidia-ctk cdi generate` writes, and seeded
mutations of them that reach every check of the CDI library's loader."""

from __future__ import annotations

import copy
import json
import random
import re
from pathlib import Path
from typing import Any, Callable, Optional

import yaml

LIB = "/usr/lib/x86_64-linux-gnu"
DRIVER_VERSION = "550.54.15"
LIBRARIES = (
    "libcuda.so",
    "libnvidia-ml.so",
    "libnvidia-ptxjitcompiler.so",
    "libnvidia-nvvm.so",
    "libcudadebugger.so",
    "libnvidia-opencl.so",
)
BINARIES = ("/usr/bin/nvidia-smi", "/usr/bin/nvidia-debugdump", "/usr/bin/nvidia-persistenced")
CDI_HOOK = "/usr/bin/nvidia-cdi-hook"


def _root(driver_root: str, path: str) -> str:
    return path if driver_root == "/" else driver_root.rstrip("/") + path


def _node(path: str, driver_root: str) -> dict[str, Any]:
    node: dict[str, Any] = {"path": path}
    if driver_root != "/":
        node["hostPath"] = _root(driver_root, path)
    return node


def gpu_nodes(index: int, driver_root: str = "/") -> list[dict[str, Any]]:
    return [_node(f"/dev/nvidia{index}", driver_root), _node(f"/dev/dri/card{index + 1}", driver_root),
            _node(f"/dev/dri/renderD{128 + index}", driver_root)]  # fmt: skip


def _dri_hook(index: int) -> dict[str, Any]:
    bus = f"0000:{0x07 + index:02x}:00.0"
    return {
        "hookName": "createContainer",
        "path": CDI_HOOK,
        "args": ["nvidia-cdi-hook", "create-symlinks",
                 "--link", f"../card{index + 1}::/dev/dri/by-path/pci-{bus}-card",
                 "--link", f"../renderD{128 + index}::/dev/dri/by-path/pci-{bus}-render"],
    }  # fmt: skip


def nvidia_spec(
    gpus: int = 2, driver_root: str = "/", naming: str = "index", version: Optional[str] = None, compact: bool = False
) -> dict[str, Any]:
    """A spec in the shape of `nvidia-ctk cdi generate --driver-root=...` for a node with `gpus` GPUs; compact
    keeps two libraries and one binary (the mutation corpus: YAML parsing in Python is slow)."""
    libraries = LIBRARIES[:2] if compact else LIBRARIES
    binaries = BINARIES[:1] if compact else BINARIES
    devices = []
    for index in range(gpus):
        name = str(index) if naming == "index" else f"GPU-{index:08x}-1111-2222-3333-444455556666"
        devices.append(
            {
                "name": name,
                "containerEdits": {"deviceNodes": gpu_nodes(index, driver_root), "hooks": [_dri_hook(index)]},
            }
        )
    every = [node for index in range(gpus) for node in gpu_nodes(index, driver_root)]
    devices.append(
        {"name": "all", "containerEdits": {"deviceNodes": every, "hooks": [_dri_hook(i) for i in range(gpus)]}}
    )
    mounts = [
        {"hostPath": _root(driver_root, f"{LIB}/{library}.{DRIVER_VERSION}"),
         "containerPath": f"{LIB}/{library}.{DRIVER_VERSION}", "options": ["ro", "nosuid", "nodev", "bind"]}
        for library in libraries
    ] + [
        {"hostPath": _root(driver_root, binary), "containerPath": binary, "options": ["ro", "nosuid", "nodev", "bind"]}
        for binary in binaries
    ]  # fmt: skip
    hooks = [
        {"hookName": "createContainer", "path": CDI_HOOK,
         "args": ["nvidia-cdi-hook", "create-symlinks", "--link", f"libcuda.so.1::{LIB}/libcuda.so"]},
        {"hookName": "createContainer", "path": CDI_HOOK,
         "args": ["nvidia-cdi-hook", "update-ldcache", "--folder", LIB]},
    ]  # fmt: skip
    uses_host_path = driver_root != "/"
    return {
        "cdiVersion": version or ("0.5.0" if uses_host_path or naming == "index" else "0.3.0"),
        "kind": "nvidia.com/gpu",
        "devices": devices,
        "containerEdits": {
            "env": ["NVIDIA_VISIBLE_DEVICES=void"],
            "deviceNodes": [_node(path, driver_root) for path in
                            ("/dev/nvidia-modeset", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidiactl")],
            "hooks": hooks,
            "mounts": mounts,
        },
    }  # fmt: skip


def mig_spec(compact: bool = False) -> dict[str, Any]:
    """MIG devices named as nvidia-ctk names them (GPU:MIG index), with their capability nodes."""
    spec = nvidia_spec(1, compact=compact)
    for gi in range(2):
        spec["devices"].insert(0, {
            "name": f"0:{gi}",
            "containerEdits": {"deviceNodes": [
                {"path": "/dev/nvidia0"},
                {"path": f"/dev/nvidia-caps/nvidia-cap{21 + gi * 9}"},
                {"path": f"/dev/nvidia-caps/nvidia-cap{22 + gi * 9}"},
            ]},
        })  # fmt: skip
    return spec


def dump(value: Any, as_yaml: bool, ensure_ascii: bool = False) -> bytes:
    if as_yaml:
        return yaml.safe_dump(value, sort_keys=False, allow_unicode=not ensure_ascii).encode("utf-8")
    return json.dumps(value, indent=2, ensure_ascii=ensure_ascii).encode("utf-8")


# ---------------------------------------------------------------------------------------------------------------
# Seeded mutations: each picks a place in the spec and breaks (or bends) it the way hand edits and other
# generators do. Many keep the spec valid; the library decides.

Mutation = Callable[[random.Random, dict[str, Any]], None]

STRINGS = ["", " ", "a", "0", "x y", "GPU-0", "nvidia.com/gpu", "a=b", "=x", "A=", "A=1", "é", "\U0001f600",
           "y", "no", "on", "1e3", "0x10", "08", "1:20", "~", "null", "true", "2001-12-14", ".inf", "-1", "1.5",
           "a\u00ad", "tab\tch", "\u2028", "$", "a/b"]  # fmt: skip
VERSIONS = ["0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0", "v0.5.0",
            "vv0.5.0", "0.5", "0.5.0-rc1", "", "1.0", "V0.5.0", " 0.5.0"]  # fmt: skip
KINDS = ["nvidia.com/gpu", "nvidia.com/gpu.mig", "nvidia.com", "/gpu", "nvidia.com/", "a/gpu", "nvidia.com/g",
         "1nvidia.com/gpu", "nvidia.com/gpu-", "nvidia.com/gpu/x", "nvidia_com/GPU", "nv/gp", "x.y/z.w",
         "nvidia.com/gpu ", "nvidiä.com/gpu", "vendor/class_1", "-a/b", "ab/c", "ab/cd"]  # fmt: skip
NAMES = ["0", "1", "all", "GPU-abc", "0:1", "mig-1g.5gb", "", "a", "-a", "a-", "a b", "a/b", "a=b", "é", "a.b",
         "_a", "a_", "9", "0x", "a:", "x" * 80]  # fmt: skip
HOOK_NAMES = ["createContainer", "prestart", "poststop", "createRuntime", "startContainer", "poststart",
              "CreateContainer", "create-container", "", "precreate"]  # fmt: skip
TYPES = ["", "c", "b", "u", "p", "C", "char", "x"]
PERMISSIONS = ["", "r", "rw", "rwm", "m", "rwx", "RW", "rw-", "mmm", " "]
NUMBERS: list[Any] = [0, 1, 195, 255, -1, 1.0, 1.5, 1e3, 2**31, 2**32, 2**63, 2**64, -(2**63), -(2**63) - 1,
                      1e21, 1e-7, "195", True, None, [], {}]  # fmt: skip
CLOS_IDS = ["", "gpu", "/", ".", "..", "a/b", "a\nb", "x" * 4096, "x" * 4095]


def _edits_blocks(spec: dict[str, Any]) -> list[dict[str, Any]]:
    blocks = []
    if isinstance(spec.get("containerEdits"), dict):
        blocks.append(spec["containerEdits"])
    devices = spec.get("devices")
    for device in devices if isinstance(devices, list) else []:
        if isinstance(device, dict) and isinstance(device.get("containerEdits"), dict):
            blocks.append(device["containerEdits"])
    return blocks


def _pick_block(rng: random.Random, spec: dict[str, Any]) -> dict[str, Any]:
    blocks = _edits_blocks(spec)
    if not blocks:
        spec["containerEdits"] = {}
        return spec["containerEdits"]
    return rng.choice(blocks)


def _pick_entry(rng: random.Random, spec: dict[str, Any], list_name: str) -> Optional[dict[str, Any]]:
    lists = [block.get(list_name) for block in _edits_blocks(spec)]
    candidates = [entry for items in lists if isinstance(items, list) for entry in items if isinstance(entry, dict)]
    return rng.choice(candidates) if candidates else None


def _devices(spec: dict[str, Any]) -> list[Any]:
    devices = spec.get("devices")
    if not isinstance(devices, list):
        spec["devices"] = devices = []
    return devices


def m_version(rng: random.Random, spec: dict[str, Any]) -> None:
    spec["cdiVersion"] = rng.choice(VERSIONS)


def m_kind(rng: random.Random, spec: dict[str, Any]) -> None:
    spec["kind"] = rng.choice(KINDS)


def m_device_name(rng: random.Random, spec: dict[str, Any]) -> None:
    devices = [d for d in _devices(spec) if isinstance(d, dict)]
    if devices:
        rng.choice(devices)["name"] = rng.choice(NAMES + STRINGS)


def m_duplicate_device(rng: random.Random, spec: dict[str, Any]) -> None:
    devices = _devices(spec)
    if devices:
        devices.append(copy.deepcopy(rng.choice(devices)))


def m_drop_devices(rng: random.Random, spec: dict[str, Any]) -> None:
    spec["devices"] = rng.choice([[], None, "all"]) if rng.random() < 0.8 else spec.pop("devices", None) and []
    if spec["devices"] is None and rng.random() < 0.5:
        del spec["devices"]


def m_empty_edits(rng: random.Random, spec: dict[str, Any]) -> None:
    devices = [d for d in _devices(spec) if isinstance(d, dict)]
    if devices:
        device = rng.choice(devices)
        choice = rng.randrange(4)
        if choice == 0:
            device["containerEdits"] = {}
        elif choice == 1:
            device.pop("containerEdits", None)
        elif choice == 2:
            device["containerEdits"] = None
        else:
            device["containerEdits"] = {"env": [], "deviceNodes": [], "additionalGids": []}


def m_env(rng: random.Random, spec: dict[str, Any]) -> None:
    block = _pick_block(rng, spec)
    if not isinstance(block.get("env"), list):
        block["env"] = []
    block["env"].append(rng.choice(["A", "=x", "", "A=1", "A==", " =x", "a b=c", "PATH=/bin"]))


def m_node_field(rng: random.Random, spec: dict[str, Any]) -> None:
    node = _pick_entry(rng, spec, "deviceNodes")
    if node is None:
        return
    key = rng.choice(["type", "permissions", "path", "hostPath", "major", "minor", "fileMode", "uid", "gid"])
    if key == "type":
        node[key] = rng.choice(TYPES)
    elif key == "permissions":
        node[key] = rng.choice(PERMISSIONS)
    elif key in ("path", "hostPath"):
        node[key] = rng.choice(["", "/dev/nvidia9", "dev/x", 7, None])
    else:
        node[key] = rng.choice(NUMBERS)


def m_hook_field(rng: random.Random, spec: dict[str, Any]) -> None:
    hook = _pick_entry(rng, spec, "hooks")
    if hook is None:
        return
    key = rng.choice(["hookName", "hookName", "path", "env", "timeout", "args"])
    if key == "hookName":
        hook[key] = rng.choice(HOOK_NAMES)
    elif key == "path":
        hook[key] = rng.choice(["", "/usr/bin/true", "nvidia-cdi-hook", None])
    elif key == "env":
        hook[key] = [rng.choice(["A=1", "A", "=1", "PATH=/usr/bin", ""])]
    elif key == "timeout":
        hook[key] = rng.choice([5, 0, -1, "5", 5.5, 2**63, None])
    else:
        hook[key] = rng.choice([[], ["a"], "a", [1, True]])


def m_mount_field(rng: random.Random, spec: dict[str, Any]) -> None:
    mount = _pick_entry(rng, spec, "mounts")
    if mount is None:
        return
    key = rng.choice(["hostPath", "containerPath", "type", "options"])
    if key == "type":
        mount[key] = rng.choice(["bind", "", "tmpfs", 1])
    elif key == "options":
        mount[key] = rng.choice([[], ["ro"], "ro", None])
    else:
        mount[key] = rng.choice(["", "/usr/lib/x", None, False])


def m_null_entry(rng: random.Random, spec: dict[str, Any]) -> None:
    block = _pick_block(rng, spec)
    name = rng.choice(["deviceNodes", "hooks", "mounts", "env"])
    if not isinstance(block.get(name), list):
        block[name] = []
    block[name].insert(rng.randrange(len(block[name]) + 1), None)


def m_intel_rdt(rng: random.Random, spec: dict[str, Any]) -> None:
    block = _pick_block(rng, spec)
    rdt: Any = {"closID": rng.choice(CLOS_IDS)}
    extra = rng.choice([None, "enableCMT", "enableMBM", "enableMonitoring", "schemata", "l3CacheSchema"])
    if extra is not None:
        rdt[extra] = rng.choice([True, "L3:0=f", ["L3:0=f"], 1])
    block["intelRdt"] = rng.choice([rdt, rdt, None, {}, [], "x"])


def m_gids(rng: random.Random, spec: dict[str, Any]) -> None:
    block = _pick_block(rng, spec)
    block["additionalGids"] = rng.choice([[44], [0], [-1], [2**32], ["44"], [], 44, [1.0]])


def m_annotations(rng: random.Random, spec: dict[str, Any]) -> None:
    target: dict[str, Any] = spec
    devices = [d for d in _devices(spec) if isinstance(d, dict)]
    if devices and rng.random() < 0.5:
        target = rng.choice(devices)
    target["annotations"] = rng.choice(
        [{"a": "b"}, {}, {"bad key!": "x"}, {"a": 1}, {"a": None}, {"a": ["x"]}, ["x"], None, {"a": True}]
    )


def m_mount_type(rng: random.Random, spec: dict[str, Any]) -> None:
    mount = _pick_entry(rng, spec, "mounts")
    if mount is not None:
        mount["type"] = "bind"


def m_drop_host_paths(rng: random.Random, spec: dict[str, Any]) -> None:
    for block in _edits_blocks(spec):
        nodes = block.get("deviceNodes")
        for node in nodes if isinstance(nodes, list) else []:
            if isinstance(node, dict):
                node.pop("hostPath", None)
    for device in _devices(spec):
        if isinstance(device, dict) and isinstance(device.get("name"), str) and device["name"][:1].isdigit():
            device["name"] = "gpu" + device["name"].replace(":", "-")


def m_unknown_field(rng: random.Random, spec: dict[str, Any]) -> None:
    places: list[dict[str, Any]] = [spec, *_edits_blocks(spec)]
    for list_name in ("deviceNodes", "hooks", "mounts"):
        entry = _pick_entry(rng, spec, list_name)
        if entry is not None:
            places.append(entry)
    place = rng.choice(places)
    key = rng.choice(["readOnly", "HostPath", "PATH", "hostpath", "netDevices", "cdiversion", "CDIVersion",
                      "Devices", "containeredits", "kinD", "\u212aind", "extra", "name", "hookname"])  # fmt: skip
    place[key] = rng.choice(["x", 1, None, [], {"hostInterfaceName": "eth0", "name": "net0"}])


def m_retype(rng: random.Random, spec: dict[str, Any]) -> None:
    """Replace a random value anywhere with a value of another type."""
    paths: list[tuple[Any, Any]] = []
    stack: list[Any] = [spec]
    while stack:
        current = stack.pop()
        items = current.items() if isinstance(current, dict) else enumerate(current)
        for key, child in items:
            paths.append((current, key))
            if isinstance(child, (dict, list)):
                stack.append(child)
    if paths:
        parent, key = rng.choice(paths)
        parent[key] = rng.choice(["x", 7, 7.5, True, None, [], {}, ["x"], {"x": 1}, 2**40])


def m_unicode(rng: random.Random, spec: dict[str, Any]) -> None:
    block = _pick_block(rng, spec)
    if not isinstance(block.get("env"), list):
        block["env"] = []
    block["env"].append("LABEL=" + rng.choice(["caf\u00e9", "\U0001f600", "a\u007fb", "\ufeff", "\u0085"]))


def m_floats(rng: random.Random, spec: dict[str, Any]) -> None:
    node = _pick_entry(rng, spec, "deviceNodes")
    if node is not None:
        node["type"] = "c"
        node["major"] = rng.choice([195.0, 195, 1e2, 195.5, -0.0, 2.0**63, 1e22])
        node["minor"] = rng.choice([0, 0.0, 1, 255.0])


def m_fully_specified(rng: random.Random, spec: dict[str, Any]) -> None:
    node = _pick_entry(rng, spec, "deviceNodes")
    if node is not None:
        node.update({"type": "c", "major": 195, "minor": rng.randrange(256), "permissions": "rw",
                     "fileMode": 0o666, "uid": 0, "gid": 0})  # fmt: skip


MUTATIONS: list[Mutation] = [
    m_version, m_kind, m_device_name, m_duplicate_device, m_drop_devices, m_empty_edits, m_env, m_node_field,
    m_hook_field, m_mount_field, m_null_entry, m_intel_rdt, m_gids, m_annotations, m_mount_type, m_drop_host_paths,
    m_unknown_field, m_retype, m_unicode, m_floats, m_fully_specified,
]  # fmt: skip


def base_specs(compact: bool = False) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("nvidia-2gpu", nvidia_spec(2, compact=compact)),
        ("nvidia-driver-root", nvidia_spec(2, driver_root="/run/nvidia/driver", compact=compact)),
        ("nvidia-uuid", nvidia_spec(2, naming="uuid", compact=compact)),
        ("nvidia-mig", mig_spec(compact=compact)),
        ("nvidia-1gpu-v060", nvidia_spec(1, version="0.6.0", compact=compact)),
    ]


def mutated_specs(count: int, seed: int = 20250520) -> list[tuple[str, bytes]]:
    """count seeded mutants of the base specs, as (file name, bytes): JSON and YAML alternately."""
    rng = random.Random(seed)
    bases = base_specs(compact=True)
    result = []
    for index in range(count):
        name, base = bases[index % len(bases)]
        spec = copy.deepcopy(base)
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            rng.choice(MUTATIONS)(rng, spec)
        as_yaml = index % 2 == 1
        extension = "yaml" if as_yaml else "json"
        result.append((f"m{index:04d}-{name}.{extension}", dump(spec, as_yaml, ensure_ascii=index % 3 == 0)))
    return result


def write_specs(directory: Path, specs: list[tuple[str, bytes]]) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, raw in specs:
        path = directory / name
        path.write_bytes(raw)
        paths.append(path)
    return paths


# ---------------------------------------------------------------------------------------------------------------
# Seeded mutations of a spec's JSON text: what editors and other encoders do that a JSON parser and goyaml.v2
# (which the library reads every spec with) judge differently.

TextMutation = Callable[[random.Random, str], str]


def _duplicate_line(rng: random.Random, text: str) -> str:
    lines = text.split("\n")
    index = rng.randrange(1, len(lines) - 1)
    if lines[index].strip().startswith('"') and lines[index].rstrip().endswith(","):
        lines.insert(index, lines[index])
    return "\n".join(lines)


def _trailing_comma(rng: random.Random, text: str) -> str:
    return text.rstrip()[:-1] + ",}" if rng.random() < 0.5 else text.replace("]", ",]", 1)


TEXT_MUTATIONS: list[TextMutation] = [
    lambda rng, t: t.replace(", ", ",\t", rng.randrange(1, 5)),
    lambda rng, t: re.sub(r"\n( +)", lambda m: "\n" + "\t" * (len(m.group(1)) // 2), t, count=rng.randrange(1, 5)),
    _duplicate_line,
    lambda rng, t: "\ufeff" + t,
    lambda rng, t: t.replace("/dev", "\\/dev", rng.randrange(1, 3)),
    lambda rng, t: "# generated\n" + t,
    _trailing_comma,
    lambda rng, t: t.replace('"/dev', '"\x7f/dev', 1),
    lambda rng, t: t.replace("nvidia.com", rng.choice(["nvidia\\u002ecom", "nvidia\\u0000com", "n\\u00e9"]), 1),
    lambda rng, t: t.replace("\n", "\r\n"),
    lambda rng, t: t.replace('"kind"', "'kind'", 1),
    lambda rng, t: t.replace('"kind"', "kind", 1),
    lambda rng, t: t.replace("{\n", "{\n  # note\n", 1),
    lambda rng, t: t.replace("NVIDIA_VISIBLE", "NVIDIA\x00VISIBLE", 1),
    lambda rng, t: t.replace("void", "vo\x01id", 1),
    lambda rng, t: t.replace(" ", "\u00a0", 1),
    lambda rng, t: t.replace("void", "vo\u2028id", 1),
]


def text_mutants(count: int, seed: int = 20250521) -> list[tuple[str, bytes]]:
    """count seeded mutants of an NVIDIA-style spec's JSON text, as (file name, bytes)."""
    rng = random.Random(seed)
    result = []
    for index in range(count):
        text = dump(nvidia_spec(1, compact=True), False).decode("utf-8")
        for _ in range(rng.choice([1, 1, 2])):
            text = rng.choice(TEXT_MUTATIONS)(rng, text)
        result.append((f"t{index:04d}.json", text.encode("utf-8")))
    return result
