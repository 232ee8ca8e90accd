"""NVIDIA Container Toolkit's config.toml as the real nvidia-container-runtime 1.20.0 takes it: the cases lint's
judgement of the toolkit kind is held to (tests/toolkit/test_toolkit_agreement.py).

A case is a config.toml (or none) on a fake node: a directory standing in for the node's /, with the real runtime
at /usr/bin/nvidia-container-runtime and the shared libraries `ldd` names for it and its hook at the same paths, and
what the case's Layout says: low-level runtimes (a static program of ours standing in for runc and crun), the real
nvidia-container-runtime-hook, nvidia-container-cli, nvidia-ctk and nvidia-cdi-hook (the same static program),
CDI specs, the device node they name (mknod 195:0), CSV mount specs. /var/run is a link to /run, as on the nodes.

Each runs `chroot ROOT /usr/bin/nvidia-container-runtime --log /run/nvidia-container-runtime.log create --bundle
/bundle ctr1` with PATH alone in its environment, on a minimal unprivileged bundle asking NVIDIA_VISIBLE_DEVICES=all.
`--log` is what containerd and cri-o pass runc too; it keeps the runtime's info and warning lines, which its own
logger throws away unless the config names a debug file. The stand-in low-level runtime copies the bundle's
config.json, as the runtime left it, to /captured-config.json; each stand-in writes its argv to
/captured-<name>.argv.

Where the runtime added an NVIDIA prestart hook whose path exists, the hook is run as runc would run it (chrooted,
from the bundle directory, the container's state on stdin): the hook, not the runtime, decides in legacy mode
whether the container gets a GPU, and it asks nvidia-container-cli for the devices (`--device=...`) or, having
found none it may give, exits 0 without running it.

The runtime's verdict:
- refused: it exited non-zero saying `error loading config`.
- fails: it exited non-zero otherwise (no low-level runtime, an invalid mode, no NVML for jit-cdi, an unresolvable
  CDI device...); or it exited 0 but the spec has a hook whose path is not an executable file on the node (runc
  fails with `fork/exec PATH: no such file or directory`), or the NVIDIA hook failed, or no device was handed over
  (no device node in the spec and no `--device` for nvidia-container-cli): the container runs without its GPU.
- fine: it exited 0 and the GPU was handed over.

Measured here, not assumed:
- A bind-mounted /proc changes nothing the runtime says or does (compared case by case): the roots go without one.
- go-toml v1.9.5 takes a UTF-8 BOM, CRLF, a bare CR between lines, bytes that are not UTF-8 in a comment, dotted
  keys and a trailing comma; it refuses a bare CR inside a string, a duplicate key or table, a NUL, a `{{ }}` line.
- Keys are matched as written, lower-cased or upper-cased: `MODE = "legacy"` and `[NVIDIA-CONTAINER-RUNTIME]`
  count, `Mode` and `[NVIDIA-Container-Runtime]` do not; unknown keys are ignored.
- jit-cdi (auto's choice here) fails for want of NVML; csv without CSV files, and every mode with
  accept-nvidia-visible-devices-envvar-when-unprivileged = false, exit 0 handing over nothing (legacy: its hook).
- The 1.20.0 hook exits 1 without a word on a supported-driver-capabilities it does not know (its own reflect
  panic while naming the option).
The 163 cases take 2 s on an idle 2-CPU machine, 12 s on a busy one: they run one after another.

`python -m tests.toolkit.agreement` runs every case and records agreement.json beside this file.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

PEERS = Path(__file__).resolve().parents[2].parent / "shared" / "peers" / "bin"
RUNTIME = PEERS / "nvidia-container-runtime"
HOOK = PEERS / "nvidia-container-runtime-hook"
RECORDED = Path(__file__).with_name("agreement.json")
TOOLKIT_RELEASE = "1.20.0"

REFUSED, FAILS, FINE = "refused", "fails", "fine"
VERDICTS = (REFUSED, FAILS, FINE)

PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
TIMEOUT_S = 10
CONFIG = "/etc/nvidia-container-runtime/config.toml"
RUNTIME_LOG = "/run/nvidia-container-runtime.log"
CAPTURED = "/captured-config.json"
HOOK_AT = "/usr/bin/nvidia-container-runtime-hook"
LOCAL_HOOK = "/usr/local/bin/nvidia-container-runtime-hook"
CLI_AT = "/usr/bin/nvidia-container-cli"
CTK_AT = "/usr/bin/nvidia-ctk"
LOCAL_CTK = "/usr/local/bin/nvidia-ctk"
CDI_HOOK_AT = "/usr/bin/nvidia-cdi-hook"
CSV_DIR = "/etc/nvidia-container-runtime/host-files-for-container.d"
CSV_LIB = "/usr/lib/aarch64-linux-gnu/tegra/libcuda.so.1.1"
GPU_NODE = "/dev/nvidia0"
# Names the runtime itself takes for its hook (isNVIDIAContainerRuntimeHook).
NVIDIA_HOOKS = ("nvidia-container-runtime-hook", "nvidia-container-toolkit")

BUNDLE: dict[str, Any] = {
    "ociVersion": "1.2.0",
    "process": {"args": ["true"], "env": [f"PATH={PATH}", "NVIDIA_VISIBLE_DEVICES=all"], "cwd": "/"},
    "root": {"path": "rootfs"},
}
# What runc gives a prestart hook on stdin.
STATE = json.dumps({"ociVersion": "1.2.0", "id": "ctr1", "status": "creating", "pid": 4242, "bundle": "/bundle"})

# One static program for every stand-in: the low-level runtimes, nvidia-container-cli, nvidia-ctk and
# nvidia-cdi-hook. Static, so that it needs nothing of the root but the root itself.
FAKE_SOURCE = r"""
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    const char *name = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    const char *bundle = NULL;
    int create = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "create")) create = 1;
        else if ((!strcmp(argv[i], "--bundle") || !strcmp(argv[i], "-b")) && i + 1 < argc) bundle = argv[++i];
        else if (!strncmp(argv[i], "--bundle=", 9)) bundle = argv[i] + 9;
    }
    char path[4096];
    snprintf(path, sizeof path, "/captured-%s.argv", name);
    FILE *out = fopen(path, "w");
    if (out) {
        for (int i = 0; i < argc; i++) fprintf(out, "%s\n", argv[i]);
        fclose(out);
    }
    if (!create || !bundle) return 0;
    snprintf(path, sizeof path, "%s/config.json", bundle);
    FILE *in = fopen(path, "rb");
    if (!in) { perror(path); return 2; }
    out = fopen("/captured-config.json", "wb");
    if (!out) { perror("/captured-config.json"); return 2; }
    char buffer[65536];
    size_t n;
    while ((n = fread(buffer, 1, sizeof buffer, in)) > 0) fwrite(buffer, 1, n, out);
    fclose(in);
    fclose(out);
    return 0;
}
"""

# CDI specs by name, as nvidia-ctk writes them (a createContainer hook through nvidia-cdi-hook), cut down.
SPEC_HOOK = """containerEdits:
  hooks:
  - hookName: createContainer
    path: /usr/bin/nvidia-cdi-hook
    args: [nvidia-cdi-hook, update-ldcache, --folder, /usr/lib/x86_64-linux-gnu]
"""
SPECS = {
    "nvidia": f"""cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes:
    - path: {GPU_NODE}
- name: all
  containerEdits:
    deviceNodes:
    - path: {GPU_NODE}
{SPEC_HOOK}""",
    "nvidia-0-only": f"""cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes:
    - path: {GPU_NODE}
{SPEC_HOOK}""",
    "example": f"""cdiVersion: 0.5.0
kind: example.com/gpu
devices:
- name: all
  containerEdits:
    deviceNodes:
    - path: {GPU_NODE}
""",
    "malformed": "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: [ {name: all\n",
}


class Unavailable(Exception):
    """The cases cannot run here; the message says why."""


def skip_reason() -> Optional[str]:
    if os.geteuid() != 0:
        return "the toolkit agreement needs root (chroot, mknod)"
    if not RUNTIME.is_file() or not HOOK.is_file():
        return f"the real nvidia-container-runtime 1.20.0 and its hook are not in {PEERS}"
    for tool in ("gcc", "ldd", "chroot"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    return None


@dataclass(frozen=True)
class Layout:
    """What the fake node has besides the runtime: paths on the node."""

    runtimes: tuple[str, ...] = ("/usr/bin/runc",)
    unexecutable: tuple[str, ...] = ()  # low-level runtimes installed without an x bit
    hooks: tuple[str, ...] = (HOOK_AT,)
    clis: tuple[str, ...] = (CLI_AT,)
    tools: tuple[str, ...] = (CTK_AT, CDI_HOOK_AT)
    specs: tuple[tuple[str, str], ...] = (("/etc/cdi/nvidia.yaml", "nvidia"),)  # (path, SPECS name)
    nodes: tuple[str, ...] = (GPU_NODE,)
    csv: tuple[str, ...] = (CSV_DIR,)  # directories with devices.csv and drivers.csv
    # The host's, which nvidia-container-cli runs for `@/sbin/ldconfig`: every node has one, and lint checks it.
    ldconfig: tuple[str, ...] = ("/sbin/ldconfig",)


FULL = Layout()
LAYOUTS = {
    "full": FULL,
    "bare": Layout(hooks=(), clis=(), tools=(), specs=(), nodes=(), csv=()),
    "no-hook": Layout(hooks=()),
    "no-cli": Layout(clis=()),
    "no-ctk": Layout(tools=()),
    "no-spec": Layout(specs=()),
    "no-node": Layout(nodes=()),
    "no-csv": Layout(csv=()),
}


@dataclass(frozen=True)
class Case:
    id: str
    config: Optional[str]  # None: no config.toml; lone surrogates stand for bytes that are not UTF-8
    layout: Layout = FULL

    def config_bytes(self) -> Optional[bytes]:
        return None if self.config is None else self.config.encode("utf-8", "surrogateescape")


def toml(mode: Optional[str] = "legacy", *, top: str = "", runtime: str = "", tail: str = "") -> str:
    """A config.toml: top-level keys, the [nvidia-container-runtime] table (its mode and more), other tables."""
    body = (f'mode = "{mode}"\n' if mode is not None else "") + runtime
    return top + (f"[nvidia-container-runtime]\n{body}" if body else "") + tail


def cdi_table(lines: str) -> str:
    return f"[nvidia-container-runtime.modes.cdi]\n{lines}"


# Layouts each mode is run on: where a mode's outcome can hang on the node.
MODE_LAYOUTS = {
    "legacy": ("full", "bare", "no-hook", "no-cli", "no-ctk", "no-spec"),
    "cdi": ("full", "bare", "no-hook", "no-ctk", "no-spec", "no-node"),
    "csv": ("full", "bare", "no-ctk", "no-csv", "no-node"),
    "jit-cdi": ("full", "bare"),
    "auto": ("full", "bare"),
    "cdi2": ("full",),
    "": ("full",),
}

LOW_LEVEL = (
    # (name, runtimes line, layout)
    ("default-crun-only", "", Layout(runtimes=("/usr/local/bin/crun",))),
    ("default-none", "", Layout(runtimes=())),
    ("default-runc-unexecutable", "", Layout(runtimes=(), unexecutable=("/usr/bin/runc",))),
    ("name-present", 'runtimes = ["crun"]\n', Layout(runtimes=("/usr/bin/runc", "/usr/local/bin/crun"))),
    ("name-absent", 'runtimes = ["crun"]\n', FULL),
    ("second-name-present", 'runtimes = ["nosuch", "runc"]\n', FULL),
    ("absolute-present", 'runtimes = ["/opt/runtimes/runc"]\n', Layout(runtimes=("/opt/runtimes/runc",))),
    ("absolute-absent", 'runtimes = ["/opt/runtimes/runc"]\n', FULL),
    ("empty-list", "runtimes = []\n", FULL),
    ("string", 'runtimes = "runc"\n', FULL),
    ("int-item", "runtimes = [1]\n", FULL),
)

HOOK_PATHS = (
    # (name, [nvidia-container-runtime-hook] lines, layout)
    ("default-local-only", "", Layout(hooks=(LOCAL_HOOK,))),
    ("absolute-present", f'path = "{LOCAL_HOOK}"\n', Layout(hooks=(LOCAL_HOOK,))),
    ("absolute-absent", f'path = "{LOCAL_HOOK}"\n', FULL),
    ("name-present", 'path = "nvidia-container-runtime-hook"\n', FULL),
    ("name-present-local", 'path = "nvidia-container-runtime-hook"\n', Layout(hooks=(LOCAL_HOOK,))),
    ("name-absent", 'path = "nvidia-container-runtime-hook"\n', Layout(hooks=())),
    ("alias-name", 'path = "nvidia-container-toolkit"\n', FULL),
    ("empty", 'path = ""\n', FULL),
    ("int", "path = 1\n", FULL),
)

CTK_PATHS = (
    # (name, mode, [nvidia-ctk] lines, layout)
    ("absolute-present", "csv", f'path = "{LOCAL_CTK}"\n', Layout(tools=(LOCAL_CTK, CDI_HOOK_AT))),
    ("absolute-absent", "csv", f'path = "{LOCAL_CTK}"\n', FULL),
    ("name-local", "csv", 'path = "nvidia-ctk"\n', Layout(tools=(LOCAL_CTK, CDI_HOOK_AT))),
    ("name-absent", "csv", 'path = "nvidia-ctk"\n', Layout(tools=(CDI_HOOK_AT,))),
    ("cdi-hook", "csv", f'path = "{CDI_HOOK_AT}"\n', FULL),
    ("absolute-absent", "legacy", 'path = "/opt/nosuch/nvidia-ctk"\n', FULL),
    ("absolute-absent", "cdi", 'path = "/opt/nosuch/nvidia-ctk"\n', FULL),
    ("int", "csv", "path = 1\n", FULL),
)

CDI = (
    # (name, [nvidia-container-runtime.modes.cdi] lines, layout)
    ("spec-in-var-run", "", Layout(specs=(("/var/run/cdi/nvidia.yaml", "nvidia"),))),
    ("spec-in-run", "", Layout(specs=(("/run/cdi/nvidia.yaml", "nvidia"),))),
    ("spec-in-other-dir", "", Layout(specs=(("/opt/cdi/nvidia.yaml", "nvidia"),))),
    ("custom-dir-with-spec", 'spec-dirs = ["/opt/cdi"]\n', Layout(specs=(("/opt/cdi/nvidia.yaml", "nvidia"),))),
    ("custom-dir-without-spec", 'spec-dirs = ["/opt/cdi"]\n', FULL),
    ("custom-and-default-dirs", 'spec-dirs = ["/opt/cdi", "/etc/cdi"]\n', FULL),
    ("empty-list", "spec-dirs = []\n", FULL),
    ("string", 'spec-dirs = "/etc/cdi"\n', FULL),
    ("kind-matching", 'default-kind = "nvidia.com/gpu"\n', FULL),
    ("kind-not-matching", 'default-kind = "example.com/gpu"\n', FULL),
    ("kind-of-other-spec", 'default-kind = "example.com/gpu"\n', Layout(specs=(("/etc/cdi/example.yaml", "example"),))),
    ("default-kind-other-spec", "", Layout(specs=(("/etc/cdi/example.yaml", "example"),))),
    ("kind-empty", 'default-kind = ""\n', FULL),
    ("kind-unqualified", 'default-kind = "gpu"\n', FULL),
    ("spec-without-all", "", Layout(specs=(("/etc/cdi/nvidia.yaml", "nvidia-0-only"),))),
    (
        "malformed-beside",
        "",
        Layout(specs=(("/etc/cdi/nvidia.yaml", "nvidia"), ("/etc/cdi/broken.yaml", "malformed"))),
    ),
    ("malformed-only", "", Layout(specs=(("/etc/cdi/nvidia.yaml", "malformed"),))),
)

LDCONFIG = (
    # (name, mode, [nvidia-container-cli] ldconfig line, [features] lines); the host's ldconfig is /sbin/ldconfig
    ("host", "legacy", 'ldconfig = "@/sbin/ldconfig"\n', ""),
    ("host-real", "legacy", 'ldconfig = "@/sbin/ldconfig.real"\n', ""),
    ("container", "legacy", 'ldconfig = "/sbin/ldconfig"\n', ""),
    ("container", "cdi", 'ldconfig = "/sbin/ldconfig"\n', ""),
    ("container-allowed", "legacy", 'ldconfig = "/sbin/ldconfig"\n', "allow-ldconfig-from-container = true\n"),
    ("container-allowed", "cdi", 'ldconfig = "/sbin/ldconfig"\n', "allow-ldconfig-from-container = true\n"),
    ("container-not-allowed", "legacy", 'ldconfig = "/sbin/ldconfig"\n', "allow-ldconfig-from-container = false\n"),
    ("container-allowed-string", "legacy", 'ldconfig = "/sbin/ldconfig"\n', 'allow-ldconfig-from-container = "true"\n'),
    ("empty", "legacy", 'ldconfig = ""\n', ""),
)

ACCEPT = "accept-nvidia-visible-devices-envvar-when-unprivileged"

WRONG_TYPES = (
    # (name, config): a TOML type where the toolkit's Go type is another
    ("mode-int", toml(None, runtime="mode = 1\n")),
    ("mode-list", toml(None, runtime='mode = ["legacy"]\n')),
    ("mode-table", toml(None, runtime='mode = {name = "legacy"}\n')),
    ("debug-bool", toml(runtime="debug = false\n")),
    ("log-level-int", toml(runtime="log-level = 3\n")),
    ("accept-string", toml(top=f'{ACCEPT} = "true"\n')),
    ("accept-int", toml(top=f"{ACCEPT} = 1\n")),
    ("cli-table-string", toml(top='nvidia-container-cli = "/usr/bin/nvidia-container-cli"\n')),
    ("hook-path-table", toml(tail="[nvidia-container-runtime-hook.path]\nx = 1\n")),
    ("load-kmods-string", toml(tail='[nvidia-container-cli]\nload-kmods = "yes"\n')),
    ("environment-string", toml(tail='[nvidia-container-cli]\nenvironment = "A=1"\n')),
    ("runtimes-array-of-tables", '[[nvidia-container-runtime]]\nmode = "legacy"\n'),
)

UNKNOWN_KEYS = (
    # (name, config, layout): keys the toolkit has no field for
    ("misspelt-accept-legacy", toml(top="acept-nvidia-visible-devices-envvar-when-unprivileged = false\n"), FULL),
    ("misspelt-accept-cdi", toml("cdi", top="acept-nvidia-visible-devices-envvar-when-unprivileged = false\n"), FULL),
    (
        "spec-dir-singular",
        toml("cdi", tail=cdi_table('spec-dir = ["/opt/cdi"]\n')),
        Layout(specs=(("/opt/cdi/nvidia.yaml", "nvidia"),)),
    ),
    ("spec-dir-singular-default-spec", toml("cdi", tail=cdi_table('spec-dir = ["/opt/cdi"]\n')), FULL),
    ("top-level-table", toml(tail='[nvidia]\nmode = "cdi"\n'), FULL),
    ("runtime-key", toml(runtime='runtime = "crun"\n'), FULL),
    ("mode-misspelt", toml(None, runtime='mod = "legacy"\n'), FULL),
    # go-toml v1 tries a field's tag as written, lower-cased, upper-cased (ToTitle), first letter lower-cased.
    ("mode-capitalised", toml(None, runtime='Mode = "legacy"\n'), FULL),
    ("mode-upper-case", toml(None, runtime='MODE = "legacy"\n'), FULL),
    ("mode-upper-case-after-mode", toml("cdi", runtime='MODE = "legacy"\n'), FULL),
    ("table-capitalised", '[NVIDIA-Container-Runtime]\nmode = "legacy"\n', FULL),
    ("table-upper-case", '[NVIDIA-CONTAINER-RUNTIME]\nmode = "legacy"\n', FULL),
)

SYNTAX = (
    # (name, config): each would be mode legacy (fine on the full node) if it were read as meant
    ("unterminated-inline-table", toml(runtime="x = {a = 1\n")),
    ("duplicate-key", toml(runtime='mode = "cdi"\n')),
    ("duplicate-table", toml(tail='[nvidia-container-runtime]\nlog-level = "info"\n')),
    (
        "duplicate-table-after-subtable",
        toml(tail=cdi_table('default-kind = "nvidia.com/gpu"\n') + '[nvidia-container-runtime]\nlog-level = "info"\n'),
    ),
    ("subtable-before-table", cdi_table('default-kind = "nvidia.com/gpu"\n') + toml()),
    ("bad-escape", toml(None, runtime='mode = "leg\\qacy"\n')),
    ("unterminated-string", toml(None, runtime='mode = "legacy\n')),
    ("missing-equals", toml(None, runtime='mode "legacy"\n')),
    ("template-line", '{{ template "base" . }}\n' + toml()),
    ("bom", "\ufeff" + toml()),
    ("crlf", toml().replace("\n", "\r\n")),
    ("bare-cr-between-lines", toml().replace("\n", "\r", 1)),
    ("bare-cr-in-string", toml(None, runtime='mode = "leg\racy"\n')),
    ("nul-line", toml() + "\x00\n"),
    ("not-utf8-in-comment", toml() + "# \udcff\n"),
    ("not-utf8-in-mode", toml(None, runtime='mode = "leg\udcffacy"\n')),
    ("literal-string", toml(None, runtime="mode = 'legacy'\n")),
    ("dotted-key", 'nvidia-container-runtime.mode = "legacy"\n'),
    ("quoted-table-name", '["nvidia-container-runtime"]\nmode = "legacy"\n'),
    ("trailing-comma", toml(runtime='runtimes = ["runc",]\n')),
    ("indented-with-tab", toml().replace("mode", "\tmode")),
    ("comments-only", "# nothing set here\n"),
    ("empty-file", ""),
)

OTHER = (
    # (name, config, layout)
    ("compat-mode-hook", toml(tail='[nvidia-container-runtime.modes.legacy]\ncuda-compat-mode = "hook"\n'), FULL),
    ("compat-mode-mount", toml(tail='[nvidia-container-runtime.modes.legacy]\ncuda-compat-mode = "mount"\n'), FULL),
    ("compat-mode-bogus", toml(tail='[nvidia-container-runtime.modes.legacy]\ncuda-compat-mode = "bogus"\n'), FULL),
    ("capabilities-unknown", toml(top='supported-driver-capabilities = "compute,bogus"\n'), FULL),
    ("capabilities-all", toml(top='supported-driver-capabilities = "all"\n'), FULL),
    ("cli-path-absent", toml(tail='[nvidia-container-cli]\npath = "/opt/nosuch/nvidia-container-cli"\n'), FULL),
    ("cli-path-present", toml(tail=f'[nvidia-container-cli]\npath = "{CLI_AT}"\n'), FULL),
    ("cli-root", toml(tail='[nvidia-container-cli]\nroot = "/run/nvidia/driver"\n'), FULL),
    ("debug-file", toml(runtime='debug = "/var/log/nvidia-container-runtime.log"\n'), FULL),
    ("log-level-unknown", toml(runtime='log-level = "loud"\n'), FULL),
    ("skip-mode-detection", toml(tail="[nvidia-container-runtime-hook]\nskip-mode-detection = true\n"), FULL),
)


HOOK_SECTION_ABSENT = f'[nvidia-container-runtime-hook]\npath = "{LOCAL_HOOK}"\n'


def cases() -> list[Case]:
    generated: list[Case] = []
    for mode, layouts in MODE_LAYOUTS.items():
        for name in layouts:
            generated.append(Case(f"mode/{mode or 'empty'}/{name}", toml(mode), LAYOUTS[name]))
    for name in ("full", "bare"):
        # The table without a mode: the default, auto.
        generated.append(Case(f"mode/unset/{name}", toml(None, runtime='log-level = "info"\n'), LAYOUTS[name]))
        generated.append(Case(f"no-config/{name}", None, LAYOUTS[name]))
    for name, line, layout in LOW_LEVEL:
        for mode in ("legacy", "cdi"):
            generated.append(Case(f"runtimes/{name}/{mode}", toml(mode, runtime=line), layout))
    for name, lines, layout in HOOK_PATHS:
        generated.append(Case(f"hook-path/{name}", toml(tail=f"[nvidia-container-runtime-hook]\n{lines}"), layout))
    generated.append(Case("hook-path/absolute-absent/cdi", toml("cdi", tail=HOOK_SECTION_ABSENT), FULL))
    for name, mode, lines, layout in CTK_PATHS:
        generated.append(Case(f"nvidia-ctk/{name}/{mode}", toml(mode, tail=f"[nvidia-ctk]\n{lines}"), layout))
    for name, lines, layout in CDI:
        generated.append(Case(f"cdi/{name}", toml("cdi", tail=cdi_table(lines) if lines else ""), layout))
    for name, mode, line, features in LDCONFIG:
        tail = f"[nvidia-container-cli]\n{line}" + (f"[features]\n{features}" if features else "")
        generated.append(Case(f"ldconfig/{name}/{mode}", toml(mode, tail=tail), FULL))
    # Ubuntu's: /sbin/ldconfig.real beside a /sbin/ldconfig wrapper, which the toolkit prefers where it exists.
    ubuntu = Layout(ldconfig=("/sbin/ldconfig", "/sbin/ldconfig.real"))
    generated.append(Case("ldconfig/default-real-present/legacy", toml(), ubuntu))
    real = '[nvidia-container-cli]\nldconfig = "@/sbin/ldconfig.real"\n'
    generated.append(Case("ldconfig/host-real-present/legacy", toml(tail=real), ubuntu))
    for value in ("true", "false"):
        for mode in ("legacy", "cdi", "csv", "auto"):
            generated.append(Case(f"accept-envvar/{value}/{mode}", toml(mode, top=f"{ACCEPT} = {value}\n"), FULL))
        generated.append(Case(f"accept-envvar/{value}/no-mode", f"{ACCEPT} = {value}\n", FULL))
    generated += [Case(f"wrong-type/{name}", config) for name, config in WRONG_TYPES]
    generated += [Case(f"unknown-key/{name}", config, layout) for name, config, layout in UNKNOWN_KEYS]
    generated += [Case(f"syntax/{name}", config) for name, config in SYNTAX]
    generated += [Case(f"other/{name}", config, layout) for name, config, layout in OTHER]
    ids = [case.id for case in generated]
    duplicated = sorted(case for case, count in Counter(ids).items() if count > 1)
    assert not duplicated, duplicated
    return sorted(generated, key=lambda case: case.id)


@dataclass
class Base:
    """What every root is made of, once a session: hard-linked into each root from here."""

    dir: Path
    runtime: Path
    hook: Path
    fake: Path
    libraries: tuple[str, ...]


def _libraries(*binaries: Path) -> tuple[str, ...]:
    found: set[str] = set()
    for binary in binaries:
        listing = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=True).stdout
        found.update(re.findall(r"(/\S+) \(0x[0-9a-f]+\)", listing))
    return tuple(sorted(found))


@contextlib.contextmanager
def session() -> Iterator[Base]:
    reason = skip_reason()
    if reason is not None:
        raise Unavailable(reason)
    work = Path(tempfile.mkdtemp(prefix="nvoh-toolkit-agreement-"))
    try:
        base = work / "base"
        base.mkdir()
        runtime = Path(shutil.copy(RUNTIME, base / "nvidia-container-runtime"))
        hook = Path(shutil.copy(HOOK, base / "nvidia-container-runtime-hook"))
        libraries = _libraries(RUNTIME, HOOK)
        for library in libraries:
            target = base / "lib" / library.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(library, target)
        source = base / "fake.c"
        source.write_text(FAKE_SOURCE)
        fake = base / "fake"
        subprocess.run(["gcc", "-static", "-O2", "-o", str(fake), str(source)], check=True, capture_output=True)
        yield Base(work, runtime, hook, fake, libraries)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _at(root: Path, path: str) -> Path:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    return target


def _link(source: Path, root: Path, path: str) -> None:
    target = _at(root, path)
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def build_root(case: Case, base: Base, root: Path) -> None:
    """The case's fake node at root (which must not exist)."""
    root.mkdir()
    for directory in ("etc", "tmp", "run", "var", "dev", "bundle/rootfs"):
        (root / directory).mkdir(parents=True, exist_ok=True)
    os.symlink("../run", root / "var" / "run")
    os.mknod(root / "dev" / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    _link(base.runtime, root, "/usr/bin/nvidia-container-runtime")
    for library in base.libraries:
        _link(base.dir / "base" / "lib" / library.lstrip("/"), root, library)
    layout = case.layout
    for path in (*layout.runtimes, *layout.clis, *layout.tools, *layout.ldconfig):
        _link(base.fake, root, path)
    for path in layout.unexecutable:
        target = _at(root, path)
        shutil.copyfile(base.fake, target)
        target.chmod(0o644)
    for path in layout.hooks:
        _link(base.hook, root, path)
    for path, name in layout.specs:
        _at(root, path).write_text(SPECS[name])
    for path in layout.nodes:
        os.mknod(_at(root, path), 0o666 | stat.S_IFCHR, os.makedev(195, 0))
    for directory in layout.csv:
        _at(root, f"{directory}/devices.csv").write_text(f"dev, {GPU_NODE}\n")
        _at(root, f"{directory}/drivers.csv").write_text(f"lib, {CSV_LIB}\n")
        _at(root, CSV_LIB).write_text("")
    config = case.config_bytes()
    if config is not None:
        _at(root, CONFIG).write_bytes(config)
    (root / "bundle" / "config.json").write_text(json.dumps(BUNDLE, indent=1))


@dataclass
class Outcome:
    verdict: str
    exit: int
    text: str  # what decided the verdict
    mode: Optional[str] = None  # the mode the runtime said it uses
    low_level: Optional[str] = None  # the low-level runtime it ran
    gained: dict[str, list[str]] = field(default_factory=dict)  # what the spec gained
    hook: Optional[dict[str, Any]] = None  # what the NVIDIA hook did, where it ran
    log: list[str] = field(default_factory=list)  # the runtime's last warnings and errors

    def signature(self) -> dict[str, Any]:
        """What a new measurement must repeat of the recorded one."""
        return {"verdict": self.verdict, "exit": self.exit, "text": self.text, "gained": self.gained}


_LOGRUS = re.compile(r'level=(\w+) msg="((?:[^"\\]|\\.)*)"')


def _unquote(quoted: str) -> str:
    escapes = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}
    return re.sub(r"\\(.)", lambda match: escapes.get(match.group(1), match.group(0)), quoted)


def messages(text: str) -> list[tuple[str, str]]:
    """(level, message) of each logrus line; a line of another form as ("", line)."""
    found: list[tuple[str, str]] = []
    for line in text.splitlines():
        match = _LOGRUS.search(line)
        if match:
            found.append((match.group(1), _unquote(match.group(2))))
        elif line.strip():
            found.append(("", line.strip()))
    return found


def _said(text: str) -> str:
    """The last thing a program said on stderr, errors first."""
    said = messages(text)
    for level, message in reversed(said):
        if level in ("error", "fatal", "panic", ""):
            return message
    return said[-1][1] if said else ""


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _executable(root: Path, path: str) -> bool:
    target = root / path.lstrip("/")
    return os.path.isabs(path) and target.is_file() and os.access(target, os.X_OK)


def _run_hook(root: Path, hook: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    def enter() -> None:
        os.chroot(root)
        os.chdir("/bundle")

    return subprocess.run(
        hook.get("args") or [hook["path"]],
        executable=hook["path"],
        input=STATE,
        env={"PATH": PATH, **dict(entry.split("=", 1) for entry in hook.get("env") or [])},
        preexec_fn=enter,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=TIMEOUT_S,
        check=False,
    )


def _gained(spec: dict[str, Any]) -> tuple[dict[str, list[str]], list[tuple[str, dict[str, Any]]]]:
    hooks = [(phase, hook) for phase, entries in sorted((spec.get("hooks") or {}).items()) for hook in entries or []]
    env = [entry for entry in (spec.get("process") or {}).get("env") or [] if entry not in BUNDLE["process"]["env"]]
    gained = {
        "hooks": [
            f"{phase}: {hook['path']} {' '.join((hook.get('args') or [])[1:])}".rstrip() for phase, hook in hooks
        ],
        "devices": [device["path"] for device in (spec.get("linux") or {}).get("devices") or []],
        "mounts": [mount["destination"] for mount in spec.get("mounts") or []],
        "env": env,
    }
    return {key: value for key, value in gained.items() if value}, hooks


def judge(root: Path, exit: int, stderr: str) -> Outcome:
    """The runtime's verdict on one case, from what it said and what it left in the root."""
    log = messages(_read(root / RUNTIME_LOG.lstrip("/")))
    # The first: the platform nvcdi detects later ('nvml') is also "Auto-detected mode as".
    modes = [
        match.group(1)
        for _, message in log
        for match in [re.match(r"(?:Using requested mode|Auto-detected mode as) '(.*)'$", message)]
        if match
    ]
    tail: list[str] = []
    for level, message in log:
        line = f"{level}: {message}"
        if level not in ("info", "debug", "trace") and line not in tail[-1:]:
            tail.append(line)
    outcome = Outcome(FAILS, exit, "", modes[0] if modes else None, log=tail[-4:])
    runs = sorted((root).glob("captured-*.argv"))
    low_level = [path for path in runs if path.name != "captured-nvidia-container-cli.argv"]
    if low_level:
        outcome.low_level = _read(low_level[0]).splitlines()[0]
    if exit != 0:
        outcome.text = _said(stderr) or f"exit {exit}"
        outcome.verdict = REFUSED if outcome.text.startswith("error loading config") else FAILS
        return outcome
    captured = root / CAPTURED.lstrip("/")
    if not captured.is_file():
        outcome.text = "exit 0 without running a low-level runtime"
        return outcome
    outcome.gained, hooks = _gained(json.loads(captured.read_text()))
    for phase, hook in hooks:
        if not _executable(root, hook["path"]):
            outcome.text = f"{phase} hook {hook['path']} is not an executable file on the node"
            return outcome
    handed = [f"device {path}" for path in outcome.gained.get("devices", [])]
    for phase, hook in hooks:
        if phase != "prestart" or os.path.basename(hook["path"]) not in NVIDIA_HOOKS:
            continue
        cli_argv = root / "captured-nvidia-container-cli.argv"
        with contextlib.suppress(FileNotFoundError):
            cli_argv.unlink()
        ran = _run_hook(root, hook)
        cli = _read(cli_argv).splitlines() if cli_argv.exists() else None
        outcome.hook = {"path": hook["path"], "exit": ran.returncode, "said": _said(ran.stderr), "cli": cli}
        if ran.returncode != 0:
            said = outcome.hook["said"] or "saying nothing"
            outcome.text = f"prestart hook {hook['path']} exited {ran.returncode}: {said}"
            return outcome
        devices = [arg for arg in cli or [] if arg.startswith("--device=")]
        if devices:
            handed.append(f"{hook['path']} ran {cli[0] if cli else '?'} {devices[0]}")
        else:
            said = outcome.hook["said"]
            outcome.text = f"prestart hook {hook['path']} handed no device to nvidia-container-cli" + (
                f": {said}" if said else ""
            )
            return outcome
    if not handed:
        ignored = [message for level, message in log if message.startswith("Ignoring devices")]
        outcome.text = f"exit 0 with no device for the GPU (mode {outcome.mode})" + (
            f": {ignored[-1]}" if ignored else ""
        )
        return outcome
    outcome.verdict = FINE
    outcome.text = f"mode {outcome.mode}: " + "; ".join(handed)
    return outcome


def measure_case(case: Case, base: Base, root: Path) -> Outcome:
    build_root(case, base, root)
    try:
        command = [
            shutil.which("chroot") or "chroot",
            str(root),
            "/usr/bin/nvidia-container-runtime",
            "--log",
            RUNTIME_LOG,
            "create",
            "--bundle",
            "/bundle",
            "ctr1",
        ]
        try:
            ran = subprocess.run(
                command,
                env={"PATH": PATH},
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return Outcome(FAILS, -1, f"no answer in {TIMEOUT_S} s")
        return judge(root, ran.returncode, ran.stderr)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def measure(selected: Optional[Iterable[Case]] = None) -> tuple[dict[str, Outcome], float]:
    """Every case (or those selected) against the real runtime: outcomes by case id, and the seconds taken."""
    started = time.monotonic()
    outcomes: dict[str, Outcome] = {}
    with session() as base:
        for number, case in enumerate(cases() if selected is None else selected):
            outcomes[case.id] = measure_case(case, base, base.dir / f"case-{number}")
    return outcomes, time.monotonic() - started


def recorded() -> dict[str, dict[str, Any]]:
    """agreement.json: each case's entry by id."""
    data = json.loads(RECORDED.read_text())
    return {entry["id"]: entry for entry in data["cases"]}


def entry(case: Case, outcome: Outcome) -> dict[str, Any]:
    return {"id": case.id, "config": case.config, "layout": asdict(case.layout), **asdict(outcome)}


def tally(verdicts: Iterable[str]) -> dict[str, int]:
    counted = Counter(verdicts)
    return {verdict: counted[verdict] for verdict in VERDICTS}


def record() -> None:
    generated = cases()
    outcomes, seconds = measure(generated)
    data = {
        "runtime": f"nvidia-container-runtime {TOOLKIT_RELEASE}",
        "cases": [entry(case, outcomes[case.id]) for case in generated],
    }
    RECORDED.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"{len(generated)} cases in {seconds:.1f} s: {json.dumps(tally(o.verdict for o in outcomes.values()))}")


if __name__ == "__main__":
    try:
        record()
    except Unavailable as error:
        sys.exit(str(error))
