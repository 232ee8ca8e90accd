"""Variants of a production GPU node's containerd configuration, and what each containerd release does with them.

The base files are what a GPU node runs: the CRI plugin with CDI on, an `nvidia` runtime (runc's shim with
NVIDIA's runtime as BinaryName) as the default, runc beside it, a registry `config_path`; once as a version 2 file
(containerd 1.6 to 2.x) and once as a version 3 file (2.x). Each variant changes one thing a user or a tool
changes: a value of the wrong type, a setting in the wrong table, a misspelt key, a version, a snapshotter, a
default runtime, a TOML form one parser reads and another does not. What depends on the node rather than on the
file (a snapshotter that loads only on btrfs, a base_runtime_spec file) is left to the daemon tests that judge it
with the node (tests/containerd/test_daemon.py).

A release's verdict on a variant is one of:
- "refuses": `containerd --config FILE config dump` fails, or the daemon exits at start-up;
- "no-cri": the daemon runs, but a CRI plugin (1.x: io.containerd.grpc.v1.cri; 2.x: it, io.containerd.cri.v1.runtime
  and io.containerd.cri.v1.images) is not loaded;
- "runs": the daemon runs with its CRI plugins loaded.

Each daemon gets a root, state and socket of its own under /tmp and runs in a mount namespace of its own with a
tmpfs on /run, so that nothing it makes there (its NRI socket, /run/containerd) reaches this machine's; it is
stopped by its pid. `python -m tests.containerd.variants` measures every variant on every release found and
writes the verdicts to variants.json beside this file, which the tests hold lint to and re-measure.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tests.containerd.real import PRIVATE_RUN, Binary, binaries, dump, start_daemon, stop_daemon

VERDICTS = Path(__file__).with_name("variants.json")
REFUSES, NO_CRI, RUNS = "refuses", "no-cri", "runs"
CRI_V2 = 'plugins."io.containerd.grpc.v1.cri"'
CRI_RUNTIME = 'plugins."io.containerd.cri.v1.runtime"'
CRI_IMAGES = 'plugins."io.containerd.cri.v1.images"'
NVIDIA = "/usr/bin/nvidia-container-runtime"
CRI_PLUGINS = {
    ("io.containerd.grpc.v1", "cri"),
    ("io.containerd.cri.v1", "runtime"),
    ("io.containerd.cri.v1", "images"),
}


@dataclass
class Config:
    """A containerd configuration as ordered tables of `key = literal` lines; "" is the top level."""

    tables: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    def copy(self) -> Config:
        return Config({name: list(entries) for name, entries in self.tables.items()})

    def set(self, table: str, key: str, literal: str) -> Config:
        entries = self.tables.setdefault(table, [])
        for index, (existing, _) in enumerate(entries):
            if existing == key:
                entries[index] = (key, literal)
                return self
        entries.append((key, literal))
        return self

    def drop(self, table: str, key: str) -> Config:
        self.tables[table] = [(k, v) for k, v in self.tables.get(table, []) if k != key]
        return self

    def drop_table(self, prefix: str) -> Config:
        self.tables = {name: entries for name, entries in self.tables.items() if not name.startswith(prefix)}
        return self

    def text(self) -> str:
        lines: list[str] = [f"{key} = {literal}" for key, literal in self.tables.get("", [])]
        for name, entries in self.tables.items():
            if name == "":
                continue
            lines.append(f"\n[{name}]")
            lines.extend(f"  {key} = {literal}" for key, literal in entries)
        return "\n".join(lines) + "\n"


def base(version: int) -> Config:
    if version == 2:
        cri, containerd = CRI_V2, f"{CRI_V2}.containerd"
        tables = {
            "": [("version", "2")],
            cri: [("enable_cdi", "true"), ("cdi_spec_dirs", '["/etc/cdi", "/var/run/cdi"]'),
                  ("sandbox_image", '"registry.k8s.io/pause:3.9"')],
            containerd: [("default_runtime_name", '"nvidia"'), ("snapshotter", '"overlayfs"')],
            f"{containerd}.runtimes.runc": [("runtime_type", '"io.containerd.runc.v2"')],
            f"{containerd}.runtimes.runc.options": [("SystemdCgroup", "true")],
            f"{containerd}.runtimes.nvidia": [("runtime_type", '"io.containerd.runc.v2"'),
                                              ("privileged_without_host_devices", "false")],
            f"{containerd}.runtimes.nvidia.options": [("BinaryName", f'"{NVIDIA}"'), ("SystemdCgroup", "true")],
            f"{cri}.registry": [("config_path", '"/etc/containerd/certs.d"')],
        }  # fmt: skip
    else:
        containerd = f"{CRI_RUNTIME}.containerd"
        tables = {
            "": [("version", "3")],
            CRI_RUNTIME: [("enable_cdi", "true"), ("cdi_spec_dirs", '["/etc/cdi", "/var/run/cdi"]')],
            containerd: [("default_runtime_name", '"nvidia"')],
            f"{containerd}.runtimes.runc": [("runtime_type", '"io.containerd.runc.v2"')],
            f"{containerd}.runtimes.runc.options": [("SystemdCgroup", "true")],
            f"{containerd}.runtimes.nvidia": [("runtime_type", '"io.containerd.runc.v2"'),
                                              ("privileged_without_host_devices", "false")],
            f"{containerd}.runtimes.nvidia.options": [("BinaryName", f'"{NVIDIA}"'), ("SystemdCgroup", "true")],
            CRI_IMAGES: [("snapshotter", '"overlayfs"')],
            f"{CRI_IMAGES}.registry": [("config_path", '"/etc/containerd/certs.d"')],
            f"{CRI_IMAGES}.pinned_images": [("sandbox", '"registry.k8s.io/pause:3.10"')],
        }  # fmt: skip
    return Config({name: list(entries) for name, entries in tables.items()})


def _places(version: int) -> dict[str, str]:
    """The tables a variant names by role, for each base."""
    if version == 2:
        containerd = f"{CRI_V2}.containerd"
        return {"cri": CRI_V2, "containerd": containerd, "images": containerd, "registry": f"{CRI_V2}.registry",
                "runtime": f"{containerd}.runtimes.nvidia", "options": f"{containerd}.runtimes.nvidia.options",
                "runc_options": f"{containerd}.runtimes.runc.options", "sandbox": CRI_V2}  # fmt: skip
    containerd = f"{CRI_RUNTIME}.containerd"
    return {"cri": CRI_RUNTIME, "containerd": containerd, "images": CRI_IMAGES,
            "registry": f"{CRI_IMAGES}.registry", "runtime": f"{containerd}.runtimes.nvidia",
            "options": f"{containerd}.runtimes.nvidia.options", "runc_options": f"{containerd}.runtimes.runc.options",
            "sandbox": f"{CRI_IMAGES}.pinned_images"}  # fmt: skip


# (role, key, [(label, literal)]): values of other types, and values containerd's own checks refuse.
VALUES = [
    (
        "cri",
        "enable_cdi",
        [("string", '"true"'), ("int", "1"), ("array", "[true]"), ("table", "{}"), ("false", "false")],
    ),
    (
        "cri",
        "cdi_spec_dirs",
        [
            ("string", '"/etc/cdi"'),
            ("ints", "[1]"),
            ("bool", "true"),
            ("empty", "[]"),
            ("mixed", '["/etc/cdi", 1]'),
            ("table", '{ a = "/etc/cdi" }'),
        ],
    ),
    (
        "containerd",
        "default_runtime_name",
        [
            ("int", "1"),
            ("bool", "true"),
            ("empty", '""'),
            ("unknown", '"nvidia-cdi"'),
            ("runc", '"runc"'),
            ("array", '["nvidia"]'),
        ],
    ),
    (
        "images",
        "snapshotter",
        [("int", "1"), ("unknown", '"overlay"'), ("native", '"native"'), ("empty", '""'), ("stargz", '"stargz"')],
    ),
    (
        "runtime",
        "runtime_type",
        [
            ("int", "1"),
            ("empty", '""'),
            ("kata", '"io.containerd.kata.v2"'),
            ("short", '"runc"'),
            ("v1", '"io.containerd.runc.v1"'),
        ],
    ),
    ("runtime", "privileged_without_host_devices", [("string", '"false"'), ("int", "0")]),
    ("runtime", "runtime_path", [("int", "1"), ("string", f'"{NVIDIA}"')]),
    ("runtime", "pod_annotations", [("string", '"cdi.k8s.io/*"'), ("ok", '["cdi.k8s.io/*"]'), ("ints", "[1]")]),
    ("runtime", "container_annotations", [("string", '"cdi.k8s.io/*"'), ("ok", '["cdi.k8s.io/*"]')]),
    ("runtime", "base_runtime_spec", [("int", "1")]),
    ("runtime", "io_type", [("pipe", '"pipe"'), ("streaming", '"streaming"'), ("int", "1")]),
    ("runtime", "privileged_without_host_devices_all_devices_allowed", [("alone", "true")]),
    ("options", "BinaryName", [("int", "1"), ("bool", "true"), ("array", f'["{NVIDIA}"]'), ("empty", '""')]),
    ("options", "SystemdCgroup", [("string", '"true"'), ("int", "1"), ("array", "[true]")]),
    ("options", "NoPivotRoot", [("string", '"true"')]),
    ("options", "IoUid", [("string", '"0"'), ("negative", "-1"), ("big", "4294967296"), ("float", "1.5")]),
    ("options", "Root", [("int", "1")]),
    ("options", "CriuImagePath", [("bool", "true")]),
    ("runc_options", "SystemdCgroup", [("string", '"false"')]),
    ("registry", "config_path", [("int", "1"), ("array", '["/etc/containerd/certs.d"]')]),
    ("registry", "mirrors", [("with-config-path", '{ "docker.io" = { endpoint = ["https://mirror.example"] } }')]),
    ("sandbox", "sandbox_image", [("int", "1"), ("array", '["registry.k8s.io/pause:3.9"]')]),
    ("cri", "max_concurrent_downloads", [("string", '"3"'), ("float", "3.5")]),
    ("cri", "stream_idle_timeout", [("go", '"4h0m0s"'), ("words", '"4 hours"'), ("int", "5")]),
    ("cri", "drain_exec_sync_io_timeout", [("words", '"ten"'), ("bare", '"10"')]),
    ("cri", "device_ownership_from_security_context", [("string", '"true"'), ("ok", "true")]),
    ("cri", "enable_selinux", [("string", '"no"')]),
    ("cri", "systemd_cgroup", [("true", "true"), ("string", '"true"')]),
    ("cri", "disable_apparmor", [("string", '"yes"')]),
    ("cri", "max_container_log_line_size", [("string", '"16384"'), ("big", "99999999999999999999")]),
    ("containerd", "discard_unpacked_layers", [("string", '"true"')]),
    ("containerd", "disable_snapshot_annotations", [("int", "1")]),
    ("containerd", "no_pivot", [("true", "true")]),
]

# (label, top-level or table key, literal): TOML forms, and settings of the daemon itself.
TOML_FORMS = [
    ("local-date", "", "root_note", "2024-01-31"),
    ("local-date-in-array", "cri", "cdi_spec_dirs", "[2024-01-31]"),
    ("local-time", "", "note", "07:32:00"),
    ("offset-datetime", "", "note", "1979-05-27T07:32:00Z"),
    ("int-beyond-64-bits", "", "oom_score", "99999999999999999999"),
    ("oom-score-string", "", "oom_score", '"-999"'),
    ("oom-score-ok", "", "oom_score", "-999"),
    ("float-inf", "", "oom_score", "inf"),
    ("hex-int", "", "oom_score", "0x10"),
    ("literal-string-path", "cri", "cdi_spec_dirs", "['/etc/cdi', '/var/run/cdi']"),
    ("multiline-string", "sandbox", "sandbox_image", '"""registry.k8s.io/pause:3.9"""'),
    ("unicode-escape", "options", "BinaryName", '"\\u002Fusr/bin/nvidia-container-runtime"'),
    ("unknown-top-level", "", "nvidia", "true"),
    ("unknown-in-cri", "cri", "enable_cdis", "true"),
    ("unknown-in-runtime", "runtime", "BinaryName", f'"{NVIDIA}"'),
    ("unknown-option", "options", "SystemdCgroups", "true"),
    ("case-of-key", "cri", "Enable_CDI", "true"),
    ("required-plugins-short", "", "required_plugins", '["cri"]'),
    ("required-plugins-uri", "", "required_plugins", '["io.containerd.grpc.v1.cri"]'),
    ("disabled-plugins-short", "", "disabled_plugins", '["cri"]'),
    ("disabled-plugins-uri", "", "disabled_plugins", '["io.containerd.snapshotter.v1.btrfs"]'),
    ("imports-missing", "", "imports", '["/etc/containerd/conf.d/*.toml"]'),
    ("imports-string", "", "imports", '"/etc/containerd/conf.d/*.toml"'),
    ("plugin-dir-int", "", "plugin_dir", "1"),
    ("timeouts-int", "", "timeouts", '{ "io.containerd.timeout.shim.cleanup" = 5 }'),
    ("proxy-plugin-stargz", "", "proxy_plugins", '{ stargz = { type = "snapshot", address = "/run/stargz.sock" } }'),
]

VERSIONS = [("missing", None), ("zero", "0"), ("one", "1"), ("four", "4"), ("five", "5"), ("negative", "-1"),
            ("string", '"2"'), ("float", "2.0")]  # fmt: skip


def variants() -> Iterator[tuple[str, str]]:
    """(id, text) of every variant: the base files, then each change to each base it makes sense for."""
    for version in (2, 3):
        prefix = f"v{version}"
        places = _places(version)
        yield f"{prefix}/base", base(version).text()
        for role, key, values in VALUES:
            for label, literal in values:
                config = base(version).set(places[role], key, literal)
                if key == "mirrors":
                    config.drop(places[role], "mirrors")
                    config.set(places[role], "mirrors", literal)
                yield f"{prefix}/{role}.{key}={label}", config.text()
        for label, role, key, literal in TOML_FORMS:
            table = places[role] if role else ""
            yield f"{prefix}/toml:{label}", base(version).set(table, key, literal).text()
        for label, literal in VERSIONS:
            config = base(version)
            if literal is None:
                config.drop("", "version")
            else:
                config.set("", "version", literal)
            yield f"{prefix}/version={label}", config.text()
        # Settings in the other version's tables, and the tables that hold them emptied or missing.
        other = _places(3 if version == 2 else 2)
        for role in ("cri", "options"):
            moved = base(version).set(other[role], "enable_cdi" if role == "cri" else "BinaryName", "true")
            yield f"{prefix}/other-version-table:{role}", moved.text()
        yield (
            f"{prefix}/cdi-at-top-level",
            base(version).drop(places["cri"], "enable_cdi").set("", "enable_cdi", "true").text(),
        )
        yield (
            f"{prefix}/cdi-under-containerd",
            base(version).drop(places["cri"], "enable_cdi").set(places["containerd"], "enable_cdi", "true").text(),
        )
        yield (
            f"{prefix}/cdi-under-runtime",
            base(version).drop(places["cri"], "enable_cdi").set(places["runtime"], "enable_cdi", "true").text(),
        )
        yield f"{prefix}/no-runc-runtime", base(version).drop_table(f"{places['containerd']}.runtimes.runc").text()
        only_nvidia = (
            base(version)
            .drop_table(f"{places['containerd']}.runtimes.runc")
            .drop(places["containerd"], "default_runtime_name")
        )
        yield f"{prefix}/only-nvidia-no-default", only_nvidia.text()
        no_type = base(version).drop(places["runtime"], "runtime_type")
        yield f"{prefix}/nvidia-without-type", no_type.text()
        yield (
            f"{prefix}/options-not-table",
            base(version).drop_table(places["options"]).set(places["runtime"], "options", '"x"').text(),
        )
        yield (
            f"{prefix}/runtimes-empty-table",
            base(version)
            .drop_table(f"{places['containerd']}.runtimes")
            .set(places["containerd"], "runtimes", "{}")
            .text(),
        )
        yield (
            f"{prefix}/plugin-not-table",
            base(version)
            .set('plugins."io.containerd.gc.v1.scheduler"', "pause_threshold", "0.02")
            .text()
            .replace(
                '[plugins."io.containerd.gc.v1.scheduler"]\n  pause_threshold = 0.02',
                '[plugins]\n  "io.containerd.gc.v1.scheduler" = 1',
            ),
        )
        yield f"{prefix}/uri-plugin-short", base(version).set("plugins.cri", "enable_cdi", "true").text()
        yield (
            f"{prefix}/uri-plugin-bad-prefix",
            base(version).set('plugins."containerd.grpc.v1.cri"', "enable_cdi", "true").text(),
        )
        yield (
            f"{prefix}/duplicate-key",
            base(version).text().replace("enable_cdi = true", "enable_cdi = true\n  enable_cdi = true", 1),
        )
        yield f"{prefix}/unterminated-array", base(version).text().replace('"/var/run/cdi"]', '"/var/run/cdi"', 1)


@dataclass(frozen=True)
class Verdict:
    verdict: str
    evidence: str  # what decided it: the error line, or the CRI plugins' states


def _plugins(binary: Binary, socket: Path) -> dict[tuple[str, str], str]:
    listed = subprocess.run(
        [str(binary.ctr), "--address", str(socket), "plugins", "ls"], capture_output=True, text=True, timeout=30
    )
    found = {}
    for line in listed.stdout.splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 3:
            found[(fields[0], fields[1])] = fields[-1]
    return found


def measure(binary: Binary, text: str, settle: float = 0.5) -> Verdict:
    workdir = Path(tempfile.mkdtemp(prefix="ctv", dir="/tmp"))
    try:
        config = workdir / "given.toml"
        config.write_text(text)
        dumped = dump(binary, config, workdir)
        if dumped.refused:
            return Verdict(REFUSES, (dumped.stderr.strip().splitlines() or ["exit " + str(dumped.returncode)])[-1])
        process = start_daemon(binary.path, text, workdir, under=PRIVATE_RUN)
        try:
            if process.poll() is not None:
                log = (workdir / "log").read_text(errors="replace").strip().splitlines()
                return Verdict(REFUSES, log[-1] if log else f"exit {process.returncode}")
            time.sleep(settle)
            plugins = _plugins(binary, workdir / "s")
            if process.poll() is not None:
                return Verdict(REFUSES, f"exited {process.returncode} after start")
        finally:
            stop_daemon(process)
        states = {f"{kind}.{name}": status for (kind, name), status in plugins.items() if (kind, name) in CRI_PLUGINS}
        loaded = bool(states) and all(status == "ok" for status in states.values())
        return Verdict(RUNS if loaded else NO_CRI, json.dumps(states, sort_keys=True))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def measure_all(found: list[Binary], jobs: int = 8) -> dict[str, dict[str, Verdict]]:
    """Every variant on every release: {variant id: {release: verdict}}."""
    cases = list(variants())
    work = [(variant, text, binary) for variant, text in cases for binary in found]
    with ThreadPoolExecutor(jobs) as pool:
        results = list(pool.map(lambda item: measure(item[2], item[1]), work))
    table: dict[str, dict[str, Verdict]] = {variant: {} for variant, _ in cases}
    for (variant, _, binary), verdict in zip(work, results):
        table[variant][binary.version] = verdict
    return table


def main() -> int:
    found = binaries()
    table = measure_all(found)
    VERDICTS.write_text(
        json.dumps(
            {variant: {release: v.verdict for release, v in by.items()} for variant, by in table.items()}, indent=1
        )
        + "\n"
    )
    counts = {
        b.version: {k: sum(by[b.version].verdict == k for by in table.values()) for k in (REFUSES, NO_CRI, RUNS)}
        for b in found
    }
    sys.stdout.write(f"{len(table)} variants; {json.dumps(counts)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
