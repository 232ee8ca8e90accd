"""The toolkit's config.toml against the node: the driver root, the programs and runtimes it names, the CDI specs
its mode needs, the engines' hooks and the cluster it serves (NCT101 to NCT108)."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from typing import Any, Optional

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.node.driver import FOUND, gather, resolve_driver_root
from nvidia_oci_hook.node.toolkit import ACCEPT_ENVVAR, SEARCH_DIRS, executable, locate
from nvidia_oci_hook.rules.base import Context
from nvidia_oci_hook.rules.toolkit.view import View, toolkit_rule, view

DEFAULT_HOOK = "/usr/bin/nvidia-container-runtime-hook"
DEFAULT_CTK = "/usr/bin/nvidia-ctk"
CSV_DIR = "/etc/nvidia-container-runtime/host-files-for-container.d"
_SPEC_SUFFIXES = (".yaml", ".yml", ".json")


def resolved_mode(current: View, host: HostView) -> str:
    """The mode the runtime runs a container asking for GPUs by NVIDIA_VISIBLE_DEVICES in: `auto` as the release
    resolves it on this node (internal/info/auto.go: csv on Tegra, else the release's default)."""
    mode = current.mode()
    if mode != "auto":
        return mode if mode in current.release.modes else "invalid"
    if host.exists("/etc/nv_tegra_release") or host.exists("/sys/devices/soc0/family"):
        return "csv"
    return current.release.auto_mode


def _compat_hook(current: View) -> bool:
    compat = current.value("nvidia-container-runtime.modes.legacy.cuda-compat-mode")
    return compat == "hook" and current.value("features.disable-cuda-compat-lib-hook") is not True


def _driver_root(current: View) -> str:
    root = current.value("nvidia-container-cli.root")
    return root if isinstance(root, str) and root else "/"


@toolkit_rule("NCT101", "toolkit-driver-root-wrong", Severity.ERROR, needs_host=True)
def driver_root_wrong(value: Any, context: Context) -> Iterator[Problem]:
    """`nvidia-container-cli.root` is not where the node's driver is.

    ## What it checks
    The driver root the toolkit's legacy and `jit-cdi` modes read (`nvidia-container-cli.root`, `/` when unset)
    against the node's evidence: the candidates (`--driver-root`, `/` and `/run/nvidia/driver` by default) and
    which of them holds `nvidia-smi`, `libnvidia-ml.so.1` or `libcuda.so.1`. Also `jit-cdi` (chosen, or what
    `auto` resolves to from 1.18.0) on a node with no driver under that root at all.

    ## Why it matters
    The GPU Operator writes `root = "/run/nvidia/driver"` for its driver container. When the driver is installed
    on the host instead (seed 000's node: a stale marker made the operator choose the container's path), every GPU
    container in legacy mode fails in its hook (`nvidia-container-cli: initialization error: load library failed:
    libnvidia-ml.so.1: cannot open shared object file`), and in `jit-cdi` mode the runtime cannot build the
    container's spec. CDI mode reads the root only when its specs are generated, so it is not judged here.

    ## Example
    ```toml
    [nvidia-container-cli]
    root = "/run/nvidia/driver"   # the driver is on /
    ```

    ## Fix
    Set `root` to the driver root that holds the driver (`/` for a host driver: delete the key); with the GPU
    Operator, set `driver.enabled=false` for host drivers so that its toolkit writes `/`.
    """
    host = context.host
    if host is None:
        return
    current = view(value, context)
    mode = resolved_mode(current, host)
    if mode not in ("legacy", "jit-cdi"):
        return
    root = _driver_root(current)
    candidates = tuple(dict.fromkeys((*context.driver_roots, root)))
    answer = resolve_driver_root(host, candidates)
    here = gather(host, root)
    if here.has_driver:
        return
    pointer = current.decoded.pointer("nvidia-container-cli.root")
    how = (
        "the runtime cannot build the spec of any GPU container it creates (jit-cdi reads the driver there)"
        if mode == "jit-cdi"
        else "every GPU container fails in its prestart hook (`nvidia-container-cli: initialization error: load "
        "library failed: libnvidia-ml.so.1`)"
    )
    if answer.status == FOUND and answer.root != root:
        yield Problem(
            pointer,
            f"the toolkit's driver root is {root}, which holds no driver; the node's driver is under {answer.root} "
            f"({answer.reason}): in {mode} mode {how}",
            f'set root = "{answer.root}"' if answer.root != "/" else "delete root (the driver is on /)",
        )
    elif mode == "legacy" and _compat_hook(current):
        yield Problem(
            current.decoded.pointer("nvidia-container-runtime.modes.legacy.cuda-compat-mode"),
            f'cuda-compat-mode = "hook" makes the runtime read the driver\'s version under {root}, which holds no '
            "driver: it fails every GPU container it creates (`failed to construct CUDA Compat discoverer: failed to "
            "get driver version`)",
            "delete cuda-compat-mode (ldconfig is its default), or point root at the driver",
        )
    elif mode == "jit-cdi" and answer.status != FOUND:
        yield Problem(
            pointer,
            f"{mode} mode ({'resolved from auto by ' + current.label if current.mode() == 'auto' else 'set here'}) "
            f"with no driver under {root} or any driver root ({answer.reason}): {how}",
            'install the driver, or choose mode = "legacy" or "cdi" until it is',
        )


@toolkit_rule("NCT102", "toolkit-runtime-not-found", Severity.ERROR, needs_host=True)
def runtime_not_found(value: Any, context: Context) -> Iterator[Problem]:
    """None of `nvidia-container-runtime.runtimes` is an executable on the node.

    ## What it checks
    Each candidate in `runtimes` (`["runc", "crun"]` when unset) as the runtime looks for it: a path with a slash
    as written, a name in `/usr/local/sbin`, `/usr/local/bin`, `/usr/sbin`, `/usr/bin`, `/sbin`, `/bin`; an
    executable file. The first found is used.

    ## Why it matters
    The runtime stops before it reads the container: `error constructing low-level runtime: error locating
    runtime: no runtime binary found from candidate list: [runc]` (an empty list: `at least one runtime candidate
    must be specified`). Every container whose handler is NVIDIA's runtime fails, GPU or not.

    ## Example
    `runtimes = ["/usr/local/sbin/runc"]` on a node whose runc is `/usr/sbin/runc`.

    ## Fix
    Name a runtime the node has (`runtimes = ["runc", "crun"]` finds either where it is).
    """
    host = context.host
    if host is None:
        return
    current = view(value, context)
    candidates = current.value("nvidia-container-runtime.runtimes")
    if not isinstance(candidates, list):
        return
    pointer = current.decoded.pointer("nvidia-container-runtime.runtimes")
    if not candidates:
        yield Problem(
            pointer,
            "runtimes is empty: the runtime stops with `at least one runtime candidate must be specified`; every "
            "container through it fails, GPU or not",
            'runtimes = ["runc", "crun"]',
        )
        return
    if any(locate(host, candidate) for candidate in candidates):
        return
    listed = "[" + " ".join(candidates) + "]"
    yield Problem(
        pointer,
        f"no candidate of runtimes is an executable here: the runtime stops with `error locating runtime: no runtime "
        f"binary found from candidate list: {listed}`; every container through it fails, GPU or not",
        'name a runtime the node has: runtimes = ["runc", "crun"]',
    )


@toolkit_rule("NCT103", "toolkit-program-missing", Severity.ERROR, needs_host=True)
def program_missing(value: Any, context: Context) -> Iterator[Problem]:
    """The hook, `nvidia-ctk` or `ldconfig` the file names is not on the node.

    ## What it checks
    - `nvidia-container-runtime-hook.path`, which the runtime writes into every GPU container's spec in legacy
      mode: an absolute path is written as is, without a check; a name is looked for, else
      `/usr/bin/nvidia-container-runtime-hook`.
    - `nvidia-ctk.path`, which the hooks of the specs the runtime generates in `jit-cdi` and `csv` modes run.
    - `nvidia-container-cli.ldconfig` (`@` marks the host's path), which the legacy path runs in every GPU
      container.

    ## Why it matters
    The runtime does not look: runc fails the container when it runs the hook (`error running prestart hook #0:
    fork/exec /usr/local/nvidia/toolkit/nvidia-container-runtime-hook: no such file or directory`), a GPU
    container at a time.

    ## Example
    ```toml
    [nvidia-container-runtime-hook]
    path = "/usr/local/nvidia/toolkit/nvidia-container-runtime-hook"   # the operator's toolkit was removed
    ```

    ## Fix
    Point the key at the program where the node has it, or delete the key so that the toolkit looks for it.
    """
    host = context.host
    if host is None:
        return
    current = view(value, context)
    mode = resolved_mode(current, host)
    checks = []
    if mode == "legacy":
        checks.append(("nvidia-container-runtime-hook.path", DEFAULT_HOOK, "the prestart hook of every GPU container"))
    if mode in ("jit-cdi", "csv"):
        checks.append(("nvidia-ctk.path", DEFAULT_CTK, "the hooks of every GPU container's generated spec"))
    for key, default, role in checks:
        named = current.value(key)
        # An absolute path is written as it is; a name is looked for, else the default path (resolveWithDefault).
        named = named if isinstance(named, str) and named else posixpath.basename(default)
        runs = named if named.startswith("/") else (locate(host, named) or default)
        if executable(host, runs):
            continue
        yield Problem(
            current.decoded.pointer(key),
            f"{key} makes the runtime write {runs} as {role}, and the node has no executable there: runc fails each "
            f"such container (`fork/exec {runs}: no such file or directory`)",
            f"point {key} at the program where the node has it, or delete the key",
        )
    if mode == "legacy":
        yield from _cli_missing(current, host)
    ldconfig = current.value("nvidia-container-cli.ldconfig")
    if mode == "legacy" and isinstance(ldconfig, str) and ldconfig.startswith("@"):
        # The hook runs `PATH.real` where it exists, else PATH without `.real` (cli.go normalize).
        path = ldconfig[1:].removesuffix(".real")
        if not (host.exists(path) or host.exists(path + ".real")):
            yield Problem(
                current.decoded.pointer("nvidia-container-cli.ldconfig"),
                f"the host has no {path}: nvidia-container-cli cannot refresh the linker cache of GPU containers, "
                "which then fail to find the driver's libraries",
                "point ldconfig at the host's (`@/sbin/ldconfig`, `@/sbin/ldconfig.real` on Ubuntu)",
            )


def _cli_missing(current: View, host: HostView) -> Iterator[Problem]:
    """The legacy hook's nvidia-container-cli: `path` as set, else the first in the search directories, those under
    the driver root first (cmd/nvidia-container-runtime-hook getCLIPath, pkg/lookup GetPaths)."""
    key = "nvidia-container-cli.path"
    named = current.value(key)
    if isinstance(named, str) and named:
        if executable(host, named):
            return
        said = f"exec failed: {named}: no such file or directory"
    else:
        root = _driver_root(current)
        dirs = [posixpath.join(root, d.lstrip("/")) for d in SEARCH_DIRS] if root != "/" else []
        if any(executable(host, posixpath.join(d, "nvidia-container-cli")) for d in (*dirs, *SEARCH_DIRS)):
            return
        said = "couldn't find binary nvidia-container-cli in PATH"
    yield Problem(
        current.decoded.pointer(key),
        f"the legacy hook runs nvidia-container-cli, and the node has none there: every GPU container fails in its "
        f"prestart hook (`{said}`)",
        "install libnvidia-container-tools (nvidia-container-cli), or point nvidia-container-cli.path at it",
    )


def _specs(host: HostView, directories: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """(path, value) of each CDI spec that parses in the directories, in the order the registry reads them."""
    from nvidia_oci_hook.formats.parsing import parser_for

    found = []
    for directory in directories:
        for name in sorted(host.list_dir(directory)):
            if not name.endswith(_SPEC_SUFFIXES):
                continue
            path = posixpath.join(directory, name)
            prefix = host.read_prefix(path, 4 << 20)
            parsed = parser_for("json" if name.endswith(".json") else "yaml")(prefix) if prefix is not None else None
            if parsed is not None and parsed.ok and isinstance(parsed.value, dict):
                found.append((path, parsed.value))
    return found


def _edits(value: Any) -> list[dict[str, Any]]:
    return [value] if isinstance(value, dict) else []


def _injection_failure(host: HostView, path: str, spec: dict[str, Any], device: dict[str, Any]) -> Optional[str]:
    """Why injecting device fails on this node (the runtime's or runc's words), None where it works: a device
    node the runtime cannot stat, a hook runc cannot run."""
    for edits in (*_edits(spec.get("containerEdits")), *_edits(device.get("containerEdits"))):
        for node in edits.get("deviceNodes") or []:
            if not isinstance(node, dict):
                continue
            host_path = node.get("hostPath") or node.get("path")
            if isinstance(host_path, str) and not host.exists(host_path):
                return f'failed to stat CDI host device "{host_path}": no such file or directory ({path})'
        for hook in edits.get("hooks") or []:
            program = hook.get("path") if isinstance(hook, dict) else None
            if isinstance(program, str) and not executable(host, program):
                return f"fork/exec {program}: no such file or directory (a hook of {path})"
    return None


@toolkit_rule("NCT104", "toolkit-cdi-injection-fails", Severity.ERROR, needs_host=True)
def cdi_injection_fails(value: Any, context: Context) -> Iterator[Problem]:
    """CDI mode, and the specs in `spec-dirs` cannot give a container all GPUs.

    ## What it checks
    In `cdi` mode, the runtime turns `NVIDIA_VISIBLE_DEVICES=all` into the CDI name `<default-kind>=all`
    (`nvidia.com/gpu=all` unless `default-kind` is set) and injects it from the specs in `spec-dirs` (`/etc/cdi`,
    `/var/run/cdi` unless set). This checks that a spec there defines that device, that the device nodes its edits
    name exist, and that the hooks they add are executables on the node.

    ## Why it matters
    Without the device every GPU container fails at create: `failed to inject CDI devices: unresolvable CDI devices
    nvidia.com/gpu=all` (an empty `default-kind`: `=all`); a node a spec names that the node lacks: `failed to stat
    CDI host device "/dev/nvidia0"`; a hook the node lacks (`nvidia-cdi-hook` after the toolkit was removed): runc's
    `fork/exec /usr/bin/nvidia-cdi-hook: no such file or directory`. Specs are generated by `nvidia-ctk cdi
    generate` (from 1.18 by the `nvidia-cdi-refresh` service at boot): a node whose driver or toolkit changed
    since, or whose `spec-dirs` points elsewhere, has stale specs or none.

    ## Example
    ```toml
    [nvidia-container-runtime]
    mode = "cdi"
    ```
    on a node whose `/etc/cdi` and `/var/run/cdi` are empty.

    ## Fix
    `nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml`, or `systemctl enable --now
    nvidia-cdi-refresh.path` (1.18+); or point `spec-dirs` at the directory that holds the specs.
    """
    host = context.host
    if host is None:
        return
    current = view(value, context)
    if current.mode() != "cdi":
        return
    dirs = current.value("nvidia-container-runtime.modes.cdi.spec-dirs")
    directories = [d for d in dirs if isinstance(d, str)] if isinstance(dirs, list) else ["/etc/cdi", "/var/run/cdi"]
    kind = current.value("nvidia-container-runtime.modes.cdi.default-kind")
    kind = kind if isinstance(kind, str) else "nvidia.com/gpu"
    pointer = current.decoded.pointer("nvidia-container-runtime.mode")
    specs = _specs(host, directories)
    of_kind = [(path, spec) for path, spec in specs if spec.get("kind") == kind]
    devices = [
        (path, spec, device)
        for path, spec in of_kind
        for device in spec.get("devices") or []
        if isinstance(device, dict) and device.get("name") == "all"
    ]
    if not devices:
        where = ", ".join(directories) or "no directory"
        held = (
            f"the specs there define {kind} without an `all` device" if of_kind else f"no spec there has kind {kind!r}"
        )
        yield Problem(
            pointer,
            f"cdi mode reads {where}, and {held}: every GPU container asking with NVIDIA_VISIBLE_DEVICES=all fails "
            f"at create (`unresolvable CDI devices {kind}=all`)",
            "generate the specs: nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml",
        )
        return
    path, spec, device = devices[-1]
    failure = _injection_failure(host, path, spec, device)
    if failure is not None:
        yield Problem(
            pointer,
            f"cdi mode injects {kind}=all from {path}, and on this node that fails every GPU container asking for "
            f"all GPUs: `{failure}`",
            "regenerate the spec on this node: nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml",
        )


@toolkit_rule("NCT105", "toolkit-hook-mode-not-legacy", Severity.ERROR, needs_host=True)
def hook_mode_not_legacy(value: Any, context: Context) -> Iterator[Problem]:
    """NVIDIA's legacy hook is registered with an engine while the file's mode is not legacy.

    ## What it checks
    A hooks file in cri-o's or podman's hooks directories that runs `nvidia-container-runtime-hook` (or its
    `nvidia-container-toolkit` alias), while `mode` is `cdi`, `jit-cdi` or `csv` and
    `nvidia-container-runtime-hook.skip-mode-detection` is not true. From 1.18.0 the hook resolves `auto` to legacy
    itself, so `auto` passes.

    ## Why it matters
    The hook refuses to run outside legacy mode and fails the container: `invoking the NVIDIA Container Runtime
    Hook directly (e.g. specifying the docker --gpus flag) is not supported. Please use the NVIDIA Container
    Runtime (e.g. specify the --runtime=nvidia flag) instead`. Every GPU container the hook serves fails.

    ## Example
    `/usr/share/containers/oci/hooks.d/oci-nvidia-hook.json` on a node whose config sets `mode = "cdi"`.

    ## Fix
    Give GPU pods NVIDIA's runtime as their handler and remove the hooks file (`nvidia-ctk runtime configure
    --runtime=crio` does both from 1.18), or set mode back to `legacy`.
    """
    host = context.host
    if host is None:
        return
    current = view(value, context)
    mode = current.mode()
    if mode not in ("cdi", "jit-cdi", "csv") or current.value("nvidia-container-runtime-hook.skip-mode-detection"):
        return
    hooks = _nvidia_hook_files(host)
    if hooks:
        yield Problem(
            current.decoded.pointer("nvidia-container-runtime.mode"),
            f"mode {mode!r} while {', '.join(hooks)} runs NVIDIA's legacy hook: the hook refuses every GPU container "
            "it serves (`invoking the NVIDIA Container Runtime Hook directly ... is not supported`)",
            'route GPU pods through nvidia-container-runtime and remove the hooks file, or set mode = "legacy"',
        )


def _nvidia_hook_files(host: HostView) -> list[str]:
    from nvidia_oci_hook.node.engines import CRIO_DEFAULT_HOOKS_DIRS
    from nvidia_oci_hook.node.pods import nvidia_hook_files

    return nvidia_hook_files(host, (*CRIO_DEFAULT_HOOKS_DIRS, "/etc/containers/oci/hooks.d"))


@toolkit_rule("NCT106", "toolkit-crio-hook-deprecated", Severity.WARNING, needs_host=True)
def crio_hook_deprecated(value: Any, context: Context) -> Iterator[Problem]:
    """NVIDIA's legacy hook serves cri-o on a toolkit release that deprecates it.

    ## What it checks
    A hooks file running NVIDIA's hook in cri-o's hooks directories, judged as toolkit 1.18.0 or later.

    ## Why it matters
    From 1.18.0 `nvidia-ctk runtime configure --runtime=crio` writes a runtime handler drop-in instead, and the
    hook mode is deprecated: the hook keeps working in legacy mode only, and its file serves every container of the
    node, GPU or not, whatever the pod's RuntimeClass.

    ## Example
    `/usr/share/containers/oci/hooks.d/oci-nvidia-hook.json` with toolkit 1.18.

    ## Fix
    `nvidia-ctk runtime configure --runtime=crio` (a drop-in with the `nvidia` handler), give GPU pods that
    RuntimeClass, and remove the hooks file.
    """
    host = context.host
    if host is None:
        return
    current = view(value, context)
    if not current.release.deprecates_crio_hook:
        return
    hooks = _nvidia_hook_files(host)
    if hooks and host.exists("/etc/crio"):
        yield Problem(
            "",
            f"{', '.join(hooks)} runs NVIDIA's legacy hook for cri-o, deprecated from toolkit 1.18.0 "
            f"({current.label}): it serves every container of the node, and only in legacy mode",
            "nvidia-ctk runtime configure --runtime=crio, then remove the hooks file",
        )


@toolkit_rule("NCT107", "toolkit-envvar-unprivileged-on-kubernetes", Severity.WARNING, needs_host=True)
def envvar_unprivileged_on_kubernetes(value: Any, context: Context) -> Iterator[Problem]:
    """Any pod on this Kubernetes node may take every GPU by setting `NVIDIA_VISIBLE_DEVICES`.

    ## What it checks
    `accept-nvidia-visible-devices-envvar-when-unprivileged` (true when unset) on a node that runs a kubelet.

    ## Why it matters
    The device plugin hands out GPUs through the same variable, so the toolkit cannot tell the plugin's value from
    one the pod wrote: a pod with `NVIDIA_VISIBLE_DEVICES=all` and no GPU request gets every GPU on the node,
    outside the scheduler's accounting and beside the pods the GPUs were allocated to.

    ## Example
    No key set, on a node with `/var/lib/kubelet`.

    ## Fix
    As the device plugin documents: `accept-nvidia-visible-devices-envvar-when-unprivileged = false` and
    `accept-nvidia-visible-devices-as-volume-mounts = true` here, and the plugin's
    `--device-list-strategy=volume-mounts` (GPU Operator: `devicePlugin.env DEVICE_LIST_STRATEGY=volume-mounts`
    and `toolkit.env ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED=false`), or the CDI strategies.
    """
    host = context.host
    if host is None or not host.is_dir("/var/lib/kubelet"):
        return
    current = view(value, context)
    if current.value(ACCEPT_ENVVAR) is not True:
        return
    where = "set here" if ACCEPT_ENVVAR in current.decoded.set_at else "its default"
    yield Problem(
        current.decoded.pointer(ACCEPT_ENVVAR),
        f"{ACCEPT_ENVVAR} is true ({where}) on a Kubernetes node: any pod may take every GPU with "
        "NVIDIA_VISIBLE_DEVICES=all, whatever it was allocated",
        f"{ACCEPT_ENVVAR} = false and accept-nvidia-visible-devices-as-volume-mounts = true, with the device plugin's "
        "--device-list-strategy=volume-mounts",
    )


@toolkit_rule("NCT108", "toolkit-spec-dirs-differ", Severity.WARNING, needs_host=True)
def spec_dirs_differ(value: Any, context: Context) -> Iterator[Problem]:
    """The runtime's CDI `spec-dirs` are not the directories the node's engine reads.

    ## What it checks
    `nvidia-container-runtime.modes.cdi.spec-dirs` against the CRI engine's CDI spec directories (cri-o's
    `cdi_spec_dirs`, containerd's `cdi_spec_dirs`; `/etc/cdi` and `/var/run/cdi` by default), in `cdi` mode.

    ## Why it matters
    A CDI name the device plugin hands out is resolved twice: by the engine (from its directories) and, for
    `NVIDIA_VISIBLE_DEVICES`, by the runtime (from its own). A spec in only one of them makes one path work and
    the other fail (`unresolvable CDI devices`), depending on how each pod asks.

    ## Example
    `spec-dirs = ["/opt/cdi"]` with containerd reading `/etc/cdi` and `/var/run/cdi`.

    ## Fix
    Give both the same directories.
    """
    host = context.host
    if host is None:
        return
    current = view(value, context)
    dirs = current.value("nvidia-container-runtime.modes.cdi.spec-dirs")
    if current.mode() != "cdi" or not isinstance(dirs, list):
        return
    from nvidia_oci_hook.node.engines import engine_cdi_dirs

    for engine, engine_dirs in engine_cdi_dirs(host).items():
        if sorted(engine_dirs) != sorted(d for d in dirs if isinstance(d, str)):
            yield Problem(
                current.decoded.pointer("nvidia-container-runtime.modes.cdi.spec-dirs"),
                f"the runtime reads CDI specs from {', '.join(dirs) or 'nowhere'}, {engine} from "
                f"{', '.join(engine_dirs)}: a spec in only one of them resolves for one way of asking and not the "
                "other",
                f"spec-dirs = {list(engine_dirs)!r}".replace("'", '"'),
            )


@toolkit_rule("NCT109", "toolkit-csv-no-devices", Severity.ERROR, needs_host=True)
def csv_no_devices(value: Any, context: Context) -> Iterator[Problem]:
    """CSV mode, and the CSV files name no device node the node has.

    ## What it checks
    In `csv` mode (set, or what `auto` resolves to on Tegra), the `dev, PATH` lines of the `*.csv` files in
    `nvidia-container-runtime.modes.csv.mount-spec-path` (`/etc/nvidia-container-runtime/host-files-for-container.d`
    unless set), against the node's files.

    ## Why it matters
    The runtime builds each GPU container's devices from those lines and skips what the node lacks: with no file,
    or no node that exists, it starts the container without a GPU and says nothing (it only sets
    `NVIDIA_VISIBLE_DEVICES=void`).

    ## Example
    `mode = "csv"` on a discrete-GPU node (no CSV files: they ship with L4T on Jetson).

    ## Fix
    On a discrete GPU use `auto`, `legacy` or `cdi`; on Jetson install the L4T CSV files (`nvidia-l4t-*`), or point
    `mount-spec-path` at them.
    """
    host = context.host
    if host is None:
        return
    current = view(value, context)
    if resolved_mode(current, host) != "csv":
        return
    directory = current.value("nvidia-container-runtime.modes.csv.mount-spec-path")
    directory = directory if isinstance(directory, str) and directory else CSV_DIR
    files = [posixpath.join(directory, n) for n in sorted(host.list_dir(directory)) if n.endswith(".csv")]
    nodes = []
    for path in files:
        for line in (host.read_text(path) or "").splitlines():
            kind, _, target = line.partition(",")
            if kind.strip() == "dev" and target.strip():
                nodes.append(target.strip())
    if any(host.exists(node) for node in nodes):
        return
    held = (
        f"its CSV files name {', '.join(nodes)}, none of which the node has"
        if nodes
        else "it holds no CSV file naming a device"
    )
    yield Problem(
        current.decoded.pointer("nvidia-container-runtime.mode"),
        f"csv mode reads {directory}, and {held}: every GPU container starts without a GPU",
        'on a discrete GPU: mode = "auto"; on Jetson: install the L4T CSV files',
    )
