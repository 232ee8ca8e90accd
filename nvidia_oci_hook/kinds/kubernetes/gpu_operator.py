"""The GPU Operator's ClusterPolicy (`nvidia.com/v1`) as the operator release that reconciles it renders the
operands the Kubernetes rules judge: the container toolkit's and the device plugin's DaemonSets.

The operator starts each operand from its release's `assets/` (`state-container-toolkit`, `state-device-plugin`)
and changes it in `controllers/object_controls.go`: `TransformToolkit` (with the CDI env and `transformForRuntime`)
and `TransformDevicePlugin` (with the CDI env); a field left out takes `api/nvidia/v1/clusterpolicy_types.go`'s
default. What differs between releases is in `RELEASES`, read at each release's tag. The operator picks the
container runtime from the nodes (`containerRuntimeVersion`); offline, the toolkit is rendered for containerd and for
cri-o both, each named in its DaemonSet's label.

A derived operand is a `KubeObject` whose pointer is the ClusterPolicy's with `/~gpu-operator/RELEASE/RUNTIME/NAME`
after it (`~g` is no JSON pointer escape, so no field of a real stream has it): a rule reports at that pointer, and
`relocated` moves the problem to the ClusterPolicy field each part came from (`toolkit.env[2]`, `cdi.enabled`), at
that field's line of the user's stream.
"""

from __future__ import annotations

import dataclasses
import posixpath
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Optional

from nvidia_oci_hook.findings import Problem
from nvidia_oci_hook.kinds.kubernetes import DERIVED

RUNTIMES = ("containerd", "crio")
ANY_ENGINE = "any"  # in the pointer of an operand rendered alike for every engine
_NAMESPACE = "gpu-operator"  # the chart's; the operands go to the operator's own namespace


@dataclass(frozen=True)
class Release:
    """What one GPU Operator release does differently with the same ClusterPolicy."""

    version: str
    # CDIConfigSpec.IsEnabled() where `cdi.enabled` is unset.
    cdi_by_default: bool
    # DEVICE_LIST_STRATEGY the device plugin is given with CDI on.
    cdi_strategy: str
    # Whether `toolkit.env` and `devicePlugin.env` are applied after the CDI env (and so win over it).
    user_env_wins: bool
    # Whether `file=` sources of RUNTIME_CONFIG_SOURCE are rewritten to the toolkit's view of the host (/host).
    rewrites_config_sources: bool
    # Whether `cdi.nriPluginEnabled` exists (the toolkit then leaves the runtime's configuration alone).
    nri_plugin: bool
    # The toolkit and device plugin images of the release's chart.
    toolkit_version: str
    device_plugin_version: str


def _release(version: str, toolkit: str, plugin: str, newer: bool, nri: bool = False) -> Release:
    return Release(
        version,
        cdi_by_default=newer,
        cdi_strategy="cdi-annotations,cdi-cri" if newer else "envvar,cdi-annotations",
        user_env_wins=newer,
        rewrites_config_sources=newer,
        nri_plugin=nri,
        toolkit_version=toolkit,
        device_plugin_version=plugin,
    )


# 25.10 turned CDI on by default, moved the device plugin to the CDI-only strategies, and applied the user's env
# after the operator's (transformDevicePluginCtrForCDI, transformToolkitCtrForCDI); 26.3 added the NRI plugin.
RELEASES = {
    release.version: release
    for release in (
        _release("24.3", "v1.15.0-rc.4-ubuntu20.04", "v0.15.0-ubi8", newer=False),
        _release("24.6", "v1.16.1-ubuntu20.04", "v0.16.1-ubi8", newer=False),
        _release("24.9", "v1.17.0-ubuntu20.04", "v0.17.0", newer=False),
        _release("25.3", "v1.17.5-ubuntu20.04", "v0.17.1", newer=False),
        _release("25.10", "v1.18.0", "v0.18.0", newer=True),
        _release("26.3", "v1.19.0", "v0.19.0", newer=True, nri=True),
        _release("26.7", "v1.20.0", "v0.20.0", newer=True, nri=True),
    )
}
NEWEST = "26.7"
_RELEASE_IN_TEXT = re.compile(r"(?:gpu-operator[:-])v?(\d+)\.(\d+)(?:\.\d+)?")


def release_named(text: str) -> Optional[str]:
    """The release a version, an image tag or a chart label names (`v24.9.2`, `gpu-operator:v25.3.0`,
    `gpu-operator-v26.7.0`), as a key of RELEASES; None where it names none of them."""
    found = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.\d+)?", text.strip()) or _RELEASE_IN_TEXT.search(text)
    if found is None:
        return None
    version = f"{int(found[1])}.{int(found[2])}"
    return version if version in RELEASES else None


def release_of(stream: Any, policy: dict[str, Any]) -> tuple[str, str]:
    """(release, how it was found): the operator's image in the same stream, the ClusterPolicy's chart labels,
    else the newest."""
    for document in stream if isinstance(stream, list) else []:
        if _mapping(document).get("kind") != "Deployment":
            continue
        pod = _mapping(_mapping(_mapping(document.get("spec")).get("template")).get("spec"))
        containers = pod.get("containers")
        for container in containers if isinstance(containers, list) else []:
            image = _mapping(container).get("image")
            if isinstance(image, str) and "gpu-operator:" in image and release_named(image) is not None:
                return str(release_named(image)), f"the operator's image {image}"
    labels = _mapping(_mapping(policy.get("metadata")).get("labels"))
    for key in ("helm.sh/chart", "app.kubernetes.io/version"):
        text = labels.get(key)
        if isinstance(text, str) and release_named(text) is not None:
            return str(release_named(text)), f"its label {key}: {text}"
    return NEWEST, "the newest: the input names no release"


def release_for(stream: Any, policy: dict[str, Any], given: Optional[str]) -> tuple[str, str]:
    """(release, how it was chosen): the one --gpu-operator-version gives, else release_of's."""
    return (given, "as --gpu-operator-version names") if given is not None else release_of(stream, policy)


@dataclass
class _Env:
    """A container's env as the operator edits it: setContainerEnv replaces a name's value where it is and
    appends a new name; each entry remembers the ClusterPolicy field it came from."""

    entries: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    origins: list[str] = dataclasses.field(default_factory=list)
    positions: dict[str, int] = dataclasses.field(default_factory=dict)

    def set(self, name: str, value: Any, origin: str) -> None:
        index = self.positions.setdefault(name, len(self.entries))
        if index == len(self.entries):
            self.entries.append({})
            self.origins.append("")
        self.entries[index] = {"name": name, "value": value}
        self.origins[index] = origin

    def get(self, name: str) -> str:
        index = self.positions.get(name)
        value = None if index is None else self.entries[index]["value"]
        return value if isinstance(value, str) else ""

    def origin(self, name: str) -> Optional[str]:
        index = self.positions.get(name)
        return None if index is None else self.origins[index]


def _env_in_release_order(
    base: tuple[tuple[str, str], ...],
    component: str,
    section: dict[str, Any],
    release: Release,
    operator_env: Callable[[_Env], None],
) -> _Env:
    """The assets' env, then the operator's own settings and the user's `env`, in the order the release applies
    them: from 25.10 the user's last, so that they win."""
    env = _Env()
    for name, value in base:
        env.set(name, value, component)
    if release.user_env_wins:
        operator_env(env)
    for name, value, origin in _user_env(section, component):
        env.set(name, value, origin)
    if not release.user_env_wins:
        operator_env(env)
    return env


@dataclass(frozen=True)
class Operand:
    name: str  # the DaemonSet's
    runtime: str  # the engine it was rendered for; "" where it does not depend on one
    value: dict[str, Any]
    # Pointer below the operand -> pointer in the stream, where each part came from.
    origins: dict[str, str]


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _enabled(section: dict[str, Any], default: bool) -> bool:
    value = section.get("enabled")
    return value if isinstance(value, bool) else default


def _user_env(section: dict[str, Any], pointer: str) -> Iterator[tuple[str, Any, str]]:
    env = section.get("env")
    for index, entry in enumerate(env if isinstance(env, list) else []):
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            yield entry["name"], entry.get("value", ""), f"{pointer}/env/{index}"


class _Fields:
    """Pointers to the ClusterPolicy's fields: the deepest one the user wrote of those asked for."""

    def __init__(self, policy: dict[str, Any], pointer: str) -> None:
        self.spec = _mapping(policy.get("spec"))
        self.root = f"{pointer}/spec" if isinstance(policy.get("spec"), dict) else pointer

    def at(self, *keys: str) -> str:
        node: Any = self.spec
        found = self.root
        for key in keys:
            if not isinstance(node, dict) or key not in node:
                break
            node = node[key]
            found = f"{found}/{key}"
        return found

    def section(self, key: str) -> dict[str, Any]:
        return _mapping(self.spec.get(key))


def _image(section: dict[str, Any], repository: str, image: str, version: str) -> str:
    """gpuv1.ImagePath: repository/image:version, an image with a registry in its name as it is."""
    parts = [section.get(key) if isinstance(section.get(key), str) else default for key, default in
             (("repository", repository), ("image", image), ("version", version))]  # fmt: skip
    repository, image, version = (str(part) for part in parts)
    if "/" in image or not repository:
        return image if ":" in image or "@" in image else f"{image}:{version}"
    return f"{repository}/{image}:{version}"


def _daemonset(
    name: str, selector: str, container: dict[str, Any], volumes: list[tuple[str, str]], namespace: str
) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "nodeSelector": {f"nvidia.com/gpu.deploy.{selector}": "true"},
                    "containers": [container],
                    "volumes": [{"name": volume, "hostPath": {"path": path}} for volume, path in volumes],
                },
            },
        },
    }


_CONTAINER = "/spec/template/spec/containers/0"


def _origins(env: _Env, component: str, image_origin: str) -> dict[str, str]:
    found = {"": component, _CONTAINER: component, f"{_CONTAINER}/image": image_origin}
    for index, origin in enumerate(env.origins):
        found[f"{_CONTAINER}/env/{index}"] = origin
        # A user's own entry is reported at its value; one the operator set, at the field that made it set it.
        found[f"{_CONTAINER}/env/{index}/value"] = f"{origin}/value" if "/env/" in origin else origin
    return found


def cdi_setting(pointer: str, policy: dict[str, Any], release: Release) -> tuple[bool, str]:
    """(whether CDI is on, the pointer of the field that says so) for the ClusterPolicy at pointer."""
    fields = _Fields(policy, pointer)
    return _enabled(fields.section("cdi"), release.cdi_by_default), fields.at("cdi", "enabled")


def _toolkit(fields: _Fields, release: Release, runtime: str, namespace: str) -> Optional[Operand]:
    section = fields.section("toolkit")
    if not _enabled(section, True):
        return None
    component = fields.at("toolkit")
    cdi = fields.section("cdi")
    cdi_on = _enabled(cdi, release.cdi_by_default)
    nri = release.nri_plugin and cdi_on and cdi.get("nriPluginEnabled") is True
    cdi_origin = fields.at("cdi", "enabled")

    def cdi_env(env: _Env) -> None:
        if not cdi_on:
            if runtime == "crio" and release.user_env_wins:
                env.set("CRIO_CONFIG_MODE", "hook", cdi_origin)
            return
        env.set("CDI_ENABLED", "true", cdi_origin)
        env.set("CRIO_CONFIG_MODE", "config", cdi_origin)
        if release.user_env_wins:
            env.set("NVIDIA_RUNTIME_SET_AS_DEFAULT", "false", cdi_origin)
            env.set("NVIDIA_CONTAINER_RUNTIME_MODE", "cdi", cdi_origin)
        if nri:
            env.set("ENABLE_NRI_PLUGIN", "true", fields.at("cdi", "nriPluginEnabled"))

    base = (
        ("ROOT", "/usr/local/nvidia"),
        ("NVIDIA_CONTAINER_RUNTIME_MODES_CDI_DEFAULT_KIND", "management.nvidia.com/gpu"),
        ("NVIDIA_VISIBLE_DEVICES", "void"),
    )
    env = _env_in_release_order(base, component, section, release, cdi_env)
    install_dir = section.get("installDir")
    if isinstance(install_dir, str) and install_dir not in ("", "/usr/local/nvidia"):
        env.set("ROOT", install_dir, fields.at("toolkit", "installDir"))
    # transformForRuntime: the runtime, then (unless the NRI plugin leaves the configuration alone) the config
    # the toolkit edits, as the operator mounts it at /runtime/config-dir/, and its socket.
    env.set("RUNTIME", runtime, component)
    volumes = [("toolkit-install-dir", "/usr/local/nvidia"), ("host-root", "/"), ("cdi-root", "/var/run/cdi")]
    mounts = [("toolkit-install-dir", "/usr/local/nvidia"), ("host-root", "/host"), ("cdi-root", "/var/run/cdi")]
    if not nri:
        variable = "CONTAINERD_CONFIG" if runtime == "containerd" else "CRIO_CONFIG"
        default = "/etc/containerd/config.toml" if runtime == "containerd" else "/etc/crio/crio.conf"
        named = variable if env.get(variable) else "RUNTIME_CONFIG"
        host_config = env.get(named) or default
        origin = (env.origin(named) if env.get(named) else None) or component
        if runtime == "containerd":
            runtime_class = _mapping(fields.spec.get("operator")).get("runtimeClass")
            handler = runtime_class if isinstance(runtime_class, str) and runtime_class else "nvidia"
            env.set("CONTAINERD_RUNTIME_CLASS", handler, component)
        inside = "/runtime/config-dir/" + posixpath.basename(host_config)
        env.set("RUNTIME_CONFIG", inside, origin)
        env.set(variable, inside, origin)
        volumes.append((f"{runtime}-config", posixpath.dirname(host_config)))
        mounts.append((f"{runtime}-config", "/runtime/config-dir/"))
        sources = env.get("RUNTIME_CONFIG_SOURCE")
        if sources and release.rewrites_config_sources:
            rewritten = ",".join(
                f"file={posixpath.join('/host', part.split('=', 1)[1].lstrip('/'))}"
                if part.split("=", 1)[0] == "file" and "=" in part
                else part
                for part in sources.split(",")
            )
            env.set("RUNTIME_CONFIG_SOURCE", rewritten, env.origin("RUNTIME_CONFIG_SOURCE") or component)
    image = _image(section, "nvcr.io/nvidia/k8s", "container-toolkit", release.toolkit_version)
    container = {
        "name": "nvidia-container-toolkit-ctr",
        "image": image,
        "command": ["/bin/bash", "-c"],
        "args": ["/bin/entrypoint.sh"],
        "securityContext": {"privileged": True},
        "env": env.entries,
        "volumeMounts": [{"name": name, "mountPath": path} for name, path in mounts],
    }
    daemonset = _daemonset("nvidia-container-toolkit-daemonset", "container-toolkit", container, volumes, namespace)
    image_origin = fields.at("toolkit", "version") if "version" in section else component
    return Operand("nvidia-container-toolkit-daemonset", runtime, daemonset, _origins(env, component, image_origin))


def _device_plugin(fields: _Fields, release: Release, namespace: str) -> Optional[Operand]:
    section = fields.section("devicePlugin")
    if not _enabled(section, True):
        return None
    component = fields.at("devicePlugin")
    cdi_on = _enabled(fields.section("cdi"), release.cdi_by_default)
    cdi_origin = fields.at("cdi", "enabled")

    def cdi_env(env: _Env) -> None:
        if cdi_on:
            env.set("CDI_ENABLED", "true", cdi_origin)
            env.set("DEVICE_LIST_STRATEGY", release.cdi_strategy, cdi_origin)

    base = (
        ("PASS_DEVICE_SPECS", "true"),
        ("FAIL_ON_INIT_ERROR", "true"),
        ("DEVICE_LIST_STRATEGY", "envvar"),
        ("DEVICE_ID_STRATEGY", "uuid"),
        ("NVIDIA_VISIBLE_DEVICES", "all"),
        ("NVIDIA_DRIVER_CAPABILITIES", "all"),
    )
    env = _env_in_release_order(base, component, section, release, cdi_env)
    container: dict[str, Any] = {
        "name": "nvidia-device-plugin",
        "image": _image(section, "nvcr.io/nvidia", "k8s-device-plugin", release.device_plugin_version),
        "command": ["/bin/bash", "-c"],
        "args": ["/bin/entrypoint.sh"],
        "securityContext": {"privileged": True},
        "env": env.entries,
        "volumeMounts": [
            {"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"},
            {"name": "host-root", "mountPath": "/host"},
            {"name": "cdi-root", "mountPath": "/var/run/cdi"},
        ],
    }
    args = section.get("args")
    if isinstance(args, list) and args:
        container["args"] = args
    volumes = [("device-plugin", "/var/lib/kubelet/device-plugins"), ("host-root", "/"), ("cdi-root", "/var/run/cdi")]
    daemonset = _daemonset("nvidia-device-plugin-daemonset", "device-plugin", container, volumes, namespace)
    origins = _origins(env, component, fields.at("devicePlugin", "version") if "version" in section else component)
    if isinstance(args, list) and args:
        origins.update({f"{_CONTAINER}/args": fields.at("devicePlugin", "args")})
        origins.update({f"{_CONTAINER}/args/{i}": f"{fields.at('devicePlugin', 'args')}/{i}" for i in range(len(args))})
    return Operand("nvidia-device-plugin-daemonset", "", daemonset, origins)


def operands(
    stream: Any, pointer: str, policy: dict[str, Any], release_given: Optional[str] = None, engine: Optional[str] = None
) -> Iterator[tuple[str, Operand]]:
    """(pointer, operand) of each DaemonSet the release renders from the ClusterPolicy at pointer: the given
    release, else the one the stream names; the toolkit for the given engine's nodes, else for each engine's."""
    version = release_for(stream, policy, release_given)[0]
    release = RELEASES[version]
    fields = _Fields(policy, pointer)
    namespace = _operator_namespace(stream)
    for runtime in (engine,) if engine in RUNTIMES else RUNTIMES:
        toolkit = _toolkit(fields, release, runtime, namespace)
        if toolkit is not None:
            yield f"{pointer}{DERIVED}{version}/{runtime}/{toolkit.name}", toolkit
    plugin = _device_plugin(fields, release, namespace)
    if plugin is not None:
        yield f"{pointer}{DERIVED}{version}/{ANY_ENGINE}/{plugin.name}", plugin


def _operator_namespace(stream: Any) -> str:
    for document in stream if isinstance(stream, list) else []:
        metadata = _mapping(_mapping(document).get("metadata"))
        if _mapping(document).get("kind") == "Deployment" and "gpu-operator" in str(metadata.get("name", "")):
            namespace = metadata.get("namespace")
            if isinstance(namespace, str) and namespace:
                return namespace
    return _NAMESPACE


def relocated(stream: Any, policy_pointer: str, policy: dict[str, Any], problem: Problem) -> Problem:
    """The problem a rule found in a derived operand, at the ClusterPolicy field its part came from, and saying
    which release rendered what."""
    version, runtime = problem.pointer[len(policy_pointer) + len(DERIVED) :].split("/")[:2]
    named, how = release_of(stream, policy)
    if named != version:  # only --gpu-operator-version renders a release the input does not name
        version, how = release_for(stream, policy, version)
    engine = None if runtime == ANY_ENGINE else runtime
    for pointer, operand in operands(stream, policy_pointer, policy, version, engine):
        if problem.pointer != pointer and not problem.pointer.startswith(pointer + "/"):
            continue
        below = problem.pointer[len(pointer) :]
        while below not in operand.origins:
            below = below.rsplit("/", 1)[0] if "/" in below else ""
        engine = f" for {operand.runtime} nodes" if operand.runtime else ""
        container = operand.value["spec"]["template"]["spec"]["containers"][0]["name"]
        subject = (
            f"as GPU Operator {version} renders it ({how}), DaemonSet {operand.value['metadata']['namespace']}/"
            f"{operand.name}{engine}, container {container}: "
        )
        return dataclasses.replace(problem, pointer=operand.origins[below], message=subject + problem.message)
    return problem
