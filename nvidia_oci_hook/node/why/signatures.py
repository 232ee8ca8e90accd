"""The errors `why` recognises: each one's text as its engine or tool writes it, where that text is written, and
the causes that can produce it, each decided on the node.

A signature's pattern is matched against the views `reading.views` makes of the paste; its named groups (a path,
a device name, a condition) are what its causes are decided with. The causes come in the order a cause that holds
is most likely the reason; `why` lists the ones that hold first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from nvidia_oci_hook.node.why import deciders, kubernetes, toolkit
from nvidia_oci_hook.node.why.causes import Cause, Node

Decide = Callable[[Node, "dict[str, str]"], "list[Cause]"]
Undecided = Callable[["dict[str, str]"], "list[str]"]


@dataclass(frozen=True)
class Signature:
    id: str
    title: str
    source: str  # where the text is written: project, release, file and function
    pattern: re.Pattern[str]
    decide: Decide
    undecided: Undecided = lambda groups: []  # the common case: nothing left to another command


_PATH = r"(?P<path>/[^\s\"':]+)"

SIGNATURES = (
    Signature(
        "crio-device-path-exists",
        "cri-o refuses a privileged container whose device's container path exists on the host (seed 003)",
        "cri-o release-1.37 internal/factory/container/device_linux.go, specAddContainerConfigDevices",
        re.compile(r"privileged container was configured with a device container path that already exists on the host"),
        deciders.device_path_exists,
        deciders.device_path_exists_undecided,
    ),
    Signature(
        "device-host-path-missing",
        "the engine cannot find a device's host path while it generates the spec (seed 000)",
        "containerd v1.7.27 pkg/cri/opts/spec_linux_opts.go and v2.1.4 internal/cri/opts/spec_linux_opts.go, "
        "WithDevices: the os.Lstat error of pkg/os/os_unix.go ResolveSymbolicLink, wrapped in 'failed to generate "
        "spec: %w' and 'failed to generate container %q spec: %w' (v1.7.27 pkg/cri/server/container_create.go, "
        "v2.1.4 internal/cri/server/container_create.go); podman 4.3 pkg/specgen/generate/config_linux.go "
        "DevicesFromPath, the os.Stat error of a --device path, unwrapped ('Error: stat %s: ...')",
        re.compile(r"\bl?stat " + _PATH + r": no such file or directory"),
        deciders.host_path_missing("CRI002", "the device's host path"),
        deciders.host_path_missing_undecided,
    ),
    Signature(
        "mount-source-missing",
        "runc cannot bind-mount a source that does not exist",
        "runc v1.1.0 to v1.1.15 libcontainer/rootfs_linux.go, prepareRootfs ('error mounting %q to rootfs at %q: %w')",
        re.compile(
            r"error mounting \"(?P<path>/[^\"]+)\" to rootfs at \"(?P<target>[^\"]*)\"[^\"]*?no such file or directory"
        ),
        deciders.host_path_missing("HOST003", "the mount's source"),
    ),
    Signature(
        "crun-mount-source-missing",
        "crun cannot stat a bind mount's source that does not exist",
        "crun 1.8.1 src/libcrun/utils.c crun_dir_p_at ('error stat'ing file `%s`'), which src/libcrun/linux.c "
        "calls on a bind mount's source to tell a directory from a file",
        re.compile(r"error stat'ing file `" + _PATH + r"`: No such file or directory"),
        deciders.host_path_missing("HOST003", "the mount's source"),
    ),
    Signature(
        "cdi-unresolvable",
        "the CDI cache cannot resolve a requested device",
        "container-device-interface v0.6.0 to v1.0.1 pkg/cdi/cache.go, (*Cache).InjectDevices ('unresolvable CDI "
        "devices %s'); both engines wrap it in 'CDI device injection failed: %w': cri-o release-1.37 "
        "internal/factory/container/device_linux.go SpecInjectCDIDevices, containerd v1.7.27 pkg/cri/opts/"
        "spec_linux.go WithCDI (inside 'failed to generate container %q spec') and v2.1.4 pkg/cdi/oci_opt.go "
        "WithCDIDevices (inside 'failed to create containerd container'); NVIDIA's nvidia-container-runtime in cdi "
        "mode wraps it in 'failed to inject CDI devices: %v' (nvidia-container-toolkit v1.20.0 "
        "internal/modifier/cdi.go)",
        re.compile(
            r"(?:(?:(?P<containerd>failed to (?:generate container \"[^\"]*\" spec|create containerd container): )?"
            r"CDI device injection failed: )|(?P<nvidia>failed to inject CDI devices: ))?"
            r"unresolvable CDI devices (?P<names>[\w./-]+=[\w.:-]+(?:, ?[\w./-]+=[\w.:-]+)*)"
        ),
        # NVIDIA's runtime's form is decided from its own spec-dirs by toolkit-cdi-unresolvable.
        deciders.cdi_unresolvable,
    ),
    Signature(
        "nvml-unknown-error",
        "NVML fails inside a running container: the container lost access to its GPUs",
        "NVML's nvmlInit failing with NVML_ERROR_UNKNOWN (999), as nvidia-smi and NVML's callers print it "
        "('Failed to initialize NVML: %s' with nvmlErrorString); both closed source, the text as printed",
        re.compile(r"Failed to initialize NVML: Unknown Error"),
        deciders.lost_device_access,
        deciders.lost_device_access_undecided,
    ),
    Signature(
        "nvidia-node-eperm",
        "opening an NVIDIA device node inside a container is refused by its device cgroup",
        "the open(2) of /dev/nvidia* in NVML or CUDA, refused with EPERM by the device cgroup (as reported in "
        "NVIDIA/nvidia-container-toolkit issues #251 and #1227)",
        re.compile(r"open (?P<path>/dev/nvidia(?:ctl|-uvm(?:-tools)?|\d+)): operation not permitted"),
        deciders.lost_device_access,
        deciders.lost_device_access_undecided,
    ),
    Signature(
        "driver-library-mismatch",
        "the loaded kernel module and the driver's libraries are different versions",
        "NVML nvmlErrorString(NVML_ERROR_LIB_RM_VERSION_MISMATCH, 18) 'Driver/library version mismatch' (closed "
        "source); libnvidia-container before 1.17 (commit 63d366e) src/cli/configure.c configure_command "
        "('initialization error: %s') around src/driver.c call_nvml ('nvml error: %s')",
        re.compile(r"(?i:driver/library version mismatch)"),
        deciders.driver_mismatch,
    ),
    Signature(
        "requirement-unsatisfied",
        "nvidia-container-cli refuses a container whose NVIDIA_REQUIRE_* the driver does not meet",
        "libnvidia-container (commit 63d366e) src/cli/dsl.c dsl_evaluate ('unsatisfied condition: %s, please "
        "update your driver to a newer version, or use an earlier cuda container'), inside src/cli/configure.c "
        "configure_command ('requirement error: %s')",
        re.compile(r"requirement error: unsatisfied condition: (?P<condition>[^,]+?)(?:, please update|\s*$)"),
        deciders.requirement_unsatisfied,
    ),
    Signature(
        "cuda-driver-insufficient",
        "the CUDA runtime in the image is newer than what the node's driver supports",
        "the CUDA runtime's cudaGetErrorString(cudaErrorInsufficientDriver, 35), closed source, the text as printed",
        re.compile(r"CUDA driver version is insufficient for CUDA runtime version"),
        deciders.cuda_insufficient,
        deciders.cuda_insufficient_undecided,
    ),
    Signature(
        "unknown-device",
        "nvidia-container-cli cannot find a device NVIDIA_VISIBLE_DEVICES names",
        "libnvidia-container (commit 63d366e) src/cli/common.c select_devices ('unknown device'), inside "
        "src/cli/configure.c configure_command ('device error: %s')",
        re.compile(r"device error: (?P<device>[^\s:]+): unknown device"),
        deciders.unknown_device,
    ),
    Signature(
        "unsupported-capabilities",
        "NVIDIA's hook refuses an NVIDIA_DRIVER_CAPABILITIES it does not know",
        "nvidia-container-toolkit v1.17.8, v1.18.0 and v1.20.0 cmd/nvidia-container-runtime-hook/"
        "container_config.go getDriverCapabilities ('unsupported capabilities found in '%v' (allowed '%v')')",
        re.compile(r"unsupported capabilities found in '(?P<requested>[^']*)'"),
        deciders.unsupported_capabilities,
    ),
    Signature(
        "crio-precreate-stage",
        "cri-o will not start: a hooks.d file in its hooks directory names the precreate stage",
        "containers/common v0.50.0 to v0.64.1 pkg/hooks/1.0.0/hook.go, (*Hook).Validate ('unknown stage %q'), "
        "which cri-o calls on every file of its hooks directories at start",
        re.compile(r"unknown stage \"precreate\""),
        deciders.from_rule_decider("HKD204"),
    ),
    Signature(
        "hooks-regexp",
        "a hooks.d file's when-regexp does not compile",
        "containers/common v0.50.0 to v0.64.1 pkg/hooks/1.0.0/hook.go, (*Hook).Validate, which compiles each "
        "when-regexp and wraps the error ('invalid annotation key %q: %w'); 'error parsing regexp' is Go's "
        "regexp/syntax",
        re.compile(r"error parsing regexp: [^\n]*"),
        deciders.from_rule_decider("HKD005"),
    ),
    Signature(
        "containerd-config-version",
        "containerd refuses its configuration's version",
        "containerd v1.7.27 services/server/config/config.go ValidateV2 ('unsupported config version `%d`', "
        "after every import is merged: a version 3 drop-in under a version 2 root says so too); v2.1.4 "
        "cmd/containerd/server/config/config.go ValidateVersion ('expected containerd config version equal to or "
        "less than `%d`, got `%d`'), inside 'failed to load TOML from %s: %w'",
        re.compile(
            r"unsupported config version `-?\d+`"
            r"|expected containerd config version equal to or less than `\d+`, got `-?\d+`"
        ),
        deciders.from_rule_decider("CTD002", "CTD117"),
    ),
    Signature(
        "containerd-dropin-version",
        "a containerd drop-in has a higher config version than the root file",
        "containerd v2.3 cmd/containerd/server/config/config.go, LoadConfigWithPlugins ('drop-in config version "
        "%d higher than root config version %d'); earlier releases have no such check",
        re.compile(r"drop-in config version \d+ higher than root config version \d+"),
        deciders.from_rule_decider("CTD117"),
    ),
    Signature(
        "crio-runtime-handler-unknown",
        "cri-o has no runtime handler of the name the pod's RuntimeClass gives",
        "cri-o release-1.37 internal/oci/oci.go, ValidateRuntimeHandler ('failed to find runtime handler %s from "
        "runtime list %v')",
        re.compile(r"failed to find runtime handler (?P<handler>[^\s\\\"]+) from runtime list"),
        deciders.runtime_handler_missing("crio"),
        deciders.runtime_handler_undecided,
    ),
    Signature(
        "containerd-runtime-handler-unknown",
        "containerd has no runtime of the name the pod's RuntimeClass gives",
        "containerd v1.7.27 pkg/cri/server/sandbox_run.go getSandboxRuntime and v2.1.4 internal/cri/config/"
        "config.go GetSandboxRuntime ('no runtime for %q is configured')",
        re.compile(r"no runtime for \"(?P<handler>[^\"\\]+)\" is configured"),
        deciders.runtime_handler_missing("containerd"),
        deciders.runtime_handler_undecided,
    ),
    Signature(
        "runtimeclass-not-found",
        "the pod's runtimeClassName names a RuntimeClass the cluster does not have",
        "kubernetes, read in its 2026 sources (node.k8s.io/v1 since v1.20): the API server's "
        "plugin/pkg/admission/runtimeclass/admission.go prepareObjects ('pod rejected: RuntimeClass %q not found', "
        "a Forbidden answer to the pod's creation, or a ReplicaSet's FailedCreate event); kubelet's "
        "pkg/kubelet/runtimeclass/runtimeclass_manager.go LookupRuntimeHandler, the lister's NotFound "
        "(staging/src/k8s.io/client-go/listers/node/v1/runtimeclass.go: 'runtimeclass.node.k8s.io %q not found'), "
        "which pkg/kubelet/kuberuntime/kuberuntime_sandbox.go createPodSandbox wraps ('Failed to create sandbox for "
        "pod %q: %v') and kuberuntime_manager.go SyncPod records as FailedCreatePodSandBox ('Failed to create pod "
        "sandbox: %v')",
        re.compile(
            r"(?:(?P<admission>pod rejected: )?RuntimeClass|runtimeclass(?:es)?\.node\.k8s\.io) "
            r"\"(?P<name>[^\"\\\s]+)\" not found"
        ),
        kubernetes.runtimeclass_not_found,
        kubernetes.runtimeclass_not_found_undecided,
    ),
    Signature(
        "device-plugin-no-platform",
        "NVIDIA's device plugin finds neither NVML nor Tegra in its own container",
        "NVIDIA k8s-device-plugin v0.16.x internal/plugin/manager/factory.go and v0.17.0 to v0.19.0 "
        "internal/plugin/factory.go, getResourceManagers ('Incompatible strategy detected %v': resolveStrategy left "
        "'auto' unresolved); v0.14.x and v0.15.x internal/rm/rm.go NewResourceManagers ('Incompatible platform "
        "detected'); v0.19.1 to v0.20.0 cmd/nvidia-device-plugin/plugin-manager.go resolveStrategy ('Unsupported "
        "platform detected; defaulting to nvml', then NVML's initialisation fails)",
        re.compile(
            r"Incompatible strategy detected (?P<strategy>\w+)|Incompatible platform detected"
            r"|Unsupported platform detected; defaulting to nvml"
        ),
        kubernetes.device_plugin_no_platform,
        kubernetes.device_plugin_no_platform_undecided,
    ),
    Signature(
        "nvidia-envvar-unprivileged",
        "NVIDIA's hook refuses NVIDIA_VISIBLE_DEVICES from an unprivileged container",
        "nvidia-container-toolkit v1.3.0 to v1.4.0 pkg/container_config.go getDevices (log.Panicln 'insufficient "
        "privileges to read device list from NVIDIA_VISIBLE_DEVICES envvar': the hook fails, the container is not "
        "created); v1.4.1 to v1.17.8 getDevices logs 'Ignoring devices specified in NVIDIA_VISIBLE_DEVICES "
        "(privileged=%v, %v=%v)' (cmd/nvidia-container-runtime-hook/container_config.go at v1.17.8) and v1.18.0 to "
        "v1.20.0 internal/config/image/cuda_image.go (CUDA).VisibleDevices 'Ignoring devices requested by "
        "environment variable(s) in unprivileged container: %v': the container starts without GPUs",
        re.compile(
            r"insufficient privileges to read device list from NVIDIA_VISIBLE_DEVICES envvar"
            r"|Ignoring devices specified in NVIDIA_VISIBLE_DEVICES \(privileged=(?P<privileged>true|false)"
            r"|Ignoring devices requested by environment variable\(s\) in unprivileged container"
        ),
        kubernetes.envvar_unprivileged,
        kubernetes.envvar_unprivileged_undecided,
    ),
    Signature(
        "device-allocate-failed",
        "kubelet refuses a pod whose device-plugin resource it cannot allocate (UnexpectedAdmissionError)",
        "kubernetes, read in its 2026 sources: pkg/kubelet/cm/devicemanager/manager.go devicesToAllocate "
        "('requested number of devices unavailable for %s. Requested: %d, Available: %d'; since PR #116376 "
        "'cannot allocate unregistered device %s', 'no healthy devices present; cannot allocate unhealthy devices "
        "%s', 'previously allocated devices are no longer healthy; cannot allocate unhealthy devices %s'), wrapped "
        "by pkg/kubelet/cm/admission/errors.go ('Allocate failed due to %v, which is unexpected', reason "
        "UnexpectedAdmissionError; the pod's status message starts 'Pod was rejected: ')",
        re.compile(
            r"(?:Allocate failed due to )?(?P<reason>requested number of devices unavailable for [\w./-]+\. "
            r"Requested: \d+, Available: \d+|(?:no healthy devices present|previously allocated devices are no "
            r"longer healthy); cannot allocate unhealthy devices [\w./-]+|cannot allocate unregistered device "
            r"[\w./-]+)(?:, which is unexpected)?"
            r"|Allocate failed due to (?P<other>.+?), which is unexpected"
            r"|UnexpectedAdmissionError(?!.*(?:Allocate failed due to|cannot allocate|requested number of devices))"
        ),
        kubernetes.allocate_failed,
        kubernetes.allocate_failed_undecided,
    ),
    Signature(
        "toolkit-discovery-mode",
        "nvidia-ctk cdi generate took a runtime mode from the toolkit's config.toml as its discovery mode",
        "nvidia-container-toolkit v1.18.0 cmd/nvidia-ctk/cdi/generate/generate.go validateFlags ('invalid "
        "discovery mode: %v'), its --mode read from nvidia-container-runtime.mode in 1.18.0 alone",
        re.compile(r"invalid discovery mode: (?P<mode>[\w.-]+)"),
        toolkit.discovery_mode,
        toolkit.discovery_mode_undecided,
    ),
    Signature(
        "toolkit-hook-not-legacy",
        "NVIDIA's hook ran outside nvidia-container-runtime while the toolkit's mode is not legacy",
        "nvidia-container-toolkit v1.20.0 cmd/nvidia-container-runtime-hook/hook_config.go assertModeIsLegacy",
        re.compile(
            r"invoking the NVIDIA Container Runtime Hook directly \(e\.g\. specifying the docker --gpus flag\) is "
            r"not supported"
        ),
        toolkit.hook_not_legacy,
        toolkit.hook_not_legacy_undecided,
    ),
    Signature(
        "toolkit-config-refused",
        "a toolkit binary, or its installer, cannot load the configuration it reads",
        "nvidia-container-toolkit v1.20.0: internal/runtime/runtime.go Run ('error loading config: %v'), "
        "cmd/nvidia-container-runtime-hook/hook_config.go getHookConfig ('failed to load config: %v', and "
        "'couldn't open required configuration file: %v'), api/config/v1/toml.go ('failed to load specified config "
        "file: %w', 'failed to unmarshal config: %v'), api/config/v1/cli.go ('nvidia-container-cli.ldconfig value %q "
        "is not host-relative'); the installer's cmd/nvidia-ctk-installer/container/runtime/containerd/containerd.go "
        "Setup and nvidia-ctk runtime configure ('unable to load config: %v', the engine's file)",
        re.compile(
            r"(?P<who>error loading config|error getting hook config: failed to load config"
            r"|unable to load config(?: for runtime (?P<engine>[\w-]+))?): "
            r"(?P<detail>(?:couldn't open required configuration file: |failed to load config: )?"
            r"(?:failed to load specified config file: |failed to unmarshal config: |nvidia-container-cli\.ldconfig "
            r"value |file does not exist|\(\d+, \d+\): )[^\"]{0,200})"
        ),
        toolkit.config_load_failed,
        toolkit.config_load_failed_undecided,
    ),
    Signature(
        "hook-program-missing",
        "the low-level runtime cannot run a hook's program: the node lacks it",
        "runc v1.1 libcontainer/configs/config.go HookList.RunHooks ('error running hook #%d: %w'), v1.2 and later "
        "Hooks.Run ('error running %s hook #%d: %w'), the error of Go's exec.Cmd.Start ('fork/exec %s: no such file "
        "or directory'); crun 1.8.1 src/libcrun/container.c ('error executing hook `%s` (exit code: %d)')",
        re.compile(
            r"error running (?:(?:prestart|createRuntime|createContainer|startContainer|poststart|poststop) )?hook "
            r"#\d+: fork/exec (?P<path>/[^\s:\"]+): no such file or directory"
            r"|error executing hook `(?P<crun>/[^`]+)` \(exit code: (?P<code>\d+)\)"
        ),
        toolkit.hook_program_missing,
        toolkit.hook_program_missing_undecided,
    ),
    Signature(
        "toolkit-runtime-not-found",
        "nvidia-container-runtime finds none of the low-level runtimes its config.toml lists",
        "nvidia-container-toolkit v1.20.0 internal/oci/runtime_low_level.go findRuntime ('no runtime binary found "
        "from candidate list: %v', 'at least one runtime candidate must be specified'), inside 'error locating "
        "runtime: %v' and internal/runtime/runtime_factory.go 'error constructing low-level runtime: %v'",
        re.compile(
            r"error locating runtime: (?:no runtime binary found from candidate list: \[(?P<candidates>[^\]]*)\]"
            r"|(?P<empty>at least one runtime candidate must be specified))"
        ),
        toolkit.runtime_not_found,
        toolkit.runtime_not_found_undecided,
    ),
    Signature(
        "toolkit-invalid-mode",
        "nvidia-container-runtime refuses the mode its config.toml sets",
        "nvidia-container-toolkit v1.19.0 to v1.20.0 internal/modifier/factory.go validate ('invalid mode %q', 'a "
        "mode must be specified'); v1.17.x and v1.18.x internal/runtime/runtime_factory.go newModeModifier ('invalid "
        "runtime mode: %v'); both inside 'failed to construct OCI spec modifier: %v'",
        re.compile(
            r"failed to construct OCI spec modifier: (?:invalid mode \"(?P<mode>[^\"]*)\""
            r"|invalid runtime mode: (?P<old_mode>[\w.-]*)|(?P<nomode>a mode must be specified))"
        ),
        toolkit.invalid_mode,
        toolkit.which_config_undecided,
    ),
    Signature(
        "toolkit-cdi-unresolvable",
        "nvidia-container-runtime in cdi mode finds no spec for a requested device in its spec-dirs",
        "nvidia-container-toolkit v1.20.0 internal/modifier/cdi.go ('failed to inject CDI devices: %v') around "
        "container-device-interface pkg/cdi/cache.go InjectDevices ('unresolvable CDI devices %s'), the "
        "directories from [nvidia-container-runtime.modes.cdi] spec-dirs",
        re.compile(
            r"failed to inject CDI devices: unresolvable CDI devices "
            r"(?P<names>[\w./-]+=[\w.:-]+(?:, ?[\w./-]+=[\w.:-]+)*)"
        ),
        toolkit.cdi_specs_missing,
        toolkit.which_config_undecided,
    ),
    Signature(
        "executable-not-found",
        "a runtime or hook program is not where the engine looks for it",
        "Go os/exec LookPath's ErrNotFound ('exec: %q: executable file not found in $PATH'), as containerd v1.7 "
        "runtime/v1/shim/client WithStart ('failed to start shim: %w') and cri-o pkg/config/config.go "
        "ValidateRuntimePath ('invalid runtime_path for runtime '%s': %w') report it",
        re.compile(r"exec: \"(?P<name>[^\"]+)\": executable file not found in \$PATH"),
        deciders.program_missing,
        deciders.program_missing_undecided,
    ),
    Signature(
        "nvidia-oci-hook-refusal",
        "this project's runtime wrapper or guard refused the container",
        "nvidia-oci-hook runtime/messages.py, refusal ('nvidia-oci-hook: refusing container ID: [CODE] ...')",
        re.compile(
            r"nvidia-oci-hook: refusing (?:container \S+|the container): (?P<reasons>.+?)(?=nvidia-oci-hook:|$)"
        ),
        deciders.our_refusal,
    ),
)
