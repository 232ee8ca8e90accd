"""NVIDIA Container Toolkit releases 1.14.0 to 1.20.0, as each reads `config.toml`.

For every release: the keys of its `Config` struct with their Go types, the value each key takes when the file
does not set it, the modes the runtime accepts and what `auto` resolves to, what refuses the file at load time and
in which words, how the legacy hook reads the file, and how the runtime finds the binaries the file names.
Releases that read the file alike share one object, so `release_for("1.17.5").keys is release_for("1.17.6").keys`.

Every fact names the file and tag it stands on; texts marked "measured" are what the 1.20.0 binaries print
(the tests compare them against the binaries where those are present).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Optional, TypeVar, Union

Value = Union[bool, str, tuple[str, ...], None]
"""A setting as Go holds it: bool, string, a string list (nil and empty alike: ()), or None for an unset pointer."""

# ---------------------------------------------------------------------------------------------------------------
# Releases

RELEASES: tuple[str, ...] = (
    "1.14.0",
    "1.14.1",
    "1.14.2",
    "1.14.3",
    "1.14.4",
    "1.14.5",
    "1.14.6",
    "1.15.0",
    "1.16.0",
    "1.16.1",
    "1.16.2",
    "1.17.0",
    "1.17.1",
    "1.17.2",
    "1.17.3",
    "1.17.4",
    "1.17.5",
    "1.17.6",
    "1.17.7",
    "1.17.8",
    "1.17.9",
    "1.18.0",
    "1.18.1",
    "1.18.2",
    "1.19.0",
    "1.19.1",
    "1.20.0",
)
"""Every release modelled, oldest first (release candidates are not)."""


class UnknownToolkitRelease(ValueError):
    """A release this module has no model of."""


def _numbers(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def at_least(version: str, first: str) -> bool:
    """Whether release `version` is `first` or newer (both "X.Y.Z")."""
    return _numbers(version) >= _numbers(first)


# ---------------------------------------------------------------------------------------------------------------
# Keys and their Go types

BOOL = "bool"
STRING = "string"
STRINGS = "[]string"
TABLE = "table"


@dataclass(frozen=True)
class KeyType:
    """A field's type: its shape as TOML must give it, the Go type the struct declares, and the name the decoder
    prints when it refuses a value (go-toml v1 names the pointed-to type of a pointer, and a type alias by the type
    it stands for)."""

    shape: str  # BOOL, STRING, STRINGS or TABLE: what the underlying Go type accepts
    declared: str  # as written in the struct: "ldconfigPath", "*feature", "[]nvcdi.HookName"
    decoder_name: str  # as "Can't convert V(T) to NAME" names it: "config.ldconfigPath", "config.feature"
    element: Optional[str] = None  # for a list: its element as the decoder names it
    pointer: bool = False  # a *feature: unset (nil) differs from false

    @property
    def underlying(self) -> str:
        """The Go type the value is converted to: "bool", "string", "[]string", or "struct" for a table."""
        if self.shape == TABLE:
            return "struct"
        return ("*" if self.pointer else "") + self.shape


def _plain(shape: str) -> KeyType:
    return KeyType(shape, shape, shape, "string" if shape == STRINGS else None)


_BOOL = _plain(BOOL)
_STRING = _plain(STRING)
_STRINGS = _plain(STRINGS)
# internal/config/cli.go at v1.17.3: `Ldconfig ldconfigPath`, a string type of its own, so that it can be validated.
_LDCONFIG_PATH = KeyType(STRING, "ldconfigPath", "config.ldconfigPath")
# internal/config/features.go at v1.15.0: `*feature`, `type feature bool`; nil means "not set in the file".
_FEATURE = KeyType(BOOL, "*feature", "config.feature", pointer=True)
# internal/config/runtime.go at v1.17.7: `type cudaCompatMode string`.
_CUDA_COMPAT_MODE = KeyType(STRING, "cudaCompatMode", "config.cudaCompatMode")
# internal/config/runtime.go at v1.18.1, pkg/nvcdi/api.go at v1.18.1: `type FeatureFlag string`.
_FEATURE_FLAGS = KeyType(STRINGS, "[]nvcdi.FeatureFlag", "[]nvcdi.FeatureFlag", "nvcdi.FeatureFlag")
# api/config/v1/runtime.go at v1.20.0; pkg/nvcdi/api.go at v1.20.0: `type HookName = discover.HookName`, an alias,
# so the decoder names internal/discover's type (measured: "to []discover.HookName(slice)").
_HOOK_NAMES = KeyType(STRINGS, "[]nvcdi.HookName", "[]discover.HookName", "discover.HookName")


def _table(go_type: str) -> KeyType:
    # Every struct lives in package `config` (internal/config up to 1.18.2, api/config/v1 from 1.19.0).
    return KeyType(TABLE, go_type, "config." + go_type)


@dataclass(frozen=True)
class KeySet:
    """A release's keys: dotted TOML keys in the struct's declaration order (a table before its keys)."""

    entries: tuple[tuple[str, KeyType], ...]

    def __contains__(self, key: object) -> bool:
        return any(name == key for name, _ in self.entries)

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, key: str) -> Optional[KeyType]:
        for name, key_type in self.entries:
            if name == key:
                return key_type
        return None

    def type_of(self, key: str) -> KeyType:
        found = self.get(key)
        if found is None:
            raise KeyError(key)
        return found

    def tables(self) -> tuple[str, ...]:
        return tuple(name for name, key_type in self.entries if key_type.shape == TABLE)

    def settings(self) -> tuple[str, ...]:
        """The keys that hold a value (not tables)."""
        return tuple(name for name, key_type in self.entries if key_type.shape != TABLE)

    def children(self, table: str) -> tuple[str, ...]:
        """The keys directly under table ("" for the top level), by their last name."""
        prefix = f"{table}." if table else ""
        return tuple(
            name[len(prefix) :]
            for name, _ in self.entries
            if name.startswith(prefix) and "." not in name[len(prefix) :]
        )


def _keys(
    *,
    ldconfig: KeyType,
    features: Optional[tuple[str, ...]],
    compat_container_root: bool,
    jit_cdi: tuple[tuple[str, KeyType], ...],
    legacy: bool,
) -> KeySet:
    entries: list[tuple[str, KeyType]] = [
        # internal/config/config.go at v1.14.0 (api/config/v1/config.go at v1.20.0): the top-level fields.
        ("disable-require", _BOOL),
        ("swarm-resource", _STRING),
        ("accept-nvidia-visible-devices-envvar-when-unprivileged", _BOOL),
        ("accept-nvidia-visible-devices-as-volume-mounts", _BOOL),
        ("supported-driver-capabilities", _STRING),
        # internal/config/cli.go at v1.14.0: no-pivot's `omitempty` only keeps it out of generated files.
        ("nvidia-container-cli", _table("ContainerCLIConfig")),
        ("nvidia-container-cli.root", _STRING),
        ("nvidia-container-cli.path", _STRING),
        ("nvidia-container-cli.environment", _STRINGS),
        ("nvidia-container-cli.debug", _STRING),
        ("nvidia-container-cli.ldcache", _STRING),
        ("nvidia-container-cli.load-kmods", _BOOL),
        ("nvidia-container-cli.no-pivot", _BOOL),
        ("nvidia-container-cli.no-cgroups", _BOOL),
        ("nvidia-container-cli.user", _STRING),
        ("nvidia-container-cli.ldconfig", ldconfig),
        # internal/config/toolkit-cli.go at v1.14.0.
        ("nvidia-ctk", _table("CTKConfig")),
        ("nvidia-ctk.path", _STRING),
        # internal/config/runtime.go at v1.14.0 (api/config/v1/runtime.go at v1.20.0).
        ("nvidia-container-runtime", _table("RuntimeConfig")),
        ("nvidia-container-runtime.debug", _STRING),
        ("nvidia-container-runtime.log-level", _STRING),
        ("nvidia-container-runtime.runtimes", _STRINGS),
        ("nvidia-container-runtime.mode", _STRING),
        ("nvidia-container-runtime.modes", _table("modesConfig")),
        ("nvidia-container-runtime.modes.csv", _table("csvModeConfig")),
        ("nvidia-container-runtime.modes.csv.mount-spec-path", _STRING),
    ]
    if compat_container_root:
        # api/config/v1/runtime.go at v1.19.0.
        entries.append(("nvidia-container-runtime.modes.csv.compat-container-root", _STRING))
    entries += [
        ("nvidia-container-runtime.modes.cdi", _table("cdiModeConfig")),
        ("nvidia-container-runtime.modes.cdi.spec-dirs", _STRINGS),
        ("nvidia-container-runtime.modes.cdi.default-kind", _STRING),
        ("nvidia-container-runtime.modes.cdi.annotation-prefixes", _STRINGS),
    ]
    if jit_cdi:
        # internal/config/runtime.go at v1.18.1: modesConfig gains JitCDI between CDI and Legacy.
        entries.append(("nvidia-container-runtime.modes.jit-cdi", _table("jitCDIModeConfig")))
        entries += [(f"nvidia-container-runtime.modes.jit-cdi.{name}", key_type) for name, key_type in jit_cdi]
    if legacy:
        # internal/config/runtime.go at v1.17.7.
        entries += [
            ("nvidia-container-runtime.modes.legacy", _table("legacyModeConfig")),
            ("nvidia-container-runtime.modes.legacy.cuda-compat-mode", _CUDA_COMPAT_MODE),
        ]
    entries += [
        # internal/config/hook.go at v1.14.0.
        ("nvidia-container-runtime-hook", _table("RuntimeHookConfig")),
        ("nvidia-container-runtime-hook.path", _STRING),
        ("nvidia-container-runtime-hook.skip-mode-detection", _BOOL),
    ]
    if features is not None:
        # internal/config/config.go at v1.15.0: `Features features`, declared last.
        entries.append(("features", _table("features")))
        entries += [(f"features.{name}", _FEATURE) for name in features]
    return KeySet(tuple(entries))


# The `features` table, field by field in declaration order.
# internal/config/features.go at v1.15.0: feature gates that override NVIDIA_GDS=enabled and the like in the image.
_FEATURES_1_15 = ("gds", "mofed", "nvswitch", "gdrcopy")
# internal/config/features.go at v1.17.0: those four are gone (the image's variables alone decide: gated.go).
_FEATURES_1_17_0 = ("disable-imex-channel-creation",)
# internal/config/features.go at v1.17.3.
_FEATURES_1_17_3 = ("disable-imex-channel-creation", "allow-ldconfig-from-container")
# internal/config/features.go at v1.17.4: the fields are reordered alphabetically.
_FEATURES_1_17_4 = (
    "allow-cuda-compat-libs-from-container",
    "allow-ldconfig-from-container",
    "disable-imex-channel-creation",
)
# internal/config/features.go at v1.17.5.
_FEATURES_1_17_5 = (
    "allow-cuda-compat-libs-from-container",
    "allow-ldconfig-from-container",
    "disable-cuda-compat-lib-hook",
    "disable-imex-channel-creation",
    "ignore-imex-channel-requests",
)
# api/config/v1/features.go at v1.19.0.
_FEATURES_1_19 = (
    "allow-cuda-compat-libs-from-container",
    "allow-ldconfig-from-container",
    "allow-unknown-oci-spec-fields",
    "disable-cuda-compat-lib-hook",
    "disable-imex-channel-creation",
    "ignore-imex-channel-requests",
    "no-additional-gids-for-device-nodes",
)
_JIT_1_18_1 = (("nvcdi-feature-flags", _FEATURE_FLAGS),)
_JIT_1_20 = (("nvcdi-feature-flags", _FEATURE_FLAGS), ("nvcdi-disable-hooks", _HOOK_NAMES))

_KEYS_1_14 = _keys(ldconfig=_STRING, features=None, compat_container_root=False, jit_cdi=(), legacy=False)
_KEYS_1_15 = _keys(ldconfig=_STRING, features=_FEATURES_1_15, compat_container_root=False, jit_cdi=(), legacy=False)
_KEYS_1_17_0 = _keys(ldconfig=_STRING, features=_FEATURES_1_17_0, compat_container_root=False, jit_cdi=(), legacy=False)
_KEYS_1_17_3 = _keys(
    ldconfig=_LDCONFIG_PATH, features=_FEATURES_1_17_3, compat_container_root=False, jit_cdi=(), legacy=False
)
_KEYS_1_17_4 = _keys(
    ldconfig=_LDCONFIG_PATH, features=_FEATURES_1_17_4, compat_container_root=False, jit_cdi=(), legacy=False
)
_KEYS_1_17_5 = _keys(
    ldconfig=_LDCONFIG_PATH, features=_FEATURES_1_17_5, compat_container_root=False, jit_cdi=(), legacy=False
)
_KEYS_1_17_7 = _keys(
    ldconfig=_LDCONFIG_PATH, features=_FEATURES_1_17_5, compat_container_root=False, jit_cdi=(), legacy=True
)
_KEYS_1_18_1 = _keys(
    ldconfig=_LDCONFIG_PATH, features=_FEATURES_1_17_5, compat_container_root=False, jit_cdi=_JIT_1_18_1, legacy=True
)
_KEYS_1_19 = _keys(
    ldconfig=_LDCONFIG_PATH, features=_FEATURES_1_19, compat_container_root=True, jit_cdi=_JIT_1_18_1, legacy=True
)
_KEYS_1_20 = _keys(
    ldconfig=_LDCONFIG_PATH, features=_FEATURES_1_19, compat_container_root=True, jit_cdi=_JIT_1_20, legacy=True
)

GONE_BEFORE_1_14 = ("nvidia-container-runtime.experimental", "nvidia-container-runtime.discover-mode")
"""Keys older files still carry that no modelled release reads (replaced by `mode` in 1.10.0-rc.2, commit
e591f3f2 "Replace experimental and discover-mode"): the decoder drops them without a word."""

# ---------------------------------------------------------------------------------------------------------------
# Defaults (GetDefault)

LDCONFIG_REAL = "/sbin/ldconfig.real exists"
"""Machine condition: GetDefault's ldconfig is `@/sbin/ldconfig.real` where os.Stat finds that path."""
SUSE = "ID_LIKE in /etc/os-release names suse or opensuse"
"""Machine condition: GetDefault's `nvidia-container-cli.user` is `root:video` there (from 1.14.4)."""


@dataclass(frozen=True)
class Default:
    """The value a key takes when the file does not set it; where the machine decides, `machine` gives the value
    on machines where a condition (LDCONFIG_REAL, SUSE) holds, and `value` the one elsewhere."""

    value: Value
    machine: tuple[tuple[str, Value], ...] = ()

    def on(self, conditions: Collection[str] = ()) -> Value:
        for condition, value in self.machine:
            if condition in conditions:
                return value
        return self.value


@dataclass(frozen=True)
class Defaults(Mapping[str, Value]):
    """Every setting's default, read as a mapping of dotted key to its value on a machine where no condition holds
    (the decoder starts from these); `entry` gives the machine-dependent ones in full."""

    entries: tuple[tuple[str, Default], ...]

    def __getitem__(self, key: str) -> Value:
        return self.entry(key).value

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def entry(self, key: str) -> Default:
        for name, default in self.entries:
            if name == key:
                return default
        raise KeyError(key)

    def value(self, key: str, conditions: Collection[str] = ()) -> Value:
        """key's default on a machine where conditions (LDCONFIG_REAL, SUSE) hold."""
        return self.entry(key).on(conditions)

    def resolved(self, conditions: Collection[str] = ()) -> dict[str, Value]:
        """Every key's default on a machine where conditions hold."""
        return {name: default.on(conditions) for name, default in self.entries}

    def machine_dependent(self) -> tuple[str, ...]:
        return tuple(name for name, default in self.entries if default.machine)


def _zero(key_type: KeyType) -> Value:
    if key_type.pointer:
        return None
    if key_type.shape == BOOL:
        return False
    if key_type.shape == STRINGS:
        return ()
    return ""


# internal/config/config.go at v1.14.0 (GetDefault): ldconfig from getLdConfigPath, which stats /sbin/ldconfig.real;
# api/config/v1/config.go at v1.20.0 reaches the same through ldconfigPath("@/sbin/ldconfig").normalize().
_LDCONFIG_DEFAULT = Default("@/sbin/ldconfig", ((LDCONFIG_REAL, "@/sbin/ldconfig.real"),))
# internal/config/config.go at v1.14.4 (getUserGroup). Before 1.14.4 SUSE only changed whether
# `nvidia-ctk config` wrote the line commented (toml.go shouldComment); the loaded default stayed "".
_USER_DEFAULT_1_14_4 = Default("", ((SUSE, "root:video"),))
# image.SupportedDriverCapabilities.String(): sorted (internal/config/image/capabilities.go at v1.14.0 to v1.20.0).
SUPPORTED_DRIVER_CAPABILITIES = ("compat32", "compute", "display", "graphics", "ngx", "utility", "video")
# vendored CDI pkg/cdi/spec-dirs.go and annotations.go, the same at every tag from v1.14.0 (library v0.6.0) to
# v1.20.0 (tags.cncf.io v1.1.0): DefaultSpecDirs and AnnotationPrefix.
CDI_DEFAULT_SPEC_DIRS = ("/etc/cdi", "/var/run/cdi")
CDI_ANNOTATION_PREFIX = "cdi.k8s.io/"
CDI_DEFAULT_KIND = "nvidia.com/gpu"  # internal/config/config.go at v1.14.0 (GetDefault)
# internal/modifier/cdi.go at v1.18.0: in jit-cdi mode an unqualified name gets this kind, not default-kind.
JIT_CDI_KIND = "runtime.nvidia.com/gpu"


def _defaults(keys: KeySet, *, user: Default, runtimes: tuple[str, ...], cuda_compat_mode: bool) -> Defaults:
    known: dict[str, Default] = {
        "accept-nvidia-visible-devices-envvar-when-unprivileged": Default(True),
        "supported-driver-capabilities": Default(",".join(SUPPORTED_DRIVER_CAPABILITIES)),
        "nvidia-container-cli.load-kmods": Default(True),
        "nvidia-container-cli.ldconfig": _LDCONFIG_DEFAULT,
        "nvidia-container-cli.user": user,
        "nvidia-ctk.path": Default("nvidia-ctk"),
        "nvidia-container-runtime.debug": Default("/dev/null"),
        "nvidia-container-runtime.log-level": Default("info"),
        "nvidia-container-runtime.runtimes": Default(runtimes),
        "nvidia-container-runtime.mode": Default("auto"),
        "nvidia-container-runtime.modes.csv.mount-spec-path": Default(
            "/etc/nvidia-container-runtime/host-files-for-container.d"
        ),
        "nvidia-container-runtime.modes.cdi.spec-dirs": Default(CDI_DEFAULT_SPEC_DIRS),
        "nvidia-container-runtime.modes.cdi.default-kind": Default(CDI_DEFAULT_KIND),
        "nvidia-container-runtime.modes.cdi.annotation-prefixes": Default((CDI_ANNOTATION_PREFIX,)),
        "nvidia-container-runtime-hook.path": Default("nvidia-container-runtime-hook"),
    }
    if cuda_compat_mode:
        # internal/config/runtime.go at v1.17.7: defaultCUDACompatMode = CUDACompatModeLdconfig.
        known["nvidia-container-runtime.modes.legacy.cuda-compat-mode"] = Default("ldconfig")
    return Defaults(tuple((name, known.get(name) or Default(_zero(keys.type_of(name)))) for name in keys.settings()))


# internal/config/config.go at v1.14.0 (GetDefault).
_RUNTIMES_1_14 = ("docker-runc", "runc")
# internal/config/config.go at v1.14.4.
_RUNTIMES_1_14_4 = ("docker-runc", "runc", "crun")
# internal/config/config.go at v1.18.0.
_RUNTIMES_1_18 = ("runc", "crun")
_NO_USER = Default("")

_DEFAULTS_1_14 = _defaults(_KEYS_1_14, user=_NO_USER, runtimes=_RUNTIMES_1_14, cuda_compat_mode=False)
_DEFAULTS_1_14_4 = _defaults(_KEYS_1_14, user=_USER_DEFAULT_1_14_4, runtimes=_RUNTIMES_1_14_4, cuda_compat_mode=False)


def _later_defaults(keys: KeySet, runtimes: tuple[str, ...], cuda_compat_mode: bool) -> Defaults:
    return _defaults(keys, user=_USER_DEFAULT_1_14_4, runtimes=runtimes, cuda_compat_mode=cuda_compat_mode)


_DEFAULTS_1_15 = _later_defaults(_KEYS_1_15, _RUNTIMES_1_14_4, False)
_DEFAULTS_1_17_0 = _later_defaults(_KEYS_1_17_0, _RUNTIMES_1_14_4, False)
_DEFAULTS_1_17_3 = _later_defaults(_KEYS_1_17_3, _RUNTIMES_1_14_4, False)
_DEFAULTS_1_17_4 = _later_defaults(_KEYS_1_17_4, _RUNTIMES_1_14_4, False)
_DEFAULTS_1_17_5 = _later_defaults(_KEYS_1_17_5, _RUNTIMES_1_14_4, False)
_DEFAULTS_1_17_7 = _later_defaults(_KEYS_1_17_7, _RUNTIMES_1_14_4, True)
_DEFAULTS_1_18_0 = _later_defaults(_KEYS_1_17_7, _RUNTIMES_1_18, True)
_DEFAULTS_1_18_1 = _later_defaults(_KEYS_1_18_1, _RUNTIMES_1_18, True)
_DEFAULTS_1_19 = _later_defaults(_KEYS_1_19, _RUNTIMES_1_18, True)
_DEFAULTS_1_20 = _later_defaults(_KEYS_1_20, _RUNTIMES_1_18, True)

# ---------------------------------------------------------------------------------------------------------------
# Texts the binaries print


def go_quote(text: str) -> str:
    """text as Go's %q (strconv.Quote) writes it."""
    escapes = {'"': '\\"', "\\": "\\\\", "\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r"}
    escapes.update({"\t": "\\t", "\v": "\\v"})
    out = []
    for char in text:
        if char in escapes:
            out.append(escapes[char])
        elif char.isprintable():
            out.append(char)
        elif ord(char) < 0x80:
            out.append(f"\\x{ord(char):02x}")
        elif ord(char) < 0x10000:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    return '"' + "".join(out) + '"'


def go_list(items: Sequence[str]) -> str:
    """A []string as Go's %v writes it: "[runc crun]"."""
    return "[" + " ".join(items) + "]"


# internal/runtime/runtime.go at v1.14.0 to v1.20.0: every failure of config.GetConfig(). Measured.
LOAD_ERROR_PREFIX = "error loading config: "
# api/config/v1/toml.go at v1.20.0: a file that opens but does not parse (before 1.20.0: open failures only).
# Measured: "error loading config: failed to load specified config file: (2, 1): expecting a value".
LOAD_FILE_ERROR_PREFIX = LOAD_ERROR_PREFIX + "failed to load specified config file: "
# internal/config/toml.go at v1.14.0 (Toml.Config): a value the decoder cannot convert. Measured.
UNMARSHAL_ERROR_PREFIX = LOAD_ERROR_PREFIX + "failed to unmarshal config: "
# internal/runtime/runtime.go at v1.14.0: whatever stops the runtime after the file loaded. Measured.
CREATE_ERROR_PREFIX = "failed to create NVIDIA Container Runtime: "
# internal/runtime/runtime_factory.go at v1.14.0: the spec modifier (and so the mode) of a `create`. Measured.
MODIFIER_ERROR_PREFIX = CREATE_ERROR_PREFIX + "failed to construct OCI spec modifier: "
# internal/runtime/runtime_factory.go and internal/oci/runtime_low_level.go at v1.14.0. Measured.
LOW_LEVEL_RUNTIME_ERROR_PREFIX = CREATE_ERROR_PREFIX + "error constructing low-level runtime: error locating runtime: "
# cmd/nvidia-container-runtime-hook/main.go and hook_config.go at v1.14.0: log.Panicln("error getting hook
# config:", err) around fmt.Errorf("failed to load config: %v"). Measured.
HOOK_LOAD_ERROR_PREFIX = "error getting hook config: failed to load config: "
# cmd/nvidia-container-runtime-hook/hook_config.go at v1.14.0: config.New failed (not a missing optional file).
HOOK_OPEN_ERROR = "couldn't open required configuration file: "
# hook_config.go at v1.14.1: a -config file (from 1.18.0 also $NVIDIA_CTK_CONFIG_FILE_PATH) that does not exist;
# os.ErrNotExist's text. Measured.
HOOK_MISSING_CONFIG_ERROR = HOOK_LOAD_ERROR_PREFIX + HOOK_OPEN_ERROR + "file does not exist"

# internal/config/cli.go at v1.17.3 (ldconfigPath.assertValid) joined by errors.Join with errInvalidConfig
# (config.go): two lines. Measured.
LDCONFIG_REFUSAL = (
    "nvidia-container-cli.ldconfig value {quoted} is not host-relative (does not start with a '@')\n"
    "invalid config value"
)

# cmd/nvidia-container-runtime-hook/main.go at v1.14.0 to v1.17.9: log.Panicln of this text, period included.
HOOK_DIRECT_INVOCATION_BEFORE_1_18 = (
    "invoking the NVIDIA Container Runtime Hook directly (e.g. specifying the docker --gpus flag) is not "
    "supported. Please use the NVIDIA Container Runtime (e.g. specify the --runtime=nvidia flag) instead."
)
# cmd/nvidia-container-runtime-hook/hook_config.go at v1.18.0 (assertModeIsLegacy): the period is gone. Measured.
HOOK_DIRECT_INVOCATION = HOOK_DIRECT_INVOCATION_BEFORE_1_18[:-1]
# internal/info/auto.go at v1.14.4 (before: no line for a requested mode): the hook prints these before refusing.
# Measured: "Using requested mode 'cdi'".
HOOK_REQUESTED_MODE_LOG = "Using requested mode '{mode}'"
HOOK_AUTO_MODE_LOG = "Auto-detected mode as '{mode}'"

# internal/oci/runtime_low_level.go at v1.14.0 to v1.20.0. Measured.
NO_RUNTIME_CANDIDATES = "at least one runtime candidate must be specified"
NO_RUNTIME_FOUND = "no runtime binary found from candidate list: {candidates}"

# vendor/github.com/pelletier/go-toml/marshal.go (v1.9.4 at v1.14.0, v1.9.5 at v1.20.0): valueFromToml's refusals,
# prefixed by formatError with the key's "(LINE, COL)". Measured at 1.20.0 for each template below:
# "(1, 1): Can't convert yes(string) to bool", "(1, 1): Can't convert 1(int64) to string",
# "(1, 1): Can't convert runc(string) to []string(slice)", "(1, 1): Can't convert yes(string) to config.feature".
CONVERT_ERROR = "({line}, {column}): Can't convert {value}({value_type}) to {target}"
# A scalar where a list is wanted: the target is "[]T(slice)" (mtype and its Kind).
CONVERT_TO_SLICE_ERROR = "({line}, {column}): Can't convert {value}({value_type}) to {target}(slice)"
# A table where a value is wanted: %v of a *toml.Tree is its TOML text. Measured for an inline table:
# "(0, 0): Can't convert a = 1\n(*toml.Tree) to a tree" (go-toml gives inline tables no position).
CONVERT_TABLE_ERROR = "({line}, {column}): Can't convert {value}(*toml.Tree) to a tree"
# A nested array where a list of strings is wanted. Measured: "(1, 1): Can't convert [a]([]interface {}) to a slice".
CONVERT_ARRAY_ERROR = "({line}, {column}): Can't convert {value}([]interface {{}}) to a slice"
# An array of tables where a table is wanted. Measured:
# "(1, 1): Can't convert [mode = \"x\"\n]([]*toml.Tree) to trees".
CONVERT_TABLES_ERROR = "({line}, {column}): Can't convert {value}([]*toml.Tree) to trees"


@dataclass(frozen=True)
class Measured:
    """A file's text and what the 1.20.0 runtime prints for it (logrus's msg, unquoted), with the subcommand."""

    config: str
    message: str
    create: bool = False  # run as `create --bundle` (the mode is only checked there), else as `state`


MEASURED: tuple[Measured, ...] = (
    Measured(
        'nvidia-container-cli.ldconfig = "/sbin/ldconfig"',
        LOAD_ERROR_PREFIX + LDCONFIG_REFUSAL.format(quoted='"/sbin/ldconfig"'),
    ),
    Measured(
        'nvidia-container-cli.ldconfig = ""',
        LOAD_ERROR_PREFIX + LDCONFIG_REFUSAL.format(quoted='""'),
    ),
    Measured('disable-require = "yes"', UNMARSHAL_ERROR_PREFIX + "(1, 1): Can't convert yes(string) to bool"),
    Measured("swarm-resource = 1", UNMARSHAL_ERROR_PREFIX + "(1, 1): Can't convert 1(int64) to string"),
    Measured(
        "nvidia-container-runtime.log-level = 1.5",
        UNMARSHAL_ERROR_PREFIX + "(1, 1): Can't convert 1.5(float64) to string",
    ),
    Measured(
        'nvidia-container-runtime.runtimes = "runc"',
        UNMARSHAL_ERROR_PREFIX + "(1, 1): Can't convert runc(string) to []string(slice)",
    ),
    Measured(
        'nvidia-container-runtime.runtimes = [1, "runc"]',
        UNMARSHAL_ERROR_PREFIX + "(1, 1): Can't convert 1(int64) to string",
    ),
    Measured(
        'nvidia-container-runtime.runtimes = [["a"]]',
        UNMARSHAL_ERROR_PREFIX + "(1, 1): Can't convert [a]([]interface {}) to a slice",
    ),
    Measured(
        'features.allow-ldconfig-from-container = "yes"',
        UNMARSHAL_ERROR_PREFIX + "(1, 1): Can't convert yes(string) to config.feature",
    ),
    Measured(
        "nvidia-container-cli.ldconfig = 5",
        UNMARSHAL_ERROR_PREFIX + "(1, 1): Can't convert 5(int64) to config.ldconfigPath",
    ),
    Measured(
        'nvidia-container-runtime = "x"',
        UNMARSHAL_ERROR_PREFIX + "(1, 1): Can't convert x(string) to config.RuntimeConfig",
    ),
    Measured(
        "nvidia-container-runtime.mode = { a = 1 }",
        UNMARSHAL_ERROR_PREFIX + "(0, 0): Can't convert a = 1\n(*toml.Tree) to a tree",
    ),
    Measured(
        '[[nvidia-container-runtime]]\nmode = "x"',
        UNMARSHAL_ERROR_PREFIX + '(1, 1): Can\'t convert [mode = "x"\n]([]*toml.Tree) to trees',
    ),
    Measured(
        "nvidia-container-runtime.modes.jit-cdi.nvcdi-feature-flags = [true]",
        UNMARSHAL_ERROR_PREFIX + "(1, 1): Can't convert true(bool) to nvcdi.FeatureFlag",
    ),
    Measured(
        'nvidia-container-runtime.modes.jit-cdi.nvcdi-disable-hooks = "x"',
        UNMARSHAL_ERROR_PREFIX + "(1, 1): Can't convert x(string) to []discover.HookName(slice)",
    ),
    Measured(
        "nvidia-container-runtime.modes.legacy.cuda-compat-mode = 1",
        UNMARSHAL_ERROR_PREFIX + "(1, 1): Can't convert 1(int64) to config.cudaCompatMode",
    ),
    # go-toml tries the tag, its lower case, its upper case, then a lowered first letter: "Disable-Require" is
    # never looked at, "DISABLE-REQUIRE" is.
    Measured(
        'Disable-Require = "x"\nDISABLE-REQUIRE = 1',
        UNMARSHAL_ERROR_PREFIX + "(2, 1): Can't convert 1(int64) to bool",
    ),
    Measured("x = ", LOAD_FILE_ERROR_PREFIX + "(2, 1): expecting a value"),
    Measured("a = 1\na = 2", LOAD_FILE_ERROR_PREFIX + "(2, 1): The following key was defined twice: a"),
    Measured("nvidia-container-runtime.runtimes = []", LOW_LEVEL_RUNTIME_ERROR_PREFIX + NO_RUNTIME_CANDIDATES),
    Measured(
        'nvidia-container-runtime.runtimes = ["no-such-runtime-x", "/bin/ls/"]',
        LOW_LEVEL_RUNTIME_ERROR_PREFIX + NO_RUNTIME_FOUND.format(candidates="[no-such-runtime-x /bin/ls/]"),
    ),
    Measured(
        'nvidia-container-runtime.mode = "bogus"\nnvidia-container-runtime.runtimes = ["/bin/true"]',
        MODIFIER_ERROR_PREFIX + 'invalid mode "bogus"',
        create=True,
    ),
    Measured(
        'nvidia-container-runtime.mode = "CDI"\nnvidia-container-runtime.runtimes = ["/bin/true"]',
        MODIFIER_ERROR_PREFIX + 'invalid mode "CDI"',
        create=True,
    ),
    Measured(
        'nvidia-container-runtime.mode = ""\nnvidia-container-runtime.runtimes = ["/bin/true"]',
        MODIFIER_ERROR_PREFIX + "a mode must be specified",
        create=True,
    ),
)
"""The 1.20.0 runtime's own words for files it refuses (NVIDIA_CTK_CONFIG_FILE_PATH pointing at the text)."""

# ---------------------------------------------------------------------------------------------------------------
# Modes

AUTO = "auto"
LEGACY = "legacy"
CSV = "csv"
CDI = "cdi"
JIT_CDI = "jit-cdi"


@dataclass(frozen=True)
class ModeRules:
    """The values of `nvidia-container-runtime.mode` the runtime acts on, and its refusal of any other.

    The mode is looked at only when the runtime handles `create` (internal/runtime/runtime_factory.go at v1.14.0:
    other subcommands go straight to the low-level runtime), so a bad mode loads fine and fails every container
    create. Values are compared exactly: "CDI" is refused."""

    accepted: tuple[str, ...]  # besides AUTO
    invalid: str  # template: {mode} as written, {quoted} as Go's %q
    empty: str  # the refusal of mode = ""

    def refusal(self, mode: str) -> Optional[str]:
        """What the runtime prints when a container is created under mode, or None when mode is accepted."""
        if mode == AUTO or mode in self.accepted:
            return None
        reason = self.empty if mode == "" else self.invalid.format(mode=mode, quoted=go_quote(mode))
        return MODIFIER_ERROR_PREFIX + reason


# internal/runtime/runtime_factory.go at v1.14.0 (newModeModifier): the configured value after %v.
_MODES_1_14 = ModeRules((LEGACY, CSV, CDI), "invalid runtime mode: {mode}", "invalid runtime mode: ")
# internal/runtime/runtime_factory.go at v1.18.0: jit-cdi joins.
_MODES_1_18 = ModeRules((LEGACY, CSV, CDI, JIT_CDI), "invalid runtime mode: {mode}", "invalid runtime mode: ")
# internal/modifier/factory.go at v1.19.0 (Factory.validate), before newModeModifier is reached. Measured.
_MODES_1_19 = ModeRules((LEGACY, CSV, CDI, JIT_CDI), "invalid mode {quoted}", "a mode must be specified")

# ---------------------------------------------------------------------------------------------------------------
# mode = "auto"

PLATFORM_NVML = "nvml"  # libnvidia-ml loads: a discrete-GPU host
PLATFORM_TEGRA = "tegra"  # the release's Tegra test holds (AutoRules.tegra_rule)
PLATFORM_WSL = "wsl"  # libdxcore found
PLATFORM_UNKNOWN = "unknown"  # nothing detected
PLATFORMS = (PLATFORM_NVML, PLATFORM_TEGRA, PLATFORM_WSL, PLATFORM_UNKNOWN)

RUNTIME = "runtime"
HOOK = "hook"


@dataclass(frozen=True)
class AutoRules:
    """What `mode = "auto"` resolves to. The CDI test comes first: when every device requested is a fully
    qualified CDI name, auto is "cdi" on any platform."""

    nvml: str
    wsl: str
    unknown: str
    hook_default: str  # the hook's own resolution on an NVML, WSL or undetected platform
    tegra_rule: str
    cdi_rule: str
    tegra: str = CSV

    def resolve(self, platform: str, only_cdi_devices: bool = False, component: str = RUNTIME) -> str:
        if only_cdi_devices:
            return CDI
        if platform == PLATFORM_TEGRA:
            return self.tegra
        if component == HOOK:
            return self.hook_default
        return {PLATFORM_NVML: self.nvml, PLATFORM_WSL: self.wsl}.get(platform, self.unknown)


# internal/info/auto.go at v1.14.0: the toolkit's own probe; WSL is not told apart (NVML or nothing: legacy).
_TEGRA_1_14 = "(Tegra release files and no NVML) or the nvgpu kernel module in use (internal/info/auto.go)"
# internal/info/auto.go at v1.16.0: go-nvlib's ResolvePlatform (resolver.go in go-nvlib v0.6.0), WSL first.
_TEGRA_1_16 = "(Tegra files and no NVML) or only the nvgpu module (go-nvlib ResolvePlatform)"
# vendored go-nvlib v0.7.2 at v1.17.7: resolver.go tests hasOnlyIntegratedGPUs.
_TEGRA_1_17_7 = "(Tegra files and no NVML) or only integrated GPUs (go-nvlib ResolvePlatform)"
# vendored go-nvlib at v1.19.0: resolver.go tests hasAnIntegratedGPU.
_TEGRA_1_19 = "(Tegra files and no NVML) or any integrated GPU (go-nvlib ResolvePlatform)"
# internal/info/auto.go at v1.14.0 (onlyFullyQualifiedCDIDevices).
_CDI_1_14 = "every NVIDIA_VISIBLE_DEVICES entry is a qualified CDI name (vendor/class=name)"
# internal/config/image/cuda_image.go at v1.15.0 (OnlyFullyQualifiedCDIDevices): volume-mount requests count too.
_CDI_1_15 = (
    "every NVIDIA_VISIBLE_DEVICES entry is a qualified CDI name and every /var/run/nvidia-container-devices "
    "mount request starts with cdi/"
)
# internal/config/image/cuda_image.go at v1.18.0: the requests the runtime honours (CDI annotations first, then
# volume mounts where accepted, then the variable where privileged or accept-...-envvar-when-unprivileged).
_CDI_1_18 = (
    "every device the container requests (annotations, mounts or NVIDIA_VISIBLE_DEVICES) is a qualified CDI name"
)

_AUTO_1_14 = AutoRules(LEGACY, LEGACY, LEGACY, LEGACY, _TEGRA_1_14, _CDI_1_14)
_AUTO_1_15 = AutoRules(LEGACY, LEGACY, LEGACY, LEGACY, _TEGRA_1_14, _CDI_1_15)
_AUTO_1_16 = AutoRules(LEGACY, LEGACY, LEGACY, LEGACY, _TEGRA_1_16, _CDI_1_15)
_AUTO_1_17_7 = AutoRules(LEGACY, LEGACY, LEGACY, LEGACY, _TEGRA_1_17_7, _CDI_1_15)
# internal/info/auto.go at v1.18.0: NewRuntimeModeResolver defaults to JitCDIRuntimeMode, which the runtime keeps
# (internal/runtime/runtime_factory.go) and the hook overrides with WithDefaultMode(LegacyRuntimeMode)
# (cmd/nvidia-container-runtime-hook/hook_config.go). CHANGELOG.md at v1.18.0: "Default to jit-cdi mode in the
# nvidia runtime".
_AUTO_1_18 = AutoRules(JIT_CDI, JIT_CDI, JIT_CDI, LEGACY, _TEGRA_1_17_7, _CDI_1_18)
_AUTO_1_19 = AutoRules(JIT_CDI, JIT_CDI, JIT_CDI, LEGACY, _TEGRA_1_19, _CDI_1_18)

# ---------------------------------------------------------------------------------------------------------------
# Loading the file


@dataclass(frozen=True)
class Loading:
    """How a release loads the file, and the words of each refusal."""

    ldconfig_must_be_host: bool  # ldconfig without '@' refused unless features.allow-ldconfig-from-container
    parse_prefix: str  # between "error loading config: " and go-toml's "(LINE, COL): ..." for a parse error
    runtime_env_override: Optional[str]  # variable naming the file for the runtime, before XDG_CONFIG_HOME

    def ldconfig_refusal(self, value: str, allow_from_container: bool = False) -> Optional[str]:
        """The validation error for ldconfig = value (without the runtime's or hook's prefix), or None."""
        if not self.ldconfig_must_be_host or value.startswith("@") or allow_from_container:
            return None
        return LDCONFIG_REFUSAL.format(quoted=go_quote(value))

    def runtime_parse_error(self, detail: str) -> str:
        return LOAD_ERROR_PREFIX + self.parse_prefix + detail

    def hook_parse_error(self, detail: str) -> str:
        return HOOK_LOAD_ERROR_PREFIX + HOOK_OPEN_ERROR + self.parse_prefix + detail

    @staticmethod
    def runtime_unmarshal_error(detail: str) -> str:
        return UNMARSHAL_ERROR_PREFIX + detail

    @staticmethod
    def hook_unmarshal_error(detail: str) -> str:
        return HOOK_LOAD_ERROR_PREFIX + "failed to unmarshal config: " + detail

    @staticmethod
    def runtime_validation_error(refusal: str) -> str:
        return LOAD_ERROR_PREFIX + refusal

    @staticmethod
    def hook_validation_error(refusal: str) -> str:
        return HOOK_LOAD_ERROR_PREFIX + refusal


# internal/config/toml.go at v1.14.0: toml.LoadReader's error is returned as is; a missing file means defaults.
# internal/config/config.go at v1.14.0 (GetConfigFilePath): $XDG_CONFIG_HOME/nvidia-container-runtime/config.toml,
# else /etc/nvidia-container-runtime/config.toml.
_LOADING_1_14 = Loading(False, "", None)
# internal/config/toml.go at v1.17.3 (Toml.Config calls assertValid).
_LOADING_1_17_3 = Loading(True, "", None)
# internal/config/config.go at v1.18.0: FilePathOverrideEnvVar.
_LOADING_1_18 = Loading(True, "", "NVIDIA_CTK_CONFIG_FILE_PATH")
# api/config/v1/toml.go at v1.20.0: loadConfigToml wraps the parse error too.
_LOADING_1_20 = Loading(True, "failed to load specified config file: ", "NVIDIA_CTK_CONFIG_FILE_PATH")

# ---------------------------------------------------------------------------------------------------------------
# The legacy hook


@dataclass(frozen=True)
class HookRules:
    """How `nvidia-container-runtime-hook` reads the file and when it refuses to run.

    From 1.14.0 (CHANGELOG.md at v1.14.0-rc.3: "Refactored config for nvidia-container-runtime-hook") the hook
    loads through the runtime's loader with the runtime's GetDefault; before that it had a HookConfig of its own
    with its own defaults. Its refusals go to stderr through the log package, and it exits 1."""

    # Files tried in order without -config (and without the env override): the first that exists is read;
    # none existing means GetDefault.
    paths: tuple[str, ...]
    env_override: Optional[str]  # a variable naming a required file (after -config)
    honours_xdg: bool  # $XDG_CONFIG_HOME replaces /etc
    reads_files: bool  # False: the file is never read (1.14.0's bug)
    direct_invocation: str  # the refusal when the resolved mode is not legacy (skip-mode-detection: no check)
    # What an invalid supported-driver-capabilities does: a message, or None where the hook exits 1 silently.
    capabilities_refusal: Optional[str]
    normalizes_ldconfig: (
        bool  # "@/sbin/ldconfig" passed to nvidia-container-cli as "@/sbin/ldconfig.real" if that exists
    )


_DRIVER_ROOT_CONFIG = "/run/nvidia/driver/etc/nvidia-container-runtime/config.toml"
_ETC_CONFIG = "/etc/nvidia-container-runtime/config.toml"
# cmd/nvidia-container-runtime-hook/hook_config.go at v1.14.0 (getHookConfig): log.Panicf of this, with
# supported-driver-capabilities' name found by reflection.
_CAPABILITIES_REFUSAL = (
    "Invalid value for config option 'supported-driver-capabilities'; {value} (supported: "
    + ",".join(SUPPORTED_DRIVER_CAPABILITIES)
    + ")"
)

# cmd/nvidia-container-runtime-hook/hook_config.go at v1.14.0: config.New without WithRequired returns defaults for
# a missing file, so the loop stops at the first path whether or not it exists: the hook never reads
# /etc/nvidia-container-runtime/config.toml (CHANGELOG.md at v1.14.1: "Fixed bug where contents of
# /etc/nvidia-container-runtime/config.toml is ignored by the NVIDIA Container Runtime Hook"), nor a missing -config.
_HOOK_1_14_0 = HookRules(
    (_DRIVER_ROOT_CONFIG, _ETC_CONFIG),
    None,
    False,
    False,
    HOOK_DIRECT_INVOCATION_BEFORE_1_18,
    _CAPABILITIES_REFUSAL,
    False,
)
# hook_config.go at v1.14.1: WithRequired(true) on each path.
_HOOK_1_14_1 = HookRules(
    (_DRIVER_ROOT_CONFIG, _ETC_CONFIG),
    None,
    False,
    True,
    HOOK_DIRECT_INVOCATION_BEFORE_1_18,
    _CAPABILITIES_REFUSAL,
    False,
)
# cmd/nvidia-container-runtime-hook/main.go at v1.15.0: cli.NormalizeLDConfigPath().
_HOOK_1_15 = HookRules(
    (_DRIVER_ROOT_CONFIG, _ETC_CONFIG),
    None,
    False,
    True,
    HOOK_DIRECT_INVOCATION_BEFORE_1_18,
    _CAPABILITIES_REFUSAL,
    True,
)
# hook_config.go at v1.18.0: getConfigFilePath (-config, then $NVIDIA_CTK_CONFIG_FILE_PATH, then
# config.GetConfigFilePath()); the driver-root path is gone. getConfigOption now reflects on **hookConfig, whose
# FieldByName panics with a string that exit() does not print: a bad capability list exits 1 without a word
# (measured at 1.20.0).
_HOOK_1_18 = HookRules(
    (_ETC_CONFIG,),
    "NVIDIA_CTK_CONFIG_FILE_PATH",
    True,
    True,
    HOOK_DIRECT_INVOCATION,
    None,
    True,
)

# ---------------------------------------------------------------------------------------------------------------
# Binaries the file names


@dataclass(frozen=True)
class RuntimeLookup:
    """How `nvidia-container-runtime.runtimes` is resolved (internal/oci/runtime_low_level.go and
    internal/lookup/executable.go at v1.14.0; pkg/lookup/executable.go at v1.20.0, unchanged in substance).

    Every invocation resolves it, `state` and `delete` included, before anything else happens. The candidates
    are tried in order; the first that resolves is exec'd:
    - one containing "/" must be a non-directory with any execute bit (os.Stat, mode & 0111), else it is skipped;
    - a bare name is matched (as a glob) in each $PATH directory and then in `search_dirs` not already in $PATH,
      each joined under "/", and must pass the same check.
    """

    search_dirs: tuple[str, ...] = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")

    @staticmethod
    def refusal(candidates: Sequence[str]) -> str:
        """What the runtime prints when no candidate resolves."""
        if not candidates:
            return LOW_LEVEL_RUNTIME_ERROR_PREFIX + NO_RUNTIME_CANDIDATES
        return LOW_LEVEL_RUNTIME_ERROR_PREFIX + NO_RUNTIME_FOUND.format(candidates=go_list(candidates))


RUNTIME_LOOKUP = RuntimeLookup()


@dataclass(frozen=True)
class ToolPath:
    """A binary the runtime resolves once per invocation and writes into specs (internal/config/config.go at
    v1.14.0: resolveWithDefault, called from internal/runtime/runtime.go):
    - an absolute path is used as is, without a check that anything is there;
    - "" means `name`; a name is looked up in $PATH and the standard directories (executable files only);
    - when the lookup finds nothing, `fallback` is used, again without a check."""

    key: str
    name: str
    fallback: str

    def resolve(self, value: str, found: Optional[str] = None) -> str:
        """The path the runtime uses for value; found: what the lookup of a name finds on the node, if anything."""
        if value.startswith("/"):
            return value
        return found if found is not None else self.fallback


TOOL_PATHS = (
    ToolPath("nvidia-ctk.path", "nvidia-ctk", "/usr/bin/nvidia-ctk"),
    ToolPath(
        "nvidia-container-runtime-hook.path", "nvidia-container-runtime-hook", "/usr/bin/nvidia-container-runtime-hook"
    ),
)
"""nvidia-ctk becomes the path of the CDI hooks the runtime injects; the hook path the prestart hook of legacy mode
(internal/modifier/stable.go at v1.14.0: added unless the spec already has an NVIDIA prestart hook)."""

# cmd/nvidia-container-runtime-hook/main.go at v1.14.0 (getCLIPath): nvidia-container-cli.path, if set, is exec'd
# as is; else nvidia-container-cli is looked up in a PATH built from nvidia-container-cli.root and the standard
# directories.

# ---------------------------------------------------------------------------------------------------------------
# The decoder


@dataclass(frozen=True)
class TomlDecoder:
    """The TOML library a release unmarshals the file with (go.mod and vendor/modules.txt at the tag).

    Tree.Unmarshal (vendor/github.com/pelletier/go-toml/marshal.go) walks the struct, not the file: for each field
    it tries the tag, its lower case, its upper case (strings.ToTitle) and the tag with its first letter lowered,
    and decodes the first of those the file has. It is not strict: a key no field names is dropped without a word.
    It stops at the first value it cannot convert. Defaults survive for every key the file leaves out, since it
    decodes into GetDefault's struct; a list the file sets replaces the default whole (`runtimes = []` is empty)."""

    module: str
    version: str
    ignores_unknown_keys: bool = True
    # parser.go at v1.9.5: an integer above int64 is read as a uint64 (v1.9.4: a parse error). A uint64 is
    # convertible to a Go string, and only int64 is special-cased, so such a value in a string key is accepted
    # as a one-rune string (measured at 1.20.0: swarm-resource = 18446744073709551615 loads).
    reads_uint64: bool = True


# go.mod at v1.14.0 to v1.14.5.
_TOML_1_9_4 = TomlDecoder("github.com/pelletier/go-toml", "v1.9.4", reads_uint64=False)
# go.mod at v1.14.6 to v1.20.0.
_TOML_1_9_5 = TomlDecoder("github.com/pelletier/go-toml", "v1.9.5")


@dataclass(frozen=True)
class CdiLibrary:
    """The CDI library the release vendors, and the defaults the file's `modes.cdi` table starts from."""

    module: str
    version: str
    spec_dirs: tuple[str, ...] = CDI_DEFAULT_SPEC_DIRS
    annotation_prefix: str = CDI_ANNOTATION_PREFIX
    default_kind: str = CDI_DEFAULT_KIND


# go.mod at each tag.
_CDI_0_6_0 = CdiLibrary("github.com/container-orchestrated-devices/container-device-interface", "v0.6.0")
_CDI_0_6_2 = CdiLibrary("tags.cncf.io/container-device-interface", "v0.6.2")
_CDI_0_7_1 = CdiLibrary("tags.cncf.io/container-device-interface", "v0.7.1")
_CDI_0_8_0 = CdiLibrary("tags.cncf.io/container-device-interface", "v0.8.0")
_CDI_0_8_1 = CdiLibrary("tags.cncf.io/container-device-interface", "v0.8.1")
_CDI_1_0_1 = CdiLibrary("tags.cncf.io/container-device-interface", "v1.0.1")
_CDI_1_0_2_PRE = CdiLibrary("tags.cncf.io/container-device-interface", "v1.0.2-0.20251114135136-1b24d969689f")
_CDI_1_1_0 = CdiLibrary("tags.cncf.io/container-device-interface", "v1.1.0")

# ---------------------------------------------------------------------------------------------------------------
# The release


@dataclass(frozen=True)
class ToolkitRelease:
    version: str
    keys: KeySet
    # Every setting's default, with the machine conditions that change two of them; `defaults` is the plain view.
    default_entries: Defaults
    mode_rules: ModeRules
    auto: AutoRules
    loading: Loading
    hook: HookRules
    toml: TomlDecoder
    cdi: CdiLibrary
    # internal/modifier/cdi.go: a failed jit spec falls back to the spec directories (up to 1.18.1) or fails the
    # create with "failed to create the automatic CDI modifier: ..." (from 1.18.2).
    jit_failure_falls_back: bool
    # cmd/nvidia-ctk-installer/container/runtime/crio/crio.go at v1.18.0: the installer warns that its "hook"
    # config mode for cri-o (an OCI hook file running nvidia-container-runtime-hook) is deprecated.
    deprecates_crio_hook: bool
    runtimes: RuntimeLookup = RUNTIME_LOOKUP
    tool_paths: tuple[ToolPath, ...] = TOOL_PATHS

    @property
    def name(self) -> str:
        return f"NVIDIA Container Toolkit {self.version}"

    @property
    def defaults(self) -> dict[str, Value]:
        """Every setting's default on a machine where no condition holds (a fresh dict: the release stays as is)."""
        return dict(self.default_entries)

    def defaults_on(self, conditions: Collection[str]) -> dict[str, Value]:
        """Every setting's default on a machine where conditions (LDCONFIG_REAL, SUSE) hold."""
        return self.default_entries.resolved(conditions)

    @property
    def modes(self) -> tuple[str, ...]:
        """The modes the runtime accepts besides "auto"."""
        return self.mode_rules.accepted

    def invalid_mode_text(self, mode: str) -> str:
        """What the runtime prints for every container it creates under mode, which it does not accept."""
        refusal = self.mode_rules.refusal(mode)
        if refusal is None:
            raise ValueError(f"{self.name} accepts mode {mode!r}")
        return refusal

    @property
    def auto_mode(self) -> str:
        """What `auto` becomes in the runtime on a discrete-GPU (NVML) host with no CDI-only request."""
        return self.auto.nvml

    @property
    def validates_ldconfig(self) -> bool:
        return self.loading.ldconfig_must_be_host

    @property
    def features(self) -> tuple[str, ...]:
        """The names in the `features` table, in declaration order (none before 1.15.0)."""
        return tuple(name[len("features.") :] for name in self.keys if name.startswith("features."))

    @property
    def missing_keys(self) -> tuple[str, ...]:
        """The newest release's keys this one does not have."""
        return tuple(name for name in newest().keys if name not in self.keys)

    @property
    def extra_keys(self) -> tuple[str, ...]:
        """This release's keys the newest one does not have (1.15 and 1.16's four feature gates)."""
        return tuple(name for name in self.keys if name not in newest().keys)

    def has(self, key: str) -> bool:
        return key in self.keys


T = TypeVar("T")


def _as_of(version: str, changes: Sequence[tuple[str, T]]) -> T:
    """What version has of something that changed at the releases listed (oldest first; the first entry's
    release is 1.14.0): the last change at or before it."""
    found = changes[0][1]
    for first, value in changes:
        if at_least(version, first):
            found = value
    return found


# What each part of the toolkit's reading was from the release it changed in.
_KEYS_AND_DEFAULTS = (
    ("1.14.0", (_KEYS_1_14, _DEFAULTS_1_14)),
    ("1.14.4", (_KEYS_1_14, _DEFAULTS_1_14_4)),
    ("1.15.0", (_KEYS_1_15, _DEFAULTS_1_15)),
    ("1.17.0", (_KEYS_1_17_0, _DEFAULTS_1_17_0)),
    ("1.17.3", (_KEYS_1_17_3, _DEFAULTS_1_17_3)),
    ("1.17.4", (_KEYS_1_17_4, _DEFAULTS_1_17_4)),
    ("1.17.5", (_KEYS_1_17_5, _DEFAULTS_1_17_5)),
    ("1.17.7", (_KEYS_1_17_7, _DEFAULTS_1_17_7)),
    ("1.18.0", (_KEYS_1_17_7, _DEFAULTS_1_18_0)),
    ("1.18.1", (_KEYS_1_18_1, _DEFAULTS_1_18_1)),
    ("1.19.0", (_KEYS_1_19, _DEFAULTS_1_19)),
    ("1.20.0", (_KEYS_1_20, _DEFAULTS_1_20)),
)
_MODES = (("1.14.0", _MODES_1_14), ("1.18.0", _MODES_1_18), ("1.19.0", _MODES_1_19))
_AUTOS = (
    ("1.14.0", _AUTO_1_14),
    ("1.15.0", _AUTO_1_15),
    ("1.16.0", _AUTO_1_16),
    ("1.17.7", _AUTO_1_17_7),
    ("1.18.0", _AUTO_1_18),
    ("1.19.0", _AUTO_1_19),
)
_LOADINGS = (
    ("1.14.0", _LOADING_1_14),
    ("1.17.3", _LOADING_1_17_3),
    ("1.18.0", _LOADING_1_18),
    ("1.20.0", _LOADING_1_20),
)
_HOOKS = (("1.14.0", _HOOK_1_14_0), ("1.14.1", _HOOK_1_14_1), ("1.15.0", _HOOK_1_15), ("1.18.0", _HOOK_1_18))
_CDI_LIBRARIES = (
    ("1.14.0", _CDI_0_6_0),
    ("1.14.5", _CDI_0_6_2),
    ("1.15.0", _CDI_0_7_1),
    ("1.16.0", _CDI_0_8_0),
    ("1.17.5", _CDI_0_8_1),
    ("1.18.0", _CDI_1_0_1),
    ("1.18.1", _CDI_1_0_2_PRE),
    ("1.18.2", _CDI_1_1_0),
)
_TOML_DECODERS = (("1.14.0", _TOML_1_9_4), ("1.14.6", _TOML_1_9_5))


def _release(version: str) -> ToolkitRelease:
    keys, defaults = _as_of(version, _KEYS_AND_DEFAULTS)
    return ToolkitRelease(
        version=version,
        keys=keys,
        default_entries=defaults,
        mode_rules=_as_of(version, _MODES),
        auto=_as_of(version, _AUTOS),
        loading=_as_of(version, _LOADINGS),
        hook=_as_of(version, _HOOKS),
        toml=_as_of(version, _TOML_DECODERS),
        cdi=_as_of(version, _CDI_LIBRARIES),
        jit_failure_falls_back=not at_least(version, "1.18.2"),
        deprecates_crio_hook=at_least(version, "1.18.0"),
    )


_BY_VERSION = {version: _release(version) for version in RELEASES}
ALL: tuple[ToolkitRelease, ...] = tuple(_BY_VERSION[version] for version in RELEASES)


def newest() -> ToolkitRelease:
    return ALL[-1]


def release_for(text: str) -> ToolkitRelease:
    """The release text names: "1.17.8" or "v1.17.8"; a bare minor ("1.17") is its newest patch."""
    wanted = text.strip()
    if wanted[:1] in ("v", "V"):
        wanted = wanted[1:]
    found = _BY_VERSION.get(wanted)
    if found is not None:
        return found
    if wanted.count(".") == 1:
        patches = [release for release in ALL if release.version.startswith(wanted + ".")]
        if patches:
            return patches[-1]
    raise UnknownToolkitRelease(
        f"unknown NVIDIA Container Toolkit release {text!r}: known are {RELEASES[0]} to {RELEASES[-1]} "
        f"(a minor such as 1.17 means its newest patch)"
    )


def releases_with(key: str) -> tuple[str, ...]:
    """The releases whose Config has key."""
    return tuple(release.version for release in ALL if key in release.keys)


def first_release_with(key: str) -> Optional[str]:
    found = releases_with(key)
    return found[0] if found else None
