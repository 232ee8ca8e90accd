"""The tool's own configuration file (/etc/nvidia-oci-hook/config.yaml): read, checked, never guessed.

Every key is declared once in SETTINGS, with its type, default and allowed values; the file, then the
environment (NVIDIA_OCI_HOOK_<SECTION>_<KEY>, lists comma-separated) set it. A wrong key or value is an error
that names it. The runtime-facing modes read this on every container start, so it imports nothing costly: YAML
goes through the lean reader, and PyYAML is loaded only for a file outside the subset that reader knows.
"""

from __future__ import annotations

from nvidia_oci_hook import io, leanos
from nvidia_oci_hook.host import DEFAULT_DRIVER_ROOTS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, Optional

DEFAULT_CONFIG_PATH = "/etc/nvidia-oci-hook/config.yaml"
CONFIG_ENV = "NVIDIA_OCI_HOOK_CONFIG"
ENV_PREFIX = "NVIDIA_OCI_HOOK_"

# What makes the runtime-facing modes refuse a container: findings that leave the GPU unusable, any error, or
# nothing at all.
FAIL_ON_CHOICES = ("gpu-unusable", "error", "never")
# Two different device nodes for one path: the one a CDI request defines wins (as the CDI library decides), the
# first entry wins (what runc and crun do anyway), or the container is refused.
DEVICE_CONFLICT_CHOICES = ("cdi", "first", "refuse")


class ConfigError(Exception):
    pass


class _Key:
    __slots__ = ("choices", "default", "doc", "kind", "name")

    def __init__(self, name: str, kind: str, default: Any, doc: str, choices: tuple[str, ...] = ()) -> None:
        self.name = name  # "section.key", or "key" at the top level
        self.kind = kind  # "paths" (absolute), "strings", "choice", "bool", "path" (absolute or empty)
        self.default = default
        self.doc = doc
        self.choices = choices

    @property
    def attribute(self) -> str:
        return self.name.replace(".", "_")

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.attribute.upper()


SETTINGS = (
    _Key("driver_roots", "paths", DEFAULT_DRIVER_ROOTS, "candidate driver roots, in order of preference"),
    _Key("lint.select", "strings", (), "rule codes or prefixes `lint` reports (empty: all)"),
    _Key("lint.ignore", "strings", (), "rule codes or prefixes `lint` leaves out"),
    _Key("lint.fail_on", "choice", "error", "lowest severity that makes `lint` exit 1", ("error", "warning")),
    _Key("runtime.low_level", "strings", ("runc", "crun"), "runtimes the wrapper runs: the first found wins"),
    _Key("policy.fail_on", "choice", "gpu-unusable", "findings that refuse a container", FAIL_ON_CHOICES),
    _Key("policy.fail_closed", "bool", False, "refuse containers when this tool itself fails"),
    _Key("policy.device_conflict", "choice", "cdi", "who wins two devices for one path", DEVICE_CONFLICT_CHOICES),
    _Key("cdi.spec_dirs", "paths", ("/etc/cdi", "/var/run/cdi"), "CDI spec directories, lowest priority first"),
    _Key("cdi.annotation_prefixes", "strings", ("cdi.k8s.io/",), "annotation keys that request CDI devices"),
    _Key("cdi.visible_devices_env", "bool", True, "resolve CDI names in NVIDIA_VISIBLE_DEVICES"),
    _Key("log.file", "path", "/var/log/nvidia-oci-hook.log", "JSON-lines log of edits and findings (empty: none)"),
    _Key("log.syslog", "bool", True, "also log to syslog (journald), where /dev/log exists"),
)
_BY_NAME = {key.name: key for key in SETTINGS}
_SECTIONS = {key.name.split(".")[0] for key in SETTINGS if "." in key.name}


class Settings:
    """The configuration in force: one attribute per key in SETTINGS, dots replaced by underscores."""

    driver_roots: tuple[str, ...]
    lint_select: tuple[str, ...]
    lint_ignore: tuple[str, ...]
    lint_fail_on: str
    runtime_low_level: tuple[str, ...]
    policy_fail_on: str
    policy_fail_closed: bool
    policy_device_conflict: str
    cdi_spec_dirs: tuple[str, ...]
    cdi_annotation_prefixes: tuple[str, ...]
    cdi_visible_devices_env: bool
    log_file: str
    log_syslog: bool

    def __init__(self, **values: Any) -> None:
        for key in SETTINGS:
            setattr(self, key.attribute, values.pop(key.attribute, key.default))
        if values:
            raise TypeError(f"unknown settings: {', '.join(sorted(values))}")

    def replace(self, **changes: Any) -> Settings:
        """A copy with some values changed (command-line options over the file)."""
        return Settings(**{**{key.attribute: getattr(self, key.attribute) for key in SETTINGS}, **changes})

    # The names `lint` used before the other sections existed.
    @property
    def select(self) -> tuple[str, ...]:
        return self.lint_select

    @property
    def ignore(self) -> tuple[str, ...]:
        return self.lint_ignore

    @property
    def fail_on(self) -> str:
        return self.lint_fail_on


def _check(where: str, key: _Key, value: Any) -> Any:
    """value converted to the key's type; raises ConfigError naming where it came from."""
    if key.kind == "bool":
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: {key.name} must be true or false")
        return value
    if key.kind == "choice":
        if value not in key.choices:
            raise ConfigError(f"{where}: {key.name} must be one of {', '.join(key.choices)} (got {value!r})")
        return value
    if key.kind == "path":
        if not isinstance(value, str) or (value and not value.startswith("/")):
            raise ConfigError(f"{where}: {key.name} must be an absolute path, or empty for none")
        return value
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise ConfigError(f"{where}: {key.name} must be a list of non-empty strings")
    if key.kind == "paths":
        for item in value:
            if not item.startswith("/"):
                raise ConfigError(f"{where}: {key.name} entry {item!r} is not an absolute path")
    return tuple(value)


def _from_env(key: _Key, text: str) -> Any:
    if key.kind == "bool":
        lowered = text.strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        return text
    if key.kind in ("strings", "paths"):
        return [item.strip() for item in text.split(",") if item.strip()]
    return text.strip()


def _parse_yaml(path: str, raw: bytes) -> Any:
    from nvidia_oci_hook.formats import leanyaml

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid YAML: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        return leanyaml.loads(text)
    except leanyaml.YAMLSubsetError as exc:
        if not exc.unsupported:
            raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        reason = str(exc).replace("\n", " ")
        raise ConfigError(f"{path}: not valid YAML: {reason}") from None


def _file_values(path: str, explicit: bool) -> dict[str, Any]:
    if not explicit and not leanos.exists(path):
        return {}
    try:
        raw = io.read_bounded(path, 1024 * 1024)
    except io.ReadError as exc:
        raise ConfigError(str(exc)) from None
    except io.TooLarge as exc:
        raise ConfigError(f"{path}: {exc}") from None
    data = _parse_yaml(path, raw) if raw.strip() else None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    values: dict[str, Any] = {}
    known_top = sorted({key.name.split(".")[0] for key in SETTINGS})
    for name, value in data.items():
        name = str(name)
        if name in _SECTIONS:
            if value is None:
                continue
            if not isinstance(value, dict):
                raise ConfigError(f"{path}: {name} must be a mapping")
            for sub, sub_value in value.items():
                key = _BY_NAME.get(f"{name}.{sub}")
                if key is None:
                    known = ", ".join(sorted(k.name.split(".")[1] for k in SETTINGS if k.name.startswith(name + ".")))
                    raise ConfigError(f"{path}: unknown key '{name}.{sub}' (known: {known})")
                values[key.attribute] = _check(path, key, sub_value)
        elif name in _BY_NAME:
            key = _BY_NAME[name]
            values[key.attribute] = _check(path, key, value)
        else:
            raise ConfigError(f"{path}: unknown key {name!r} (known: {', '.join(known_top)})")
    return values


def config_file(path: Optional[str], environ: Mapping[str, str]) -> str:
    """The configuration file the settings are read from: the one named, else NVIDIA_OCI_HOOK_CONFIG's, else the
    default."""
    return path or environ.get(CONFIG_ENV) or DEFAULT_CONFIG_PATH


def config_file_named(path: Optional[str], environ: Mapping[str, str]) -> bool:
    """Whether the file was named (then it must exist), rather than the default (which may be absent)."""
    return path is not None or bool(environ.get(CONFIG_ENV))


def _values(path: Optional[str], environ: Optional[Mapping[str, str]], problems: Optional[list[str]]) -> dict[str, Any]:
    """The file's values, then the environment's; with problems given, a bad file or variable is noted there and
    left out instead of raising."""
    if environ is None:
        environ = leanos.environ()
    explicit = config_file_named(path, environ)
    file_path = config_file(path, environ)
    try:
        values = _file_values(file_path, explicit)
    except ConfigError as exc:
        if problems is None:
            raise
        problems.append(str(exc))
        values = {}
    for key in SETTINGS:
        text = environ.get(key.env)
        if text is None:
            continue
        try:
            values[key.attribute] = _check(key.env, key, _from_env(key, text))
        except ConfigError as exc:
            if problems is None:
                raise
            problems.append(str(exc))
    return values


def load_settings(path: Optional[str] = None, environ: Optional[Mapping[str, str]] = None) -> Settings:
    """Settings from the file (the default path may be absent, an explicit one may not), then the environment."""
    return Settings(**_values(path, environ, None))


def load_settings_leniently(
    path: Optional[str] = None, environ: Optional[Mapping[str, str]] = None
) -> tuple[Settings, list[str]]:
    """For the runtime-facing modes, which must not stop a container over a typo: what can be read, and why the
    rest was left at its default."""
    problems: list[str] = []
    return Settings(**_values(path, environ, problems)), problems
