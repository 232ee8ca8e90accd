"""The NVIDIA_* environment a pod gives its containers, from `env` and from the command line: what NVIDIA's toolkit,
the device plugin and the kubelet then do with it.

kubelet builds a container's environment as the device plugin's Allocate envs followed by the pod's own
(`GenerateRunContainerOptions` in pkg/kubelet/kubelet_pods.go: `GetResources`, then `makeEnvironmentVariables`
appended), each pod variable once, the last `env` entry of a name winning over earlier ones and over `envFrom`;
containerd appends the CRI envs after the image's and cri-o replaces by key, and NVIDIA's toolkit keeps the last
of a name (internal/config/image/builder.go `WithEnv`): the pod's value is the one NVIDIA's tools read.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator
from typing import Any, Optional

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.kinds.kubernetes import KUBERNETES
from nvidia_oci_hook.kinds.kubernetes.objects import CONFIG_MAP, Container, EnvVar
from nvidia_oci_hook.nvidia.env import (
    CAPABILITY_WORDS,
    DRIVER_CAPABILITIES,
    MIG_CONFIG_DEVICES,
    MIG_MONITOR_DEVICES,
    VISIBLE_DEVICES,
    device_entry,
    driver_capabilities,
    mig_refusal,
    unsupported_capabilities_text,
    visible_devices,
)
from nvidia_oci_hook.nvidia.requirements import (
    DISABLE_REQUIRE,
    REQUIRE_PREFIX,
    NodeProperties,
    evaluate,
    legacy_hook_refusal,
    requirements_from_env,
)
from nvidia_oci_hook.rules.base import Context, rule
from nvidia_oci_hook.rules.driver import HOOK_REFUSES, _nearest
from nvidia_oci_hook.rules.kubernetes.common import asks_gpu, document_templates, nvidia_component, run_manifests
from nvidia_oci_hook.rules.kubernetes.pod_security import toolkit_privileged

VALIDATIONS_DIR = "/run/nvidia/validations"
# The env file the GPU Operator's validator writes since 24.6 (cmd/nvidia-validator `createStatusFile`).
DRIVER_READY = f"{VALIDATIONS_DIR}/driver-ready"
LSTAT_FAILURE = "failed to generate spec: lstat /run/nvidia/driver/dev/nvidiactl: no such file or directory"
# The variables through which a pod asks NVIDIA's toolkit for GPUs or their features.
GPU_VARIABLES = (VISIBLE_DEVICES, DRIVER_CAPABILITIES, MIG_CONFIG_DEVICES, MIG_MONITOR_DEVICES)

# -- the driver root chosen by a marker ---------------------------------------------------------------------------

_DRIVER_ROOT_VARIABLE = r"(?:NVIDIA_DRIVER_ROOT|CONTAINER_DRIVER_ROOT|DRIVER_ROOT|container_driver_root|driver_root)"
_VALIDATION_FILE = r"/run/nvidia/validations/[\w.*-]+"
# A file test in a condition; the keyword before it tells a wait loop (until, while) from a choice.
_FILE_TEST = re.compile(
    rf"(?:\b(?P<keyword>if|elif|until|while)\s+(?:!\s+)?)?(?:\[\[?|\btest)\s+(?:!\s+)?-[a-zA-Z]\s+[\"']?"
    rf"(?P<file>{_VALIDATION_FILE})"
)
_ASSIGNS_ROOT = re.compile(rf"(?<![\w$])(?:export\s+)?(?P<name>{_DRIVER_ROOT_VARIABLE})=")
# `source FILE` or `. FILE` (bash, POSIX sh): every assignment in the file lands in the shell.
_SOURCES = re.compile(rf"(?:^|[\s;&|({{`])(?:source|\.)\s+[\"']?(?P<file>{_VALIDATION_FILE})", re.MULTILINE)
_END_OF_IF = re.compile(r"\bfi\b")
_END_OF_CHAIN = re.compile(r"[;\n]")
# NAME=$(cat FILE) and the like: the file's content is the value.
_READS_INTO_ROOT = re.compile(rf"(?P<name>{_DRIVER_ROOT_VARIABLE})=[\"']?\$\([^)]*(?P<file>{_VALIDATION_FILE})")


def _marker_choice(text: str) -> Optional[str]:
    """How a shell text lets a file under /run/nvidia/validations decide the driver root, or None. Sourcing the
    validator's own `driver-ready` env file is not among them: K8S022 judges that."""
    for sourced in _SOURCES.finditer(text):
        if sourced["file"] != DRIVER_READY:
            return f"sources {sourced['file']}, whose NVIDIA_DRIVER_ROOT (whoever wrote it) becomes the driver root"
    read = _READS_INTO_ROOT.search(text)
    if read:
        return f"sets {read['name']} from the content of {read['file']}"
    for test in _FILE_TEST.finditer(text):
        if test["keyword"] in ("until", "while"):
            continue  # waiting for a marker decides nothing
        # What the test decides: an if's branches up to its fi, else the && / || chain up to the command's end.
        end = _END_OF_IF if test["keyword"] else _END_OF_CHAIN
        stop = end.search(text, test.end())
        assigned = _ASSIGNS_ROOT.search(text[: stop.start() if stop else len(text)], test.end())
        if assigned:
            return f"chooses {assigned['name']} by whether {test['file']} exists"
    return None


# Commands a script runs that read no driver root: the shell's own, and the file tools NVIDIA's entrypoints use
# to wait, log and copy. Any other command after the env file is sourced starts a program that inherits it.
_FILE_COMMANDS = frozenset(
    {
        "[", "[[", "test", "echo", "printf", "cat", "cp", "mv", "ln", "rm", "mkdir", "touch", "chmod", "chown",
        "ls", "sleep", "dirname", "basename", "set", "export", "unset", "readonly", "local", "exit", "return",
        "true", "false", ":", "source", ".", "shift", "grep", "sed", "awk", "head", "tail", "tee", "wc", "sort",
        "cut", "tr", "date", "lsmod", "read", "wait", "trap",
    }
)  # fmt: skip
_SHELL_KEYWORDS = frozenset({"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}", "time"})
_COMMAND_BREAK = re.compile(r"\$\(|`|&&|\|\||(?<![<>])&|[;|\n]")  # not the & of 2>&1
_ASSIGNMENT = re.compile(r"[A-Za-z_]\w*=")
# Quoted words (whose `;` and spaces are no command's) and comments, leftmost first: a quote inside a comment, or a
# `#` inside a quote, is part of the one that started first.
_QUOTED_OR_COMMENT = re.compile(r""""(?:[^"\\]|\\.)*"|'[^']*'|(?:^|(?<=\s))#[^\n]*""", re.MULTILINE)


def _program_started(script: str) -> Optional[str]:
    """The first program a shell text starts (an `exec`'s, or any command beyond the shell's and the file tools'),
    or None when it only waits, logs and copies files."""
    script = _QUOTED_OR_COMMENT.sub(lambda found: "" if found[0][0] == "#" else f"{found[0][0]}_{found[0][0]}", script)
    for piece in _COMMAND_BREAK.split(script):
        words = piece.split()
        while words and (words[0] in _SHELL_KEYWORDS or _ASSIGNMENT.match(words[0]) or words[0].endswith(")")):
            words.pop(0)  # keywords, NAME=value prefixes, a case pattern's `value)`
        if not words or words[0] in ("for", "case", "in", "select", "esac", ";;") or words[0][0] in "<>0123456789":
            continue
        if words[0] == "exec":
            program = next((word for word in words[1:] if word[0] not in "<>0123456789"), None)
            if program is not None:
                return program
            continue
        if words[0].strip("\"'") not in _FILE_COMMANDS:
            return words[0]
    return None


def _driver_ready_use(text: str) -> Optional[str]:
    """The program a shell text starts with the root it sourced from `driver-ready`, or None."""
    for found in _SOURCES.finditer(text):
        if found["file"] == DRIVER_READY:
            return _program_started(text[found.end() :])
    return None


def _config_maps(value: Any, context: Context) -> dict[tuple[str, str], dict[str, Any]]:
    """(namespace, name) -> data of every ConfigMap of the run (every file and stream given together, and their
    `List`s): a DaemonSet and the ConfigMap holding its entrypoint are often in separate files."""

    def build() -> dict[tuple[str, str], dict[str, Any]]:
        found: dict[tuple[str, str], dict[str, Any]] = {}
        for item in run_manifests(value, context).of_kind(CONFIG_MAP):
            data = item.value.get("data")
            if item.name and isinstance(data, dict):
                found.setdefault((item.namespace, item.name), data)
        return found

    return context.cached("k8s-config-maps", build)  # type: ignore[no-any-return]


def _mounted_scripts(container: Container, value: Any, context: Context) -> dict[str, tuple[str, str]]:
    """Files a container mounts from a ConfigMap of the run: path in the container -> (ConfigMap/key, text)."""
    maps = _config_maps(value, context)
    if not maps:
        return {}
    template = container.template
    namespace = template.owner.namespace
    volumes = template.volumes()
    found: dict[str, tuple[str, str]] = {}
    for mount in container.mounts():
        volume = volumes.get(mount.name, ("", {}))[1]
        source = volume.get("configMap")
        if not isinstance(source, dict) or not isinstance(source.get("name"), str):
            continue
        data = maps.get((namespace, source["name"]))
        if data is None:
            data = next((d for (ns, n), d in maps.items() if n == source["name"] and not (ns and namespace)), None)
        if data is None:
            continue
        # key -> path inside the volume: `items` renames and selects keys, else every key under its own name.
        items: Any = source.get("items")
        paths = {
            item["key"]: item["path"]
            for item in (items if isinstance(items, list) else [])
            if isinstance(item, dict) and isinstance(item.get("key"), str) and isinstance(item.get("path"), str)
        } or {key: key for key in data}
        for key, path in paths.items():
            text = data.get(key)
            if not isinstance(text, str):
                continue
            if mount.sub_path:
                if mount.sub_path.strip("/") == path.strip("/"):
                    found[mount.mount_path] = (f"ConfigMap {source['name']} key {key}", text)
            else:
                found[posixpath.join(mount.mount_path, path)] = (f"ConfigMap {source['name']} key {key}", text)
    return found


@rule("K8S002", "driver-root-from-validation-marker", Severity.ERROR, [KUBERNETES])
def driver_root_from_validation_marker(value: Any, context: Context) -> Iterator[Problem]:
    """A container's command lets a file under /run/nvidia/validations decide the NVIDIA driver root.

    ## What it checks
    Each `command` and `args` entry of every container (and the script it runs, where that is a key of a
    ConfigMap mounted into the container: of the same stream, or of any file linted with it, as a directory of
    the GPU Operator's `assets/` holds it) for a shell that takes `NVIDIA_DRIVER_ROOT` (or a
    driver-root variable: `DRIVER_ROOT`, `CONTAINER_DRIVER_ROOT`, `driver_root`) from the GPU Operator's
    validation markers: a test of a marker that chooses the root
    (`[[ -f /run/nvidia/validations/host-driver-ready ]] && driver_root=/ || driver_root=/run/nvidia/driver`),
    sourcing a file there other than the validator's `driver-ready` (`source …`, `. …`), or reading one into the
    variable. A loop that only waits for a marker (`until [ -f /run/nvidia/validations/toolkit-ready ]; do …;
    done`) chooses nothing and is not reported; sourcing `driver-ready`, as the GPU Operator's entrypoints do
    since 24.6, is K8S022's.

    ## Why it matters
    The markers are written by the GPU Operator's validator as it validates, and removed only by the preStop
    hook of its main container: a validator that fails in an init container leaves the previous ones behind, and
    the driver validation deletes and rewrites its own marker while it runs (NVIDIA/gpu-operator #508). A
    container that starts in that window takes the wrong driver root from whichever empty marker exists, and
    every GPU pod on the node then fails: "failed to generate spec: lstat /run/nvidia/driver/dev/nvidiactl: no
    such file or directory". The GPU Operator's entrypoints chose so until 24.3 (the device plugin's and MIG
    manager's `host-driver-ready` / `driver-ready` test); since 24.6 they source the one env file the validator
    writes whole once the driver is validated (K8S022).

    ## Example
    The device plugin's command of GPU Operator 22.9: `[[ -f /run/nvidia/validations/host-driver-ready ]] &&
    driver_root=/ || driver_root=/run/nvidia/driver; export NVIDIA_DRIVER_ROOT=$driver_root; exec
    nvidia-device-plugin;`

    ## Fix
    Set the driver root explicitly from the node's known install: the GPU Operator's `driver.enabled` (false for
    a host driver) and `hostPaths.driverInstallDir`, or `NVIDIA_DRIVER_ROOT` in the container's `env`. Remove
    stale markers from the node (`nvidia-oci-hook doctor --fix`).
    """
    reported: set[str] = set()
    for pointer, where, text in _shell_texts(value, context):
        how = _marker_choice(text)
        if how is not None and pointer not in reported:
            reported.add(pointer)
            yield Problem(
                pointer,
                f"{where}{how}: a marker a failed or restarting GPU Operator validator leaves behind then decides "
                "the driver root, and with the wrong one every GPU pod on the node fails "
                f"('{LSTAT_FAILURE}')",
                "set the driver root explicitly (GPU Operator driver.enabled / hostPaths.driverInstallDir, or "
                "NVIDIA_DRIVER_ROOT in env from the node's known install); `nvidia-oci-hook doctor --fix` removes "
                "stale markers",
            )


def _shell_texts(value: Any, context: Context) -> Iterator[tuple[str, str, str]]:
    """(pointer, where, text) of each container's command and args entries, and of each ConfigMap script an
    entry runs (at the entry's pointer, after its own text)."""
    for template in document_templates(value, context):
        for container in template.containers():
            scripts: Optional[dict[str, tuple[str, str]]] = None
            for pointer, text in container.command_line():
                yield pointer, "", text
                if "/" not in text:
                    continue
                if scripts is None:
                    scripts = _mounted_scripts(container, value, context)
                for path, (origin, script) in scripts.items():
                    if re.search(rf"(?<![\w/.-]){re.escape(path)}(?![\w/.-])", text):
                        yield pointer, f"runs {path} ({origin}), which ", script


@rule("K8S022", "driver-root-from-driver-ready", Severity.WARNING, [KUBERNETES])
def driver_root_from_driver_ready(value: Any, context: Context) -> Iterator[Problem]:
    """A container takes its NVIDIA driver root from the GPU Operator's `driver-ready` file and starts a program
    with it.

    ## What it checks
    Each `command` and `args` entry of every container, and the script it runs from a mounted ConfigMap (as
    K8S002 finds it), for a shell that sources `/run/nvidia/validations/driver-ready` and then starts a program:
    an `exec`, or any command beyond the shell's own and the file tools (`cat`, `cp`, `mkdir`, `sleep`, …).
    The entrypoints of the GPU Operator's container toolkit, device plugin and MIG manager do exactly this since
    24.6. A script that sources the file only to find the driver's files and copy one (the IMEX init container
    of the GPU feature discovery in 24.9) starts nothing with the root and is not reported.

    ## Why it matters
    The file is not the two-marker guess of older releases (K8S002): the validator deletes it when it starts
    validating the driver and writes it whole, through a rename, only once the driver is validated
    (`IS_HOST_DRIVER`, `NVIDIA_DRIVER_ROOT`, `DRIVER_ROOT_CTR_PATH`, `NVIDIA_DEV_ROOT`, …; validator
    `Driver.validate`), so a container never reads half a file or the marker of a failed run. It can still be
    stale in one window: the node's driver changes (a host driver installed or removed, `driver.enabled`
    switched) while the old file stays, and this container restarts before the validator has run again. The
    program then takes the old root, and GPU pods fail: "failed to generate spec: lstat
    /run/nvidia/driver/dev/nvidiactl: no such file or directory". On a node whose driver does not change the
    file is right; nothing in NVIDIA's entrypoint is for the user to change, hence a warning.

    ## Example
    The device plugin's entrypoint of GPU Operator 24.6 to 26.7 (ConfigMap `nvidia-device-plugin-entrypoint`):
    `until [ -f /run/nvidia/validations/driver-ready ]; do sleep 5; done; set -o allexport;
    . /run/nvidia/validations/driver-ready; exec nvidia-device-plugin`.

    ## Fix
    When the node's driver changes, restart the validator (`nvidia-operator-validator`) before these pods, or
    remove `/run/nvidia/validations/driver-ready` so that they wait for the new one; `nvidia-oci-hook doctor`
    compares the file with where the driver really is (NODE001).
    """
    reported: set[str] = set()
    for pointer, where, text in _shell_texts(value, context):
        program = _driver_ready_use(text)
        if program is None or pointer in reported:
            continue
        reported.add(pointer)
        yield Problem(
            pointer,
            f"{where}sources {DRIVER_READY} and starts {program} with the NVIDIA_DRIVER_ROOT in it: the validator "
            "deletes that file when it validates the driver and writes it whole once the driver is validated, so "
            "the root is stale only when the node's driver changes (host driver installed or removed, "
            "driver.enabled switched) and this container restarts before the validator has run again; GPU pods "
            f"then fail ('{LSTAT_FAILURE}')",
            f"after a change of the node's driver, restart nvidia-operator-validator first, or remove "
            f"{DRIVER_READY}; `nvidia-oci-hook doctor` compares the file with the node",
        )


# -- NVIDIA_* in env ---------------------------------------------------------------------------------------------


def _value_pointer(entry: EnvVar) -> str:
    return entry.pointer if entry.from_source or entry.value is None else f"{entry.pointer}/value"


def _env(container: Container) -> dict[str, EnvVar]:
    """The winning entry of each name."""
    return container.env_by_name


def _requirement_entries(env: dict[str, EnvVar]) -> list[EnvVar]:
    return [entry for name, entry in sorted(env.items()) if name.startswith(REQUIRE_PREFIX)]


def _exempt_agent(container: Container) -> Optional[str]:
    """Why a container that sets NVIDIA_VISIBLE_DEVICES without a GPU request does so by design, or None."""
    component = nvidia_component(container.image)
    if component is not None:
        return component
    if container.template.owner.kind == "DaemonSet" and toolkit_privileged(container) is not None:
        return "a privileged node agent"
    return None


_RUNTIME_NOTE = "where NVIDIA's runtime runs the container (its RuntimeClass handler, or the node's default runtime)"


@rule("K8S004", "nvidia-visible-devices-without-gpu-request", Severity.WARNING, [KUBERNETES])
def nvidia_visible_devices_without_gpu_request(value: Any, context: Context) -> Iterator[Problem]:
    """A container that asks for no GPU sets NVIDIA_VISIBLE_DEVICES (or another NVIDIA_* GPU variable).

    ## What it checks
    A container with no GPU resource (`nvidia.com/gpu`, `nvidia.com/mig-*`, shared replicas) and no DRA claim
    whose `env` sets `NVIDIA_VISIBLE_DEVICES` to devices (`all`, indices, UUIDs: anything but `void`, `none`
    or empty); or, where it leaves `NVIDIA_VISIBLE_DEVICES` to the image, sets `NVIDIA_DRIVER_CAPABILITIES`,
    an `NVIDIA_REQUIRE_*`, `NVIDIA_MIG_CONFIG_DEVICES` or `NVIDIA_MIG_MONITOR_DEVICES`.

    Not reported, by design: containers of NVIDIA's own GPU components (by image: device plugin, GPU feature
    discovery, DCGM, MIG manager, …), which set `NVIDIA_VISIBLE_DEVICES=all` so NVML sees every GPU they
    advertise or watch (k8s-device-plugin's Helm chart does so unprivileged, the GPU Operator's templates
    privileged); and containers of a DaemonSet that NVIDIA's toolkit counts as privileged (`privileged: true`,
    SYS_ADMIN), the node agents that look after every GPU of their node.

    ## Why it matters
    The variable is read by NVIDIA's runtime and hook, so it matters only where NVIDIA's runtime runs the
    container (its RuntimeClass handler, or the node's default). There, with
    `accept-nvidia-visible-devices-envvar-when-unprivileged = true` (the default, api/config/v1/config.go), the
    container gets the GPUs it names, which the scheduler never counted: pods that did ask for them share them
    unknowingly (NVIDIA/k8s-device-plugin #1605, #87). Where the node sets it to `false` (the device plugin's
    `volume-mounts` strategy), NVIDIA's toolkit since 1.5.0 ignores the variable in unprivileged containers
    ("Ignoring devices requested by environment variable(s) in unprivileged container") and the container gets
    no GPU; toolkits before 1.5 refused it ("insufficient privileges to read device list from
    NVIDIA_VISIBLE_DEVICES envvar", k8s-device-plugin #203). The other variables leave the choice of GPUs to the
    image's `NVIDIA_VISIBLE_DEVICES`, which CUDA base images set to `all`.

    ## Example
    `env: [{name: NVIDIA_VISIBLE_DEVICES, value: all}]` in a Deployment's container with no
    `nvidia.com/gpu` limit.

    ## Fix
    Ask the scheduler for the GPUs (`resources.limits: {nvidia.com/gpu: 1}`, or a DRA claim) and remove the
    variable; a container that must not get a GPU sets `NVIDIA_VISIBLE_DEVICES=void`.
    """
    for template in document_templates(value, context):
        for container in template.containers():
            if asks_gpu(container) or _exempt_agent(container) is not None:
                continue
            env = _env(container)
            visible = env.get(VISIBLE_DEVICES)
            if visible is not None:
                text = visible.literal
                if text is None or visible_devices({VISIBLE_DEVICES: text}).kind not in ("all", "list"):
                    continue
                yield Problem(
                    _value_pointer(visible),
                    f"{VISIBLE_DEVICES}={text} without a GPU request: {_RUNTIME_NOTE}, NVIDIA's toolkit gives it "
                    f"these GPUs, which the scheduler never counted (they are shared with the pods that asked for "
                    f"them); where the node refuses the variable to unprivileged containers (volume-mounts) it gets "
                    "none",
                    "ask for the GPUs (resources.limits nvidia.com/gpu, or a DRA claim) and remove the variable; "
                    f"set {VISIBLE_DEVICES}=void where no GPU is meant",
                )
                continue
            for name in (*GPU_VARIABLES[1:], *(entry.name for entry in _requirement_entries(env))):
                entry = env.get(name)
                text = None if entry is None else entry.literal
                if entry is None or not text:
                    continue
                yield Problem(
                    _value_pointer(entry),
                    f"{name}={text} without a GPU request asks NVIDIA's toolkit for GPU features, and which GPUs "
                    f"the container gets is left to the image's {VISIBLE_DEVICES} (all in CUDA base images): "
                    f"{_RUNTIME_NOTE}, every GPU of the node, which the scheduler never counted",
                    "ask for the GPUs (resources.limits nvidia.com/gpu, or a DRA claim), or set "
                    f"{VISIBLE_DEVICES}=void and remove the variable",
                )
                break


@rule("K8S005", "nvidia-visible-devices-overrides-allocation", Severity.WARNING, [KUBERNETES])
def nvidia_visible_devices_overrides_allocation(value: Any, context: Context) -> Iterator[Problem]:
    """A container that asks for GPU resources sets NVIDIA_VISIBLE_DEVICES itself.

    ## What it checks
    A container with an NVIDIA GPU resource (`nvidia.com/gpu`, `nvidia.com/mig-*`, shared replicas) whose `env`
    sets `NVIDIA_VISIBLE_DEVICES` (any value, `valueFrom` too). Only this variable: it is the one NVIDIA's device
    plugin sets in its Allocate response (internal/plugin/server.go, `envvar` strategy). A container asking
    only for a DRA claim is left out: its GPUs come as CDI devices, not through this variable.

    ## Why it matters
    kubelet puts the device plugin's Allocate envs first and the pod's own after them
    (pkg/kubelet/kubelet_pods.go `GenerateRunContainerOptions`; kuberuntime_container.go passes them on in
    order), containerd appends them after the image's and cri-o replaces by key, and NVIDIA's toolkit keeps
    the last value of a name: under the plugin's `envvar` strategy (its default, and the GPU Operator's) the
    pod's value replaces the GPUs the plugin allocated. The container gets the GPUs the pod names (`all`: every
    GPU of the node, shared with other pods unknowingly), or none (`void`, empty), never the scheduled ones.
    Under `volume-mounts` the mounts decide and the variable is ignored; under the CDI strategies the allocated
    devices are injected and NVIDIA's runtime, where it runs the container, adds those the variable names.

    ## Example
    `resources: {limits: {nvidia.com/gpu: 1}}` with `env: [{name: NVIDIA_VISIBLE_DEVICES, value: all}]`.

    ## Fix
    Remove `NVIDIA_VISIBLE_DEVICES` from the pod: the device plugin sets it to the GPUs it allocated. To pick
    GPU models, use node labels (GPU feature discovery) or DRA selectors.
    """
    for template in document_templates(value, context):
        for container in template.containers():
            resources = container.gpu_resources()
            if not resources:
                continue
            entry = _env(container).get(VISIBLE_DEVICES)
            if entry is None:
                continue
            text = entry.literal
            shown = f"{VISIBLE_DEVICES}={text}" if text is not None else f"{VISIBLE_DEVICES} (valueFrom)"
            if text is None:
                gets = "the GPUs that value names"
            else:
                kind = visible_devices({VISIBLE_DEVICES: text}).kind
                gets = {
                    "all": "every GPU of the node",
                    "void": "no GPU at all",
                    "none": "no GPU (only the driver's libraries)",
                }.get(kind, f"GPUs {text}")
            yield Problem(
                _value_pointer(entry),
                f"{shown} with {', '.join(sorted(resources))}: kubelet puts the pod's env after the device plugin's, "
                f"so under its envvar strategy (the default) this value replaces the GPUs the plugin allocated and the "
                f"container gets {gets}, not the ones the scheduler gave it",
                f"remove {VISIBLE_DEVICES}: the device plugin sets it to the allocated GPUs",
            )


@rule("K8S006", "nvidia-variable-invalid", Severity.ERROR, [KUBERNETES])
def nvidia_variable_invalid(value: Any, context: Context) -> Iterator[Problem]:
    """A container's NVIDIA_* variable has a value NVIDIA's tools refuse.

    ## What it checks
    The literal `env` values of each container (not `valueFrom`, not `$(VAR)` references), judged as the driver
    rules judge a container's environment, with the same code (nvidia_oci_hook/nvidia/):
    - `NVIDIA_DRIVER_CAPABILITIES` names a capability other than `compute`, `compat32`, `graphics`, `utility`,
      `video`, `display`, `ngx`, `all`, `none` (as DRV005);
    - an `NVIDIA_REQUIRE_*` expression that nvidia-container-cli cannot read, wherever the evaluation reaches
      it whatever the node is (as DRV003); `NVIDIA_DISABLE_REQUIRE=true` (in the pod or the image) turns
      this off;
    - `NVIDIA_MIG_CONFIG_DEVICES` or `NVIDIA_MIG_MONITOR_DEVICES` set in a container NVIDIA's toolkit does not
      count as privileged (neither `privileged: true` nor SYS_ADMIN added) (as DRV006);
    - an `NVIDIA_VISIBLE_DEVICES` entry of no form NVIDIA's tools resolve (an index, a GPU or MIG UUID,
      `GPU:MIG`, a PCI bus id, a CDI name, `all`, `none`, `void`), in an unprivileged container (the form
      check of DRV004).
    A container whose `NVIDIA_VISIBLE_DEVICES` the pod sets to `void` or empty is left out: NVIDIA's hook
    judges the other variables only in a container it gives devices. Variables the image sets, and a
    `CUDA_VERSION` the pod sets (it counts only where the image has no `NVIDIA_REQUIRE_CUDA`), are not judged
    here.

    ## Why it matters
    NVIDIA's legacy hook (NVIDIA's runtime in `legacy` mode, and where the GPU Operator's toolkit sets it up)
    refuses the container and the pod stays in `CreateContainerError`: `unsupported capabilities found in
    'compute,graphic' (allowed 'compute')`, `nvidia-container-cli: requirement error: invalid expression`,
    `cannot set MIG_CONFIG_DEVICES in non privileged container`, `nvidia-container-cli: device error: gpu0:
    unknown device`. In CDI and jit-cdi mode (the runtime's default since toolkit 1.18) an unknown capability is
    ignored, so the libraries it stands for are not injected, requirements are not checked at all, and an
    unknown device is refused (`identifier is not a valid UUID or index`).

    ## Example
    `env: [{name: NVIDIA_DRIVER_CAPABILITIES, value: "compute,graphic"}]`.

    ## Fix
    Spell capabilities as NVIDIA names them; write requirements as `cuda>=12.0`, `driver>=535`, `brand=tesla`;
    set the MIG variables only in the privileged MIG manager; name GPUs by index or UUID (`nvidia-smi -L`).
    """
    for template in document_templates(value, context):
        for container in template.containers():
            env = _env(container)
            literal = {name: text for name, entry in env.items() if (text := entry.literal) is not None}
            if VISIBLE_DEVICES in literal and visible_devices(literal).kind == "void":
                continue  # not a GPU container: NVIDIA's hook reads none of the others
            yield from _capability_problems(env, literal)
            yield from _requirement_problems(env, literal)
            privileged = toolkit_privileged(container)
            if privileged is None:
                yield from _mig_problems(env, literal)
                yield from _device_problems(env, literal)


def _capability_problems(env: dict[str, EnvVar], literal: dict[str, str]) -> Iterator[Problem]:
    if DRIVER_CAPABILITIES not in literal:
        return
    capabilities = driver_capabilities({DRIVER_CAPABILITIES: literal[DRIVER_CAPABILITIES]})
    if not capabilities.unknown:
        return
    suggestions = [(name, _nearest(name, CAPABILITY_WORDS)) for name in capabilities.unknown]
    spelled = ", ".join(f"{name} -> {near}" for name, near in suggestions if near)
    yield Problem(
        _value_pointer(env[DRIVER_CAPABILITIES]),
        f"{DRIVER_CAPABILITIES}={literal[DRIVER_CAPABILITIES]}: {', '.join(capabilities.unknown)} "
        f"{'is no capability' if len(capabilities.unknown) == 1 else 'are no capabilities'} NVIDIA knows: "
        f"{HOOK_REFUSES} ('{unsupported_capabilities_text(capabilities.requested)}'); in CDI mode NVIDIA's runtime "
        "ignores it and does not inject what it stands for",
        f"write {spelled}" if spelled else "use compute, compat32, graphics, utility, video, display, ngx, all or none",
    )


def _requirement_problems(env: dict[str, EnvVar], literal: dict[str, str]) -> Iterator[Problem]:
    own = {name: text for name, text in literal.items() if name.startswith(REQUIRE_PREFIX) or name == DISABLE_REQUIRE}
    requirements = requirements_from_env(own)
    if not requirements:
        return
    verdict = evaluate(requirements, NodeProperties())
    first = _requirement_entries(env)[0]
    for error in verdict.errors:
        entry = env.get(error.variable, first)
        shown = (
            f"{error.variable}={error.text}" if error.variable else f"{len(requirements)} NVIDIA_REQUIRE_* variables"
        )
        yield Problem(
            _value_pointer(entry),
            f"{shown} cannot be read by NVIDIA's hook ({error.message}): {HOOK_REFUSES} "
            f"('{legacy_hook_refusal(verdict) or error.message}'); in CDI mode requirements are not checked at all",
            "write each factor as PROPERTY OP VALUE: cuda>=12.0, driver>=535, arch>=8.0, brand=tesla",
        )


def _mig_problems(env: dict[str, EnvVar], literal: dict[str, str]) -> Iterator[Problem]:
    for variable in (MIG_CONFIG_DEVICES, MIG_MONITOR_DEVICES):
        if literal.get(variable):
            yield Problem(
                _value_pointer(env[variable]),
                f"{variable}={literal[variable]} in a container NVIDIA's toolkit does not count as privileged (no "
                f"privileged: true, no SYS_ADMIN): {HOOK_REFUSES} ('{mig_refusal(variable)}')",
                "run the MIG manager privileged, or remove the variable",
            )


def _device_problems(env: dict[str, EnvVar], literal: dict[str, str]) -> Iterator[Problem]:
    text = literal.get(VISIBLE_DEVICES)
    if text is None:
        return
    selection = visible_devices({VISIBLE_DEVICES: text})
    if selection.kind != "list":
        return
    # A path is the device plugin's volume-mounts marker, which the mounts replace.
    unknown = [
        entry
        for entry in map(device_entry, selection.entries)
        if entry.form == "unknown" and not entry.text.startswith("/")
    ]
    for entry in unknown:
        yield Problem(
            _value_pointer(env[VISIBLE_DEVICES]),
            f"{VISIBLE_DEVICES}={text}: {entry.text!r} is no device form NVIDIA's tools know (an index, a GPU or MIG "
            f"UUID, GPU:MIG, a PCI bus id, a CDI name, all, none or void): {HOOK_REFUSES} ('nvidia-container-cli: "
            f"device error: {entry.text}: unknown device'); NVIDIA's runtime in jit-cdi mode too ('identifier is not "
            f'a valid UUID or index: "{entry.text}"\')',
            "name the GPU by index or UUID (nvidia-smi -L lists both), or ask for nvidia.com/gpu and drop the variable",
        )
