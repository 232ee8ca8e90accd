"""The causes of the errors NVIDIA Container Toolkit's own configuration makes its binaries print, each decided from
the config.toml files in effect on the node.

Which files are in effect is node/toolkit.py's answer (the ones the engines' NVIDIA handlers read through their
wrappers, /etc's, the GPU Operator's); each is read here as release 1.20 loads it (api/config/v1/toml.go): TOML its
decoder parses, values of the field's type, and the ldconfig path it validates. What the runtime and the hook then
do with the settings (the mode, the low-level runtimes, the CDI spec directories, the hooks' programs) was read at
v1.20.0 (commit d34b3046) unless a line says otherwise.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Optional

from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.node.why.causes import Cause, Node, path_missing

MODE = "nvidia-container-runtime.mode"
SKIP_MODE_DETECTION = "nvidia-container-runtime-hook.skip-mode-detection"
RUNTIMES = "nvidia-container-runtime.runtimes"
SPEC_DIRS = "nvidia-container-runtime.modes.cdi.spec-dirs"
CTK_PATH = "nvidia-ctk.path"
HOOK_PATH = "nvidia-container-runtime-hook.path"
LDCONFIG = "nvidia-container-cli.ldconfig"
ALLOW_LDCONFIG = "features.allow-ldconfig-from-container"
# The modes the runtime accepts (internal/modifier/factory.go validate; case-sensitive), jit-cdi from 1.18.0.
RUNTIME_MODES = ("auto", "legacy", "cdi", "jit-cdi", "csv")
# nvidia-ctk cdi generate's discovery modes at v1.18.0 (pkg/nvcdi/mode.go): the runtime's legacy, cdi and jit-cdi
# are not among them.
DISCOVERY_MODES = frozenset({"auto", "nvml", "wsl", "management", "gdrcopy", "gds", "mofed", "csv", "imex", "nvswitch"})
# Where pkg/lookup finds a program given by name, after the caller's PATH (pkg/lookup/path.go defaultPATH).
LOOKUP_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
# What api/config/v1/config.go resolves nvidia-ctk.path and the hook's path to when the name is found nowhere.
CTK_DEFAULT = "/usr/bin/nvidia-ctk"
HOOK_DEFAULT = "/usr/bin/nvidia-container-runtime-hook"
CDI_SPEC_DIRS = ("/etc/cdi", "/var/run/cdi")
# The hooks directories podman and cri-o read by default; cri-o's configured ones come from its configuration.
HOOKS_DIRS = ("/usr/share/containers/oci/hooks.d", "/etc/containers/oci/hooks.d")
_HOOK_NAMES = frozenset({"nvidia-container-runtime-hook", "nvidia-container-toolkit"})
# Where k3s and RKE2 keep the runc they run, outside every PATH directory the runtime searches by default.
_BUNDLED_RUNTIME_DIRS = ("/var/lib/rancher/k3s/data/current/bin", "/var/lib/rancher/rke2/bin")
# The containerd and cri-o files the toolkit's installer (GPU Operator) and `nvidia-ctk runtime configure` load; k3s
# and RKE2 generate config.toml from a Go template the user may hand the installer in its place.
ENGINE_CONFIGS = {
    "containerd": (
        "/etc/containerd/config.toml",
        "/var/lib/rancher/k3s/agent/etc/containerd/config.toml.tmpl",
        "/var/lib/rancher/k3s/agent/etc/containerd/config-v3.toml.tmpl",
        "/var/lib/rancher/rke2/agent/etc/containerd/config.toml.tmpl",
        "/var/lib/rancher/rke2/agent/etc/containerd/config-v3.toml.tmpl",
    ),
    "crio": ("/etc/crio/crio.conf",),
}
CDI_REFRESH_ENV = "/etc/nvidia-container-toolkit/nvidia-cdi-refresh.env"
OPERATOR_TOOLKIT_DIR = "/usr/local/nvidia/toolkit"
_CONFIG_LIMIT = 4 << 20
WHICH_CONFIG = (
    "which config.toml the failing binary read: NVIDIA_CTK_CONFIG_FILE_PATH in its environment (the GPU Operator's "
    "wrappers under /usr/local/nvidia/toolkit set it), else /etc/nvidia-container-runtime/config.toml"
)
_REGENERATE = "nvidia-ctk config default --output={path} (then carry over the settings that matter)"


def _version(text: Optional[str]) -> Optional[tuple[int, ...]]:
    match = re.match(r"(\d+)\.(\d+)\.(\d+)", text or "")
    return tuple(int(part) for part in match.groups()) if match else None


# ---------------------------------------------------------------------------------------------------------------
# The configuration in effect


@dataclass
class ToolkitConfig:
    """One toolkit config.toml the node's binaries read, as release 1.20 loads it."""

    path: str
    why: str
    readers: tuple[str, ...] = ()
    present: bool = False
    # What the toolkit stops at while it loads the file, with where; None where it loads.
    refused: Optional[str] = None
    # The line of the first `{{`: a Go template meant for another program to fill in.
    template: Optional[int] = None
    settings: dict[str, Any] = field(default_factory=dict)

    def value(self, key: str) -> Any:
        return self.settings.get(key)

    @property
    def loads(self) -> bool:
        return self.present and self.refused is None

    @property
    def mode(self) -> str:
        value = self.settings.get(MODE)
        return value if isinstance(value, str) else "auto"

    def mode_text(self) -> str:
        return f'mode = "{self.mode}"' if MODE in self.settings else 'mode unset ("auto")'

    @property
    def label(self) -> str:
        return f"{self.path} ({self.why})"


def _release(node: Node) -> Optional[str]:
    from nvidia_oci_hook.node.toolkit import toolkit_release

    found = toolkit_release(node.host)
    return found.version if found is not None else None


def _ldconfig_refusal(settings: dict[str, Any], release: Optional[str]) -> Optional[str]:
    """The load-time check of ldconfig, as the release found (else the newest) makes it."""
    from nvidia_oci_hook.kinds.toolkit.releases import UnknownToolkitRelease, newest, release_for

    ldconfig = settings.get(LDCONFIG)
    if not isinstance(ldconfig, str):
        return None
    try:
        judge = release_for(release) if release else newest()
    except UnknownToolkitRelease:
        judge = newest()
    return judge.loading.ldconfig_refusal(ldconfig, settings.get(ALLOW_LDCONFIG) is True)


def _template_line(raw: bytes) -> Optional[int]:
    text = raw.decode("utf-8", "replace")
    return next((number for number, line in enumerate(text.splitlines(), 1) if "{{" in line), None)


def _parse_problem(parsed: Any) -> str:
    problem = parsed.problems[-1] if parsed.problems else None
    if problem is None:
        return "not TOML"
    return f"line {problem.line}: {problem.message}" if problem.line else problem.message


def read_config(
    host: HostView, path: str, why: str, readers: tuple[str, ...] = (), release: Optional[str] = None
) -> ToolkitConfig:
    from nvidia_oci_hook.formats.tomltext import parse_toml
    from nvidia_oci_hook.kinds.toolkit.decode import decode
    from nvidia_oci_hook.kinds.toolkit.releases import newest
    from nvidia_oci_hook.kinds.toolkit.schema import table_for

    found = ToolkitConfig(path, why, readers, host.is_file(path))
    if not found.present:
        return found
    raw = host.read_prefix(path, _CONFIG_LIMIT)
    if raw is None:
        found.refused = "cannot be read"
        return found
    found.template = _template_line(raw)
    parsed = parse_toml(raw)
    if not parsed.ok:
        found.refused = _parse_problem(parsed)
        return found
    locator = parsed.locator

    def position(pointer: str) -> str:
        line, column = locator.locate(pointer) if locator is not None else (None, None)
        return f"({line or '?'}, {column or 1})"

    decoded = decode(parsed.value, table_for(newest()), {}, position)
    found.settings = decoded.settings
    if decoded.refusals:
        found.refused = f"failed to unmarshal config: {decoded.refusals[0].text}"
    else:
        found.refused = _ldconfig_refusal(found.settings, release)
    return found


def configs_in_effect(node: Node) -> list[ToolkitConfig]:
    """Every toolkit config.toml some NVIDIA binary on the node reads, each read as the toolkit loads it."""
    from nvidia_oci_hook.node.engines import runtime_handlers
    from nvidia_oci_hook.node.toolkit import config_places

    release = _release(node)
    places = config_places(node.host, runtime_handlers(node.host, node.by_hand))
    return [read_config(node.host, place.path, place.why, place.readers, release) for place in places]


def _no_config(configs: list[ToolkitConfig]) -> str:
    return "" if configs else " (no toolkit config.toml on this node: its binaries run on their defaults)"


def _config_lines(configs: list[ToolkitConfig], describe: Callable[[ToolkitConfig], str]) -> list[str]:
    return [f"{config.label}: {describe(config)}" for config in configs]


# ---------------------------------------------------------------------------------------------------------------
# Who runs NVIDIA's hook outside nvidia-container-runtime


@dataclass(frozen=True)
class HookCaller:
    what: str
    program: str
    config: str  # the config.toml the hook reads when this caller runs it
    file: Optional[str] = None  # the hooks.d file that makes it run


def _hook_config(node: Node, program: str, args: list[str]) -> str:
    """The config a hook program reads: its -config flag, else the one its wrapper names, else /etc's."""
    from nvidia_oci_hook.node.toolkit import DEFAULT_CONFIG, config_places

    for index, arg in enumerate(args):
        flag, _, value = arg.lstrip("-").partition("=")
        if flag == "config" and arg.startswith("-"):
            return value or (args[index + 1] if index + 1 < len(args) else DEFAULT_CONFIG)
    # The hook reads its config as the runtime does, wrapper included: ask for it as a handler's program.
    places = config_places(node.host, {"hook": {"hook": program}})
    return next((place.path for place in places if place.readers), DEFAULT_CONFIG)


def _hooks_file(node: Node, path: str) -> Optional[tuple[str, list[str]]]:
    try:
        value = json.loads(node.host.read_text(path, limit=1 << 20) or "null")
    except ValueError:
        return None
    hook = value.get("hook") if isinstance(value, dict) else None
    program = hook.get("path") if isinstance(hook, dict) else None
    if not isinstance(program, str) or posixpath.basename(program) not in _HOOK_NAMES:
        return None
    args = hook.get("args") if isinstance(hook, dict) else None
    return program, [str(arg) for arg in args] if isinstance(args, list) else []


def _located(host: HostView, name: str, directories: tuple[str, ...] = LOOKUP_DIRS) -> Optional[str]:
    if name.startswith("/"):
        return name if host.is_executable(name) else None
    return next((path for d in directories if host.is_executable(path := posixpath.join(d, name))), None)


def hook_callers(node: Node) -> list[HookCaller]:
    """What runs NVIDIA's hook for a container without nvidia-container-runtime deciding the mode first: a hooks.d
    file (cri-o, podman), docker's --gpus, and the runtime's .legacy binary (which adds the hook whatever the
    config's mode)."""
    from nvidia_oci_hook.node.engines import runtime_handlers
    from nvidia_oci_hook.node.why.kubernetes import engine_runtimes

    files = {posixpath.join(d, name) for d in HOOKS_DIRS for name in node.host.list_dir(d) if name.endswith(".json")}
    files.update(path for runtimes in engine_runtimes(node) for path in runtimes.nvidia_hooks)
    callers = []
    for path in sorted(files):
        found = _hooks_file(node, path)
        if found is not None:
            program, args = found
            callers.append(HookCaller(f"hooks file {path}", program, _hook_config(node, program, args), path))
    if _located(node.host, "dockerd") is not None:
        # moby daemon/nvidia_linux.go looks the hook up in PATH for `docker run --gpus`.
        program = _located(node.host, "nvidia-container-runtime-hook") or HOOK_DEFAULT
        callers.append(HookCaller("docker (docker run --gpus)", program, _hook_config(node, program, [])))
    for engine, handlers in sorted(runtime_handlers(node.host, node.by_hand).items()):
        for name, program in sorted(handlers.items()):
            if posixpath.basename(program) == "nvidia-container-runtime.legacy":
                what = f"{engine} handler {name} ({program}, which adds the hook whatever the mode)"
                callers.append(HookCaller(what, HOOK_DEFAULT, _hook_config(node, program, [])))
    return callers


def _tegra(host: HostView) -> bool:
    """go-nvlib's HasTegraFiles: where NVML is missing, auto resolves to csv on these."""
    if host.is_file("/etc/nv_tegra_release"):
        return True
    return (host.read_text("/sys/devices/soc0/family", limit=64) or "").lower().startswith("tegra")


def with_hook_configs(node: Node, callers: list[HookCaller]) -> tuple[list[ToolkitConfig], list[ToolkitConfig]]:
    """(every config in effect and those the callers' hooks read, the latter alone where there are callers)."""
    configs = {config.path: config for config in configs_in_effect(node)}
    release = _release(node)
    for caller in callers:
        if caller.config not in configs:
            what = f"read by {caller.what}"
            configs[caller.config] = read_config(node.host, caller.config, what, (caller.what,), release)
    read = [configs[caller.config] for caller in callers] or list(configs.values())
    return list(configs.values()), list({config.path: config for config in read}.values())


def hook_not_legacy(node: Node, groups: dict[str, str]) -> list[Cause]:
    callers = hook_callers(node)
    _, read = with_hook_configs(node, callers)
    tegra = _tegra(node.host)

    def resolves(config: ToolkitConfig) -> str:
        mode = config.mode
        return ("csv" if tegra else "legacy") if mode == "auto" else mode

    def describe(config: ToolkitConfig) -> str:
        if not config.present:
            return 'absent: the hook runs on its defaults (mode "auto", which it resolves to legacy)'
        if not config.loads:
            return f"does not load ({config.refused}): the hook stops on that first"
        if config.value(SKIP_MODE_DETECTION) is True:
            return f"{config.mode_text()}, skip-mode-detection = true: the hook does not check the mode"
        return f"{config.mode_text()}: the hook resolves it to {resolves(config)}"

    evidence = _config_lines(read, describe)
    if tegra:
        evidence.append("/etc/nv_tegra_release or a Tegra soc0 family: mode auto resolves to csv on this node")
    refusing = [
        config
        for config in read
        if config.loads and config.value(SKIP_MODE_DETECTION) is not True and resolves(config) != "legacy"
    ]
    code = "toolkit-mode"
    if refusing:
        first = refusing[0]
        hooks = [caller.file for caller in callers if caller.file is not None]
        legacy = '"legacy"' if tegra else '"legacy" (or "auto")'
        route = (
            f"remove {', '.join(hooks)} and run GPU pods through the engine's nvidia runtime handler "
            "(a RuntimeClass; cri-o's hook mode is deprecated since 1.18)"
            if hooks
            else "run GPU containers through nvidia-container-runtime (docker --runtime=nvidia, or the engine's "
            "nvidia handler) instead of the hook"
        )
        mode = Cause(
            code,
            True,
            f"{first.path}: {first.mode_text()}, which NVIDIA's hook resolves to {resolves(first)}: it refuses to "
            "run outside nvidia-container-runtime",
            evidence,
            f"{route}; or, to keep the hook, set mode = {legacy} under [nvidia-container-runtime] in {first.path}, "
            "or skip-mode-detection = true under [nvidia-container-runtime-hook]",
        )
    else:
        mode = Cause(
            code,
            False,
            "no toolkit config.toml the hook reads here makes it refuse: each resolves to legacy or skips the "
            f"check{_no_config(read)}",
            evidence,
        )
    code = "hook-callers"
    if callers:
        direct = Cause(
            code,
            True,
            "NVIDIA's hook is run directly here, not by nvidia-container-runtime: "
            + "; ".join(f"{caller.what} runs {caller.program} (it reads {caller.config})" for caller in callers),
        )
    else:
        direct = Cause(
            code,
            False,
            f"nothing on this node runs NVIDIA's hook directly: no hooks.d file ({', '.join(HOOKS_DIRS)}, cri-o's "
            "hooks_dir) names it, docker is not installed, and no handler runs nvidia-container-runtime.legacy",
        )
    return [mode, direct]


def hook_not_legacy_undecided(groups: dict[str, str]) -> list[str]:
    return [
        "whether the container asked for CDI devices by name (NVIDIA_VISIBLE_DEVICES=nvidia.com/gpu=...): with "
        'only such names, mode "auto" resolves to cdi and the hook refuses too',
    ]


# ---------------------------------------------------------------------------------------------------------------
# invalid discovery mode (nvidia-ctk cdi generate 1.18.0)

# nvidia-ctk cdi generate read its --mode from the config's nvidia-container-runtime.mode only in 1.18.0 (commit
# 0e754442, first in v1.18.0-rc.2; removed by 0f4cf7f8 in v1.18.1).
_READS_MODE = ((1, 18, 0), (1, 18, 1))


def discovery_mode(node: Node, groups: dict[str, str]) -> list[Cause]:
    asked = groups["mode"].lower()
    configs = [config for config in configs_in_effect(node) if config.present]
    release = _release(node)
    version = _version(release)
    fix = (
        "upgrade the toolkit to 1.18.1 or later, or give nvidia-ctk cdi generate --mode=auto (for "
        f"nvidia-cdi-refresh.service: NVIDIA_CTK_CDI_GENERATE_MODE=auto in {CDI_REFRESH_ENV})"
    )
    code = "toolkit-release"
    if version is None:
        reads = Cause(
            code,
            None,
            "the toolkit release on this node is not found (nvidia-ctk --version tells): only 1.18.0 takes "
            "nvidia-ctk cdi generate's mode from the config",
        )
    elif _READS_MODE[0] <= version < _READS_MODE[1]:
        reads = Cause(
            code,
            True,
            f"toolkit {release} is on this node: its nvidia-ctk cdi generate takes its discovery mode from the "
            "config's nvidia-container-runtime.mode, and a runtime mode (legacy, cdi, jit-cdi) is none",
            [],
            fix,
        )
    else:
        when = "only 1.18.1 and later" if version >= _READS_MODE[1] else "releases before 1.18.0"
        reads = Cause(
            code,
            False,
            f"toolkit {release} is on this node, and nvidia-ctk cdi generate of {when} does not read its mode from "
            f"the config: {asked} came from --mode or NVIDIA_CTK_CDI_GENERATE_MODE",
        )
    setting = [config for config in configs if config.loads and config.mode.lower() == asked]
    evidence = _config_lines(configs, lambda config: config.mode_text() if config.loads else "does not load")
    code = "toolkit-mode"
    if setting:
        mode = Cause(
            code,
            True,
            f'{setting[0].path} sets mode = "{setting[0].mode}", a runtime mode nvidia-ctk cdi generate 1.18.0 '
            "reads as its discovery mode",
            evidence,
            fix,
        )
    else:
        mode = Cause(code, False, f"no toolkit config.toml here sets mode {asked}{_no_config(configs)}", evidence)
    return [reads, mode]


def discovery_mode_undecided(groups: dict[str, str]) -> list[str]:
    return [
        "how nvidia-ctk cdi generate was run: a --mode flag or NVIDIA_CTK_CDI_GENERATE_MODE (nvidia-cdi-refresh."
        f"service reads {CDI_REFRESH_ENV}) comes before the config",
    ]


# ---------------------------------------------------------------------------------------------------------------
# The config does not load


def _engine_configs(node: Node, engine: Optional[str]) -> list[Cause]:
    """The installer's `unable to load config`: the engine's file it was given, a template or not TOML."""
    from nvidia_oci_hook.formats.tomltext import parse_toml

    engines = [engine] if engine in ENGINE_CONFIGS else list(ENGINE_CONFIGS)
    present = [path for name in engines for path in ENGINE_CONFIGS[name] if node.host.is_file(path)]
    broken = []
    for path in present:
        raw = node.host.read_prefix(path, _CONFIG_LIMIT) or b""
        parsed = parse_toml(raw)
        if not parsed.ok:
            broken.append((path, _template_line(raw), _parse_problem(parsed)))
    code = "engine-config"
    if not broken:
        return [
            Cause(
                code,
                False,
                "every engine configuration here parses as TOML: " + (", ".join(present) or "none present"),
            )
        ]
    path, template, problem = broken[0]
    what = f"a Go template (line {template} has {{{{ ... }}}})" if template else "not TOML"
    return [
        Cause(
            code,
            True,
            f"{path} is {what} ({problem}): the toolkit's installer (GPU Operator) or nvidia-ctk runtime configure, "
            "given it as the engine's configuration, cannot load it",
            [f"{file}: {reason}" for file, _, reason in broken[1:]],
            "give the installer the TOML the engine reads, not the template (k3s: CONTAINERD_CONFIG=/var/lib/"
            "rancher/k3s/agent/etc/containerd/config.toml, or let k3s add its nvidia runtime itself when it finds "
            "nvidia-container-runtime at start)"
            if template
            else f"fix {path} at the line named, then restart the toolkit's installer",
        )
    ]


def _load_fix(config: ToolkitConfig) -> str:
    refused = config.refused or ""
    if config.template:
        return (
            f"{config.path} is a template (line {config.template} has {{{{ ... }}}}): the toolkit reads it as it "
            f"is; write a plain config there: {_REGENERATE.format(path=config.path)}"
        )
    if "Can't convert" in refused:
        return (
            f'write the value with its type at the line named (true, not "true"; a string in quotes), in {config.path}'
        )
    if "host-relative" in refused:
        return (
            f'prefix the path with @ (ldconfig = "@/sbin/ldconfig") in {config.path}, or set '
            f"{ALLOW_LDCONFIG.split('.')[-1]} = true under [features]"
        )
    return f"fix {config.path} at the line named, or regenerate it: {_REGENERATE.format(path=config.path)}"


def config_load_failed(node: Node, groups: dict[str, str]) -> list[Cause]:
    from nvidia_oci_hook.node.toolkit import DEFAULT_CONFIG

    who = groups["who"]
    if who.startswith("unable to load config"):
        return _engine_configs(node, groups.get("engine"))
    detail = groups.get("detail", "")
    configs, _ = with_hook_configs(node, hook_callers(node) if who.startswith("error getting hook") else [])
    code = "toolkit-config"
    evidence = _config_lines(
        configs,
        lambda config: "absent" if not config.present else config.refused or f"loads ({config.mode_text()})",
    )
    if "file does not exist" in detail:
        # The hook requires the file NVIDIA_CTK_CONFIG_FILE_PATH names (cmd/nvidia-container-runtime-hook/
        # hook_config.go loadConfig); a wrapper that names one the node lacks makes every GPU container fail.
        missing = [
            config for config in configs if not config.present and config.readers and config.path != DEFAULT_CONFIG
        ]
        if missing:
            return [
                Cause(
                    code,
                    True,
                    f"{missing[0].path} is named by {missing[0].why} but is not on this node",
                    evidence,
                    f"write it ({_REGENERATE.format(path=missing[0].path)}), or reinstall the toolkit that "
                    "installed the wrapper",
                )
            ]
        return [Cause(code, False, "every toolkit config.toml a wrapper names is on this node", evidence)]
    refused = [config for config in configs if config.present and config.refused is not None]
    if not refused:
        return [
            Cause(
                code,
                False,
                "every toolkit config.toml in effect here loads as the toolkit reads it: the error came from another "
                f"node, or from a binary given NVIDIA_CTK_CONFIG_FILE_PATH elsewhere{_no_config(configs)}",
                evidence,
            )
        ]
    first = refused[0]
    template = f"; it is a template (line {first.template} has {{{{ ... }}}})" if first.template else ""
    binary = "NVIDIA's hook" if who.startswith("error getting hook config") else "nvidia-container-runtime"
    return [
        Cause(
            code,
            True,
            f"{first.path} does not load: {first.refused}{template}; {binary} stops there, so every GPU container "
            "through it fails",
            evidence,
            _load_fix(first),
        )
    ]


def config_load_failed_undecided(groups: dict[str, str]) -> list[str]:
    if groups["who"].startswith("unable to load config"):
        return [
            "which file the installer was given: the GPU Operator's toolkit container's CONTAINERD_CONFIG (or "
            "RUNTIME_CONFIG), kubectl -n gpu-operator get ds nvidia-container-toolkit-daemonset -o yaml shows it",
        ]
    return [WHICH_CONFIG]


# ---------------------------------------------------------------------------------------------------------------
# A hook's program the node lacks


def _spec_hooks(value: Any) -> Iterator[tuple[str, str]]:
    """(pointer, program) of every hook a CDI spec adds, the spec's own and its devices'."""
    if not isinstance(value, dict):
        return
    places = [("", value.get("containerEdits"))]
    devices = value.get("devices")
    for index, device in enumerate(devices if isinstance(devices, list) else []):
        if isinstance(device, dict):
            places.append((f"/devices/{index}", device.get("containerEdits")))
    for pointer, edits in places:
        hooks = edits.get("hooks") if isinstance(edits, dict) else None
        for index, hook in enumerate(hooks if isinstance(hooks, list) else []):
            if isinstance(hook, dict) and isinstance(hook.get("path"), str):
                yield f"{pointer}/containerEdits/hooks/{index}", hook["path"]


def _spec_documents(node: Node, directories: list[str]) -> Any:
    from nvidia_oci_hook.kinds.cdi.directories import read_spec_dirs
    from nvidia_oci_hook.kinds.collection import bound

    present = [directory for directory in directories if node.host.is_dir(directory)]
    return read_spec_dirs(present, bound(node.load(), node.host), node.host)


def _config_spec_dirs(config: ToolkitConfig) -> tuple[str, ...]:
    dirs = config.value(SPEC_DIRS)
    return tuple(d for d in dirs if isinstance(d, str)) if isinstance(dirs, list) else CDI_SPEC_DIRS


def _spec_dirs(configs: list[ToolkitConfig]) -> list[str]:
    """The engines' spec directories and every one a toolkit config names."""
    return list(dict.fromkeys(d for dirs in (CDI_SPEC_DIRS, *map(_config_spec_dirs, configs)) for d in dirs))


def _resolved(host: HostView, configured: Any, default: str) -> str:
    """api/config/v1/config.go resolveWithDefault: an absolute path as it is, unchecked; a name (or nothing)
    looked up in PATH, else the default."""
    path = configured if isinstance(configured, str) else ""
    if path.startswith("/"):
        return path
    return _located(host, path or posixpath.basename(default)) or default


def hook_program_missing(node: Node, groups: dict[str, str]) -> list[Cause]:
    path = groups.get("path") or groups["crun"]
    program = path_missing(node, "hook-program", path, "the hook's program")
    if not program.holds:
        if "crun" in groups:
            program.summary = (
                f"{path} exists on this node: crun ran it and it exited {groups.get('code', '?')} (its own message "
                "is in the engine's log, not in crun's)"
            )
        return [program]
    configs = [config for config in configs_in_effect(node) if config.loads]
    name = posixpath.basename(path)
    # Each source with the fix that points it at a program the node has, or (None) at none.
    sources: list[tuple[str, Callable[[str], str]]] = []
    for document in _spec_documents(node, _spec_dirs(configs)).documents:
        for pointer, hook in _spec_hooks(document.value):
            if hook == path:
                sources.append((f"CDI spec {document.path} ({pointer})", _regenerate))
    for config in configs:
        for key, default in ((CTK_PATH, CTK_DEFAULT), (HOOK_PATH, HOOK_DEFAULT)):
            if _resolved(node.host, config.value(key), default) == path:
                shown = config.value(key)
                setting = json.dumps(shown) if shown is not None else "unset: the runtime's default"
                where = f"under [{key.rsplit('.', 1)[0]}] in {config.path}"
                sources.append((f"{config.path}'s {key} ({setting})", partial(_set_path, where=where)))
    for caller in hook_callers(node):
        if caller.program == path and caller.file is not None:
            sources.append((f"hooks file {caller.file}", partial(_set_path, where=f"(hook.path) in {caller.file}")))
    code = "hook-source"
    if not sources:
        return [
            program,
            Cause(
                code,
                False,
                f"no CDI spec in {', '.join(_spec_dirs(configs))}, toolkit config or hooks file here names {path}: "
                "the spec that did was generated elsewhere, or has been regenerated since",
            ),
        ]
    candidates = (name, "nvidia-cdi-hook", "nvidia-ctk") if name in ("nvidia-cdi-hook", "nvidia-ctk") else (name,)
    substitute = next(
        (
            found
            for candidate in candidates
            if (found := _located(node.host, candidate, (*LOOKUP_DIRS, OPERATOR_TOOLKIT_DIR))) not in (None, path)
        ),
        None,
    )
    where, repoint = sources[0]
    if substitute is not None:
        fix = repoint(substitute)
    else:
        package = "nvidia-container-toolkit" if name in _HOOK_NAMES else "nvidia-container-toolkit-base"
        fix = (
            f"install {package} (it ships {name}), or delete what names {path} (a GPU Operator's spec or hooks file, "
            "left after it was removed)"
        )
    return [program, Cause(code, True, f"{where} names {path}", [line for line, _ in sources[1:]], fix)]


def _regenerate(found: str) -> str:
    return (
        f"regenerate the spec with the program the node has: nvidia-ctk cdi generate --nvidia-cdi-hook-path={found} "
        "--output=/var/run/cdi/nvidia.yaml"
    )


def _set_path(found: str, where: str) -> str:
    return f'set path = "{found}" {where}'


def hook_program_missing_undecided(groups: dict[str, str]) -> list[str]:
    return [
        "which spec the engine injected: the pod's CDI devices (its annotations, or the device plugin's and DRA "
        "driver's answers) name the specs; in jit-cdi mode the runtime writes the hooks from nvidia-ctk.path itself",
    ]


# ---------------------------------------------------------------------------------------------------------------
# The runtime's own refusals


def runtime_not_found(node: Node, groups: dict[str, str]) -> list[Cause]:
    configs = [config for config in configs_in_effect(node) if config.loads]
    setting = _config_lines(
        configs,
        lambda config: (
            f"runtimes = {json.dumps(config.value(RUNTIMES))}"
            if RUNTIMES in config.settings
            else 'runtimes unset (the default ["runc", "crun"])'
        ),
    )
    code = "low-level-runtime"
    if "empty" in groups:
        empty = [config for config in configs if config.value(RUNTIMES) == []]
        if empty:
            summary = f"{empty[0].path} sets runtimes = []: the runtime has nothing to run containers with"
            return [Cause(code, True, summary, setting, 'set runtimes = ["runc", "crun"], or remove the key')]
        return [Cause(code, False, "no toolkit config.toml here sets runtimes = []", setting)]
    candidates = groups.get("candidates", "").split()
    found = [(candidate, _located(node.host, candidate)) for candidate in candidates]
    present = [(candidate, path) for candidate, path in found if path is not None]
    if present:
        candidate, path = present[0]
        return [
            Cause(
                code,
                False,
                f"{candidate} resolves to {path} on this node now: it was installed since, or the error came from "
                "another node",
                setting,
            )
        ]
    evidence = []
    for candidate in candidates:
        if candidate.startswith("/"):
            state = "not executable" if node.host.exists(candidate) else "no such file"
            evidence.append(f"{candidate}: {state}")
        else:
            evidence.append(f"{candidate}: in none of {', '.join(LOOKUP_DIRS)}")
    elsewhere = [
        path for candidate in candidates for path in [_located(node.host, candidate, _BUNDLED_RUNTIME_DIRS)] if path
    ]
    evidence.extend(f"{path} exists, in no directory the runtime searches" for path in elsewhere)
    where = configs[0].path if configs else "/etc/nvidia-container-runtime/config.toml"
    target = elsewhere[0] if elsewhere else "/usr/bin/runc"
    return [
        Cause(
            code,
            True,
            f"none of {', '.join(candidates) or 'the candidates'} is an executable on this node",
            evidence + setting,
            f'install runc (or crun), or set runtimes = ["{target}"] under [nvidia-container-runtime] in {where} '
            "(an absolute path of a runtime the node has)",
        )
    ]


def runtime_not_found_undecided(groups: dict[str, str]) -> list[str]:
    return [
        "the PATH the engine gave nvidia-container-runtime: its directories are searched before the defaults (a "
        "runtime found only there is found by that engine alone)",
    ]


def invalid_mode(node: Node, groups: dict[str, str]) -> list[Cause]:
    asked = groups.get("mode", groups.get("old_mode", ""))
    configs = [config for config in configs_in_effect(node) if config.present]
    evidence = _config_lines(configs, lambda config: config.mode_text() if config.loads else "does not load")
    version = _version(_release(node))
    setting = [config for config in configs if config.loads and config.settings.get(MODE, "auto") == asked]
    code = "toolkit-mode"
    if not setting:
        shown = f'mode = "{asked}"' if asked else 'mode = ""'
        return [Cause(code, False, f"no toolkit config.toml here sets {shown}{_no_config(configs)}", evidence)]
    first = setting[0]
    if asked == "jit-cdi" and version is not None and version < (1, 18, 0):
        summary = f'{first.path} sets mode = "jit-cdi", which toolkit {".".join(map(str, version))} predates (1.18.0)'
        fix = f'upgrade the toolkit to 1.18 or later, or set mode = "cdi" (or "auto") in {first.path}'
    else:
        named = f'mode = "{asked}"' if asked else 'mode = ""'
        near = [mode for mode in RUNTIME_MODES if mode == asked.lower()]
        hint = f' (modes are lower case: "{near[0]}")' if near else ""
        summary = f"{first.path} sets {named}, which is no mode of the runtime{hint}"
        fix = f"set mode to one of {', '.join(RUNTIME_MODES)} under [nvidia-container-runtime] in {first.path}"
    return [Cause(code, True, summary, evidence, fix)]


def which_config_undecided(groups: dict[str, str]) -> list[str]:
    return [WHICH_CONFIG]


def cdi_specs_missing(node: Node, groups: dict[str, str]) -> list[Cause]:
    from nvidia_oci_hook.kinds.cdi.directories import cache_devices

    names = [name.strip() for name in groups["names"].split(",") if name.strip()]
    configs = [config for config in configs_in_effect(node) if config.loads]
    readers: dict[tuple[str, ...], list[str]] = {}
    for config in configs:
        readers.setdefault(_config_spec_dirs(config), []).append(f"{config.path} ({config.mode_text()})")
    if not readers:
        readers[CDI_SPEC_DIRS] = ["the toolkit's defaults"]
    # Each directory alone: a spec the runtime's directories lack may sit in another one.
    defined_anywhere = {
        name: definition.path
        for directory in _spec_dirs(configs)
        for name, definition in cache_devices(_spec_documents(node, [directory])).items()
    }
    lacking = []
    evidence = []
    for dirs, who in readers.items():
        defined = cache_devices(_spec_documents(node, list(dirs)))
        missing = [name for name in names if name not in defined]
        kinds = {name.split("=", 1)[0] for name in names}
        listed = sorted(name for name in defined if name.split("=", 1)[0] in kinds)
        evidence.append(
            f"spec-dirs {', '.join(dirs)} ({'; '.join(who)}): {', '.join(listed[:8]) or 'no device of that kind'}"
        )
        if missing:
            lacking.append((dirs, missing))
    code = "toolkit-cdi-specs"
    if not lacking:
        return [Cause(code, False, f"the spec-dirs of the toolkit configs here define {', '.join(names)}", evidence)]
    dirs, missing = lacking[0]
    elsewhere = [f"{name} is defined in {defined_anywhere[name]}" for name in missing if name in defined_anywhere]
    fix = (
        f"add {posixpath.dirname(defined_anywhere[missing[0]])} to spec-dirs under [nvidia-container-runtime.modes.cdi]"
        if elsewhere
        else "generate the spec into one of them: nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml "
        "(1.18 and later: systemctl enable --now nvidia-cdi-refresh.path regenerates it at boot and on driver "
        "changes)"
    )
    return [
        Cause(
            code,
            True,
            f"no CDI spec in {', '.join(dirs)} (the runtime's spec-dirs) defines {', '.join(missing)}",
            evidence + elsewhere,
            fix,
        )
    ]
