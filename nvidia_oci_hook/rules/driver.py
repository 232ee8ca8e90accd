"""DRV: what a container's NVIDIA_* variables ask of the node's driver, against what the node's driver is.

The variables are NVIDIA's (its hook, nvidia-container-cli and its runtime read them; nvidia_oci_hook/nvidia/ has
their semantics); the node's facts are read under `--host-root` (node/driver_facts.py). lint has no NVML: what
only NVML tells (a GPU's brand, architecture, MIG devices) is unknown here, and a verdict that needs it is
DRV002, never a guess.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from typing import Any, Optional

from nvidia_oci_hook.findings import Problem, Severity
from nvidia_oci_hook.kinds.cri import CRI_CONTAINER, CRIContainerConfig, is_cri_container
from nvidia_oci_hook.kinds.document import OCI_CONFIG
from nvidia_oci_hook.rules.base import Context, rule
from nvidia_oci_hook.rules.devices import config

KINDS = [OCI_CONFIG, CRI_CONTAINER]
HOOK_REFUSES = "NVIDIA's hook refuses the container"
CUDA_INSUFFICIENT = "CUDA driver version is insufficient for CUDA runtime version"
# The hook and runtime programs of NVIDIA's toolkit, by the names they are installed as.
NVIDIA_PROGRAMS = frozenset(
    {"nvidia-container-runtime-hook", "nvidia-container-toolkit", "nvidia-ctk", "nvidia-cdi-hook"}
)


def environment(value: Any, context: Context) -> dict[str, tuple[str, str]]:
    """The container's environment as name -> (pointer of its entry, value), for a config.json or a CRI config."""

    def build() -> dict[str, tuple[str, str]]:
        if is_cri_container(value):
            return CRIContainerConfig(value).envs
        return {name: (f"/process/env/{index}", text) for name, (index, text) in config(value, context).env().items()}

    return context.cached("nvidia-environment", build)  # type: ignore[no-any-return]


def _values(env: dict[str, tuple[str, str]]) -> dict[str, str]:
    return {name: text for name, (_pointer, text) in env.items()}


def _node(context: Context) -> Any:
    from nvidia_oci_hook.node.driver_facts import node_driver

    assert context.host is not None
    host = context.host
    return context.cached("node-driver", lambda: node_driver(host, context.driver_roots))


def _privileged(value: Any, context: Context) -> Optional[str]:
    if is_cri_container(value):
        pointer = CRIContainerConfig(value).privileged
        return f"{pointer} is true" if pointer else None
    return config(value, context).privileged_evidence()


# -- requirements ------------------------------------------------------------------------------------------------


def _requirement_verdicts(value: Any, context: Context, cuda: Optional[str] = None) -> Any:
    """(requirements, NVIDIA's verdict against the node, node facts), or None without requirements. cuda: the CUDA
    to judge with instead of the driver's (the image's forward-compatibility libraries)."""
    from nvidia_oci_hook.nvidia.requirements import NodeProperties, evaluate, requirements_from_env

    def build() -> Any:
        requirements = requirements_from_env(_values(environment(value, context)))
        if not requirements:
            return None
        if context.host is None:
            return requirements, evaluate(requirements, NodeProperties()), None
        node = _node(context)
        return requirements, evaluate(requirements, NodeProperties(cuda=cuda or node.cuda, driver=node.driver)), node

    # Four rules ask; a requirement of dozens of terms is evaluated once per CUDA version.
    return context.cached(f"requirement-verdicts {cuda}", build)


def _pointer(value: Any, context: Context, variable: str) -> str:
    return environment(value, context).get(variable, ("/process/env", ""))[0]


@rule("DRV001", "requirement-unsatisfied", Severity.ERROR, KINDS, needs_host=True)
def requirement_unsatisfied(value: Any, context: Context) -> Iterator[Problem]:
    """The image's NVIDIA_REQUIRE_* requirements are not met by this node's driver.

    ## What it checks
    Every `NVIDIA_REQUIRE_*` variable (and, for a legacy image, the `cuda>=X.Y` that `CUDA_VERSION` implies),
    read as NVIDIA's tools read them: space-separated terms ORed, comma-separated factors ANDed, the variables
    ANDed; `cuda`, `driver` and `arch` compared as versions, `brand` as a name; `NVIDIA_DISABLE_REQUIRE=true`
    turns them off. `driver` is the loaded kernel module's version (`/proc/driver/nvidia/version`), `cuda` the
    highest CUDA that driver supports, from NVIDIA's table of CUDA toolkit and driver versions.

    ## Why it matters
    NVIDIA's legacy hook refuses the container: `nvidia-container-cli: requirement error: unsatisfied
    condition: cuda>=12.8, please update your driver to a newer version, or use an earlier cuda container`. In
    CDI mode (NVIDIA's runtime since toolkit 1.18, the engines' own CDI injection, this project's wrapper)
    nothing checks requirements: the container starts, and the first CUDA call fails with "CUDA driver version
    is insufficient for CUDA runtime version".

    ## Example
    `NVIDIA_REQUIRE_CUDA=cuda>=12.8 brand=tesla,driver>=470,driver<471` on a node whose module is 550.54.15
    (CUDA 12.4 at most).

    ## Fix
    Run the image on a node whose driver supports its CUDA (the finding names the minimum driver), or use an
    image built for the node's CUDA. Where the image carries CUDA's forward-compatibility libraries and the GPU
    is a data-center one, see DRV009.
    """
    from nvidia_oci_hook.nvidia.requirements import cli_refusal_for

    found = _requirement_verdicts(value, context)
    if found is None:
        return
    _requirements, verdict, node = found
    failed = verdict.unsatisfied
    if verdict.satisfied is not False or failed is None or _compat_rescue(value, context) is not None:
        return
    yield Problem(
        _pointer(value, context, failed.variable),
        f"{failed.variable}={failed.text} is not met by this node: {node.cuda_basis}; failing: "
        f"{', '.join(_known_factors(verdict.failed_factors))} (driver {node.driver}): {HOOK_REFUSES} "
        f"('{cli_refusal_for(failed.text)}'); under CDI it starts and CUDA fails at its first call "
        f"('{CUDA_INSUFFICIENT}')",
        _requirement_hint(failed.text),
    )


def _known_factors(factors: tuple[str, ...]) -> list[str]:
    """The failing factors on properties lint knows: where the verdict is false without NVML, every term fails on
    one of them, and a brand or arch factor that may fail as well would only blur which."""
    return [factor for factor in factors if not factor.lower().startswith(("brand", "arch"))]


def _requirement_hint(text: str) -> str:
    from nvidia_oci_hook.nvidia.cuda_drivers import minimum_driver_for_cuda

    for term in text.split():
        for factor in term.split(","):
            if factor.startswith("cuda>="):
                release = minimum_driver_for_cuda(factor[len("cuda>=") :])
                if release is not None:
                    return (
                        f"run it on a node with driver >= {release.minimum_driver} ({release.label}), or use an image "
                        "built for this node's CUDA"
                    )
    return "run it on a node whose driver meets the requirement, or use an image built for this node's driver"


@rule("DRV002", "not-decidable-here", Severity.INFO, KINDS, needs_host=True)
def not_decidable_here(value: Any, context: Context) -> Iterator[Problem]:
    """What the container asks of the driver cannot be decided from what this node shows without NVML.

    ## What it checks
    An `NVIDIA_REQUIRE_*` requirement whose verdict depends on a property the node does not show here: a GPU's
    `brand` or `arch` (NVML only), the CUDA version of a driver newer than NVIDIA's table as read, a driver whose
    module is not loaded; an `NVIDIA_VISIBLE_DEVICES` entry naming MIG devices (`MIG-…`, `GPU:MIG`), which only NVML
    lists, or any entry on a node whose module lists no GPUs.

    ## Why it matters
    The finding says the check was not made, and why, rather than passing the container on a guess.

    ## Example
    `NVIDIA_REQUIRE_CUDA=cuda>=13.0 brand=tesla,driver>=535,driver<536` on a 535.104.05 node: the second term holds
    exactly when the GPU is a Tesla.

    ## Fix
    Run `nvidia-oci-hook doctor` on the node (with pynvml installed it reads brand, architecture and MIG devices
    through NVML), or check with `nvidia-smi -q`.
    """
    from nvidia_oci_hook.nvidia.requirements import NodeProperties, evaluate

    found = _requirement_verdicts(value, context)
    if found is not None and found[1].satisfied is None:
        requirements, _verdict, node = found
        properties = NodeProperties(cuda=node.cuda, driver=node.driver)
        for requirement in requirements:
            alone = evaluate([requirement], properties)
            if alone.satisfied is None:
                yield Problem(
                    _pointer(value, context, requirement.variable),
                    f"{requirement.variable}={requirement.text} cannot be decided here: it depends on "
                    f"{_unknowns(alone.unknown, node)}",
                    "nvidia-oci-hook doctor on the node reads what NVML knows (brand, compute capability)",
                )
    for problem in _device_problems(value, context):
        if problem[0] == "unknown":
            yield problem[1]


def _unknowns(properties: frozenset[str], node: Any) -> str:
    why = {
        "brand": "the GPU's brand, which only NVML tells",
        "arch": "the GPU's compute capability, which only NVML tells",
        "cuda": f"the driver's CUDA version ({node.cuda_basis})",
        "driver": f"the driver's version ({node.module.source})",
    }
    return " and ".join(why.get(name, name) for name in sorted(properties))


@rule("DRV003", "requirement-malformed", Severity.ERROR, KINDS)
def requirement_malformed(value: Any, context: Context) -> Iterator[Problem]:
    """An NVIDIA_REQUIRE_* expression (or CUDA_VERSION) that NVIDIA's hook cannot read.

    ## What it checks
    Each requirement as nvidia-container-cli parses it: factors `PROPERTY OP VALUE` with a property `cuda`,
    `driver`, `arch` or `brand` (any case), an operator `=`, `!=`, `<`, `<=`, `>` or `>=`, versions of digits and
    dots, `brand` compared with `=` or `!=` only; at most 32 requirements; for a legacy image, a `CUDA_VERSION`
    that reads as a version. A malformed factor counts only where the evaluation reaches it (a term that already
    holds stops it), so on a node it is judged with the node's values, and offline wherever it fails whatever they
    are.

    ## Why it matters
    NVIDIA's legacy hook refuses the container: `nvidia-container-cli: requirement error: invalid expression`,
    or `failed to get requirements ...` for a `CUDA_VERSION` it cannot read, whatever the driver is.

    ## Example
    `NVIDIA_REQUIRE_CUDA=cuda=>12.0` (for `>=`), or `NVIDIA_REQUIRE_ARCH=arch>=sm_80`.

    ## Fix
    Write each factor as `cuda>=12.0`, `driver>=535`, `arch>=8.0`, `brand=tesla`; separate alternatives with one
    space and the factors of one alternative with commas.
    """
    from nvidia_oci_hook.nvidia.requirements import legacy_hook_refusal

    found = _requirement_verdicts(value, context)
    if found is None or not found[1].errors:
        return
    verdict = found[1]
    for error in verdict.errors:
        yield Problem(
            _pointer(value, context, error.variable) if error.variable else "/process/env",
            f"{error.variable}={error.text} cannot be read by NVIDIA's hook ({error.message}): {HOOK_REFUSES} "
            f"('{legacy_hook_refusal(verdict) or error.message}')",
            "write each factor as PROPERTY OP VALUE: cuda>=12.0, driver>=535, arch>=8.0, brand=tesla",
        )


def _compat_rescue(value: Any, context: Context) -> Any:
    """(the forward-compatibility libcuda, its CUDA, the verdict with it) when the image's
    /usr/local/cuda/compat libraries would be used (their driver branch above the node's, as NVIDIA's
    enable-cuda-compat hook decides) and meet the requirements the node's driver alone does not."""
    from nvidia_oci_hook.node.driver_facts import compat_libraries, driver_version, highest_cuda

    rootfs = _rootfs(value, context)
    if rootfs is None or context.host is None:
        return None
    node = _node(context)
    host_version = driver_version(node.driver or "")
    for version, paths in sorted(compat_libraries(rootfs).items()):
        libcuda = [path for path in paths if posixpath.basename(path).startswith("libcuda.so.")]
        compat = driver_version(version)
        if not libcuda or compat is None or host_version is None or compat[0] <= host_version[0]:
            continue
        cuda, _basis = highest_cuda(version)
        if cuda is None:
            continue
        found = _requirement_verdicts(value, context, cuda=cuda)
        if found is not None and found[1].satisfied is not False:
            return libcuda[0], cuda, found[1]
    return None


@rule("DRV009", "requirement-met-by-compat-only", Severity.WARNING, [OCI_CONFIG], needs_host=True)
def requirement_met_by_compat_only(value: Any, context: Context) -> Iterator[Problem]:
    """The requirements are met only through the image's CUDA forward-compatibility libraries.

    ## What it checks
    With the bundle's root filesystem readable, an image whose `NVIDIA_REQUIRE_*` the node's driver does not
    meet (DRV001), but which carries `/usr/local/cuda/compat/libcuda.so.<version>` of a newer driver branch
    whose CUDA does meet them.

    ## Why it matters
    NVIDIA documents forward compatibility for data-center GPUs (and a few NGC-ready RTX parts) only. Under CDI,
    NVIDIA's `enable-cuda-compat` hook puts the compat libraries first when their branch is above the node's, and
    CUDA works on such a GPU; on any other GPU it fails with error 804 ("forward compatibility was attempted on non
    supported HW"). NVIDIA's legacy hook checks the requirements against the node driver's own CUDA and refuses
    the container whatever the image carries.

    ## Example
    `NVIDIA_REQUIRE_CUDA=cuda>=12.8` and `/usr/local/cuda/compat/libcuda.so.570.124.06` in the image, on a
    550.54.15 node (CUDA 12.4).

    ## Fix
    On a data-center GPU: under the legacy hook set `NVIDIA_DISABLE_REQUIRE=true`; under CDI nothing more. On
    other GPUs: upgrade the node's driver to one that supports the image's CUDA.
    """
    from nvidia_oci_hook.nvidia.requirements import cli_refusal_for

    found = _requirement_verdicts(value, context)
    if found is None or found[1].satisfied is not False or found[1].unsatisfied is None:
        return
    rescue = _compat_rescue(value, context)
    if rescue is None:
        return
    libcuda, cuda, _verdict = rescue
    failed, node = found[1].unsatisfied, found[2]
    yield Problem(
        _pointer(value, context, failed.variable),
        f"{failed.variable}={failed.text} is met only through the image's CUDA forward-compatibility libraries "
        f"({libcuda}: CUDA {cuda}; {node.cuda_basis}): NVIDIA's legacy hook still refuses "
        f"('{cli_refusal_for(failed.text)}'); under CDI they are used, which works on data-center GPUs only (elsewhere "
        "CUDA fails with error 804, 'forward compatibility was attempted on non supported HW')",
        "on a data-center GPU under the legacy hook set NVIDIA_DISABLE_REQUIRE=true; on other GPUs upgrade the "
        "node's driver",
    )


# -- device selection ----------------------------------------------------------------------------------------------


def _device_problems(value: Any, context: Context) -> Iterator[tuple[str, Problem]]:
    """("error" or "unknown", problem) for each NVIDIA_VISIBLE_DEVICES entry the node does not have or cannot say."""
    from nvidia_oci_hook.nvidia.env import VISIBLE_DEVICES, device_entry, visible_devices

    env = environment(value, context)
    if VISIBLE_DEVICES not in env:
        return
    pointer, text = env[VISIBLE_DEVICES]
    selection = visible_devices(_values(env))
    if selection.kind != "list" or _privileged(value, context) is not None:
        return
    node = _node(context)
    gpus = node.visible_gpus()
    shown = f"{VISIBLE_DEVICES}={text}"
    for entry in map(device_entry, selection.entries):
        refusal = f"{HOOK_REFUSES} ('nvidia-container-cli: device error: {entry.text}: unknown device')"
        if entry.form == "cdi":
            continue  # a CDI name: REC001 and REC002 judge it against the spec directories
        if entry.form == "unknown":
            jit = f'identifier is not a valid UUID or index: "{entry.text}"'
            message = (
                f"{shown}: {entry.text!r} is no device form NVIDIA's tools know (an index, a GPU or MIG UUID, "
                f"GPU:MIG, a PCI bus id, all, none or void): {refusal}; NVIDIA's runtime in jit-cdi mode too ('{jit}')"
            )
            yield "error", Problem(pointer, message, "name the GPU by index or UUID (nvidia-smi -L lists both)")
        elif gpus is None:
            message = f"{shown}: {entry.text} not checked: the node lists no GPUs ({node.module.source})"
            yield "unknown", Problem(pointer, message, "load the driver, then lint again")
        elif entry.form == "mig-uuid" or (entry.form == "mig-index" and (entry.index or 0) < len(gpus)):
            message = f"{shown}: {entry.text} names a MIG device, which only NVML lists: not checked here"
            yield "unknown", Problem(pointer, message, "nvidia-smi -L on the node lists the MIG devices")
        else:
            reason = _missing_gpu(entry, gpus)
            if reason:
                message = (
                    f"{shown}: {entry.text} {reason}: {refusal}; under CDI nvidia.com/gpu={entry.text} resolves to "
                    "no device"
                )
                yield "error", Problem(pointer, message, f"choose among {_listing(gpus)}")


def _missing_gpu(entry: Any, gpus: list[Any]) -> str:
    from nvidia_oci_hook.nvidia.env import normal_bus_id

    count = f"the node has {len(gpus)} GPU{'s' if len(gpus) != 1 else ''}"
    if entry.form in ("index", "mig-index") and entry.index >= len(gpus):
        return f"is GPU index {entry.index}, but {count}"
    if entry.form == "gpu-uuid" and entry.text.lower() not in {(gpu.uuid or "").lower() for gpu in gpus}:
        return f"is no GPU of this node ({count})"
    if entry.form == "pci" and normal_bus_id(entry.text) not in {gpu.bus_id.lower() for gpu in gpus}:
        return f"is no GPU's PCI bus id on this node ({count})"
    return ""


def _listing(gpus: list[Any]) -> str:
    if not gpus:
        return "no GPU: the module lists none"
    return ", ".join(f"{index} ({gpu.uuid or '?'}, {gpu.bus_id})" for index, gpu in enumerate(gpus))


@rule("DRV004", "visible-device-unknown", Severity.ERROR, KINDS, needs_host=True)
def visible_device_unknown(value: Any, context: Context) -> Iterator[Problem]:
    """NVIDIA_VISIBLE_DEVICES names a GPU this node does not have.

    ## What it checks
    Each entry of `NVIDIA_VISIBLE_DEVICES` (commas, spaces trimmed; `all`, `none`, `void` and an empty value
    select no particular GPU) in the forms nvidia-container-cli resolves: a decimal index, against the GPUs the
    kernel module lists in `/proc/driver/nvidia/gpus` (in PCI bus order, as NVML numbers them, excluded GPUs
    left out); a `GPU-` UUID and a PCI bus id against theirs; the GPU of a `GPU:MIG` pair. Any other form is
    refused by every NVIDIA tool. A privileged container is left out (it sees every GPU; GPU004).

    ## Why it matters
    NVIDIA's hook refuses the container (`nvidia-container-cli: device error: 7: unknown device`); in CDI mode
    the name `nvidia.com/gpu=7` is unresolvable and the engine refuses it.

    ## Example
    `NVIDIA_VISIBLE_DEVICES=7` on a node with two GPUs.

    ## Fix
    Name a GPU the node has (`nvidia-smi -L`), or let the device plugin choose (request `nvidia.com/gpu`
    resources instead of setting the variable by hand).
    """
    for severity, problem in _device_problems(value, context):
        if severity == "error":
            yield problem


@rule("DRV005", "unknown-driver-capability", Severity.ERROR, KINDS)
def unknown_driver_capability(value: Any, context: Context) -> Iterator[Problem]:
    """NVIDIA_DRIVER_CAPABILITIES names a capability NVIDIA's tools do not know.

    ## What it checks
    Each comma-separated name of `NVIDIA_DRIVER_CAPABILITIES` against `compute`, `compat32`, `graphics`,
    `utility`, `video`, `display`, `ngx`, `all` and `none`.

    ## Why it matters
    NVIDIA's legacy hook refuses the container with `unsupported capabilities found in 'compute,graphic'
    (allowed 'compute')`; NVIDIA's runtime in CDI mode ignores the unknown name, so the libraries it stands for
    (for `graphic`: the graphics ones) are silently not injected.

    ## Example
    `NVIDIA_DRIVER_CAPABILITIES=compute,graphic` (for `graphics`).

    ## Fix
    Spell the capability as NVIDIA names it, or use `all`.
    """
    from nvidia_oci_hook.nvidia.env import (
        CAPABILITY_WORDS,
        DRIVER_CAPABILITIES,
        driver_capabilities,
        unsupported_capabilities_text,
    )

    env = environment(value, context)
    if DRIVER_CAPABILITIES not in env:
        return
    pointer, text = env[DRIVER_CAPABILITIES]
    capabilities = driver_capabilities(_values(env))
    if not capabilities.unknown:
        return
    suggestions = [_nearest(name, CAPABILITY_WORDS) for name in capabilities.unknown]
    hint = ", ".join(f"{name} -> {near}" for name, near in zip(capabilities.unknown, suggestions) if near)
    yield Problem(
        pointer,
        f"{DRIVER_CAPABILITIES}={text}: {', '.join(capabilities.unknown)} "
        f"{'is no capability' if len(capabilities.unknown) == 1 else 'are no capabilities'} NVIDIA knows: "
        f"{HOOK_REFUSES} ('{unsupported_capabilities_text(capabilities.requested)}'); in CDI mode it is ignored",
        f"write {hint}" if hint else "use compute, compat32, graphics, utility, video, display, ngx, all or none",
    )


def _nearest(name: str, words: frozenset[str]) -> str:
    import difflib

    close = difflib.get_close_matches(name, sorted(words), n=1, cutoff=0.6)
    return close[0] if close else ""


@rule("DRV006", "mig-variable-unprivileged", Severity.ERROR, KINDS)
def mig_variable_unprivileged(value: Any, context: Context) -> Iterator[Problem]:
    """NVIDIA_MIG_CONFIG_DEVICES or NVIDIA_MIG_MONITOR_DEVICES is set in an unprivileged container.

    ## What it checks
    Either variable set to a non-empty value while the container is not privileged (no `CAP_SYS_ADMIN` in the
    bounding set; for a CRI config, `linux.security_context.privileged` not true).

    ## Why it matters
    NVIDIA's legacy hook refuses the container: `cannot set MIG_CONFIG_DEVICES in non privileged container`
    (and likewise for MIG_MONITOR_DEVICES). Changing or monitoring the MIG configuration needs the GPU's
    management capabilities, which only a privileged container has.

    ## Example
    `NVIDIA_MIG_CONFIG_DEVICES=all` in a pod without `privileged: true`.

    ## Fix
    Run the MIG manager privileged, or remove the variable from workloads that only use MIG devices.
    """
    from nvidia_oci_hook.nvidia.env import MIG_CONFIG_DEVICES, MIG_MONITOR_DEVICES, mig_refusal

    env = environment(value, context)
    if _privileged(value, context) is not None:
        return
    for variable in (MIG_CONFIG_DEVICES, MIG_MONITOR_DEVICES):
        if env.get(variable, ("", ""))[1]:
            pointer, text = env[variable]
            yield Problem(
                pointer,
                f"{variable}={text} in an unprivileged container: {HOOK_REFUSES} ('{mig_refusal(variable)}')",
                "run the container privileged, or remove the variable",
            )


@rule("DRV007", "nvidia-variables-unused", Severity.INFO, [OCI_CONFIG])
def nvidia_variables_unused(value: Any, context: Context) -> Iterator[Problem]:
    """The spec asks for GPUs through NVIDIA_VISIBLE_DEVICES, but nothing in it will act on the variable.

    ## What it checks
    A config.json whose `NVIDIA_VISIBLE_DEVICES` requests devices (not `void`, not empty, not CDI names) while
    the spec has no hook of NVIDIA's toolkit (`nvidia-container-runtime-hook`, `nvidia-ctk`, `nvidia-cdi-hook`)
    and no NVIDIA device node.

    ## Why it matters
    The variable is read only by NVIDIA's hook (legacy mode) and NVIDIA's runtime (`nvidia-container-runtime`,
    which injects the devices or the hook); runc and crun ignore it. As runc gets this spec, the container
    starts without a GPU. The same spec as the engine writes it, before NVIDIA's runtime, is fine when that
    runtime runs it: the finding says which it is not.

    ## Example
    `"env": ["NVIDIA_VISIBLE_DEVICES=0"]`, no `/dev/nvidia*` in `linux.devices`, no hooks.

    ## Fix
    Run the container with NVIDIA's runtime (a RuntimeClass whose handler is `nvidia`), or request the GPU
    through CDI (`cdi.k8s.io/` annotation, `--device nvidia.com/gpu=0`).
    """
    from nvidia_oci_hook.nvidia.env import VISIBLE_DEVICES, device_entry, visible_devices

    env = environment(value, context)
    if VISIBLE_DEVICES not in env:
        return
    selection = visible_devices(_values(env))
    if selection.kind == "void" or any(device_entry(entry).form == "cdi" for entry in selection.entries):
        return
    spec = config(value, context)
    if any(posixpath.basename(hook.path or "") in NVIDIA_PROGRAMS for hook in spec.hooks):
        return
    if any(device.path.startswith("/dev/nvidia") for device in spec.devices):
        return
    pointer, text = env[VISIBLE_DEVICES]
    yield Problem(
        pointer,
        f"{VISIBLE_DEVICES}={text} is read only by NVIDIA's hook and runtime, and this spec has neither an NVIDIA "
        "hook nor an NVIDIA device: as runc gets it, the container starts without a GPU",
        "run it with NVIDIA's runtime (RuntimeClass handler nvidia), or request the GPU through CDI",
    )


# -- the image's root filesystem ---------------------------------------------------------------------------------


def _rootfs(value: Any, context: Context) -> Any:
    """A view of the bundle's root filesystem (root.path, relative to the config's directory), or None when the
    spec names none or it cannot be read here."""
    from nvidia_oci_hook.host import HostView

    def build() -> Any:
        if is_cri_container(value) or not isinstance(value, dict) or not isinstance(value.get("root"), dict):
            return None
        path = value["root"].get("path")
        if not isinstance(path, str) or not path:
            return None
        if not path.startswith("/"):
            if context.document_path in ("", "<stdin>"):
                return None
            path = posixpath.join(posixpath.dirname(posixpath.abspath(context.document_path)), path)
        view = HostView(path)
        return view if view.is_dir("/") else None

    return context.cached("rootfs", build)


@rule("DRV008", "image-carries-driver", Severity.ERROR, [OCI_CONFIG], needs_host=True)
def image_carries_driver(value: Any, context: Context) -> Iterator[Problem]:
    """The image's root filesystem carries NVIDIA driver libraries of another version than the node's module.

    ## What it checks
    With the bundle's root filesystem readable (`root.path`, relative to the config's directory), the driver
    libraries named with a driver version (`libcuda.so.545.23.08`, `libnvidia-ml.so.545.23.08`, …) in its library
    directories, and what its `.so.1` links and linker cache select, against the loaded kernel module's version.
    CUDA's forward-compatibility libraries under `/usr/local/cuda/compat` are CUDA's own mechanism, not this.

    ## Why it matters
    A driver installed into the image (a `cuda-drivers` or `nvidia-driver` package, a copied `libcuda.so`) is
    what the container's loader finds, not the node's: NVML inside fails with `Failed to initialize NVML:
    Driver/library version mismatch`, and the injection of the node's libraries collides with the image's files
    of the same names.

    ## Example
    The image holds `/usr/lib/x86_64-linux-gnu/libcuda.so.545.23.08` and its `libcuda.so.1` link on a node whose
    module is 550.54.15.

    ## Fix
    Remove the driver from the image (build from a CUDA base image, which carries none; do not install
    `cuda-drivers` or `nvidia-driver-*` in it): the node's driver is injected at start.
    """
    from nvidia_oci_hook.node.driver_facts import user_space

    rootfs = _rootfs(value, context)
    if rootfs is None:
        return
    loaded = _node(context).driver
    space = user_space(rootfs, "/")
    others = {version: files for version, files in space.files.items() if version != loaded}
    selected = [s for s in space.selections if s.version is not None and s.version != loaded]
    if not others and not selected:
        return
    versions = sorted(others) or sorted({s.version for s in selected if s.version})
    files = [path for version in versions for path in others.get(version, [])] or [s.name for s in selected]
    shown = ", ".join(files[:4]) + (f" and {len(files) - 4} more" if len(files) > 4 else "")
    against = f"the loaded kernel module is {loaded}" if loaded else "the node's module version is unknown"
    yield Problem(
        "/root/path",
        f"the image carries NVIDIA driver libraries of {', '.join(versions)} ({shown}; under {rootfs.root}), and "
        f"{against}: NVML in the container fails ('Failed to initialize NVML: Driver/library version mismatch'), "
        "and the node's libraries collide with them when injected",
        "remove the driver from the image; the node's driver is injected when the container starts",
    )
