"""NVIDIA Container Toolkit releases: parsing a release's name, what changed between releases, and the texts the
1.20.0 binaries print, run against the binaries themselves where the shared peers directory holds them."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from nvidia_oci_hook.kinds.toolkit import releases
from nvidia_oci_hook.kinds.toolkit.releases import (
    ALL,
    CDI,
    CSV,
    HOOK,
    HOOK_DIRECT_INVOCATION,
    HOOK_DIRECT_INVOCATION_BEFORE_1_18,
    HOOK_LOAD_ERROR_PREFIX,
    HOOK_MISSING_CONFIG_ERROR,
    HOOK_REQUESTED_MODE_LOG,
    JIT_CDI,
    LDCONFIG_REAL,
    LEGACY,
    LOAD_ERROR_PREFIX,
    LOAD_FILE_ERROR_PREFIX,
    MEASURED,
    PLATFORM_NVML,
    PLATFORM_TEGRA,
    PLATFORM_UNKNOWN,
    PLATFORM_WSL,
    RELEASES,
    RUNTIME_LOOKUP,
    SUSE,
    TOOL_PATHS,
    UNMARSHAL_ERROR_PREFIX,
    UnknownToolkitRelease,
    go_quote,
    newest,
    release_for,
)

JIT_TABLE = "nvidia-container-runtime.modes.jit-cdi"
LDCONFIG = "nvidia-container-cli.ldconfig"
BIN = Path(__file__).resolve().parents[2] / ".." / "shared" / "peers" / "bin"
RUNTIME_BIN = BIN / "nvidia-container-runtime"
HOOK_BIN = BIN / "nvidia-container-runtime-hook"
needs_binaries = pytest.mark.skipif(
    not (RUNTIME_BIN.is_file() and HOOK_BIN.is_file()),
    reason=f"the 1.20.0 toolkit binaries are not in {BIN}",
)


def before(version: str, first: str) -> bool:
    return not releases.at_least(version, first)


# ---------------------------------------------------------------------------------------------------------------
# Naming a release


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("1.17.8", "1.17.8"),
        ("v1.17.8", "1.17.8"),
        ("1.17", "1.17.9"),
        ("v1.17", "1.17.9"),
        ("1.14", "1.14.6"),
        ("1.18", "1.18.2"),
        (" 1.20 ", "1.20.0"),
        ("1.20.0", "1.20.0"),
    ],
)
def test_release_for_names(text: str, version: str) -> None:
    assert release_for(text).version == version


@pytest.mark.parametrize("text", ["1.13", "1.13.5", "1.21", "1.17.10", "1", "", "latest", "1.17.8-1", "1.18.0-rc.1"])
def test_release_for_refuses_unknown(text: str) -> None:
    with pytest.raises(UnknownToolkitRelease) as caught:
        release_for(text)
    message = str(caught.value)
    assert "\n" not in message
    assert "1.14.0 to 1.20.0" in message
    assert repr(text) in message


def test_releases_are_ordered_and_complete() -> None:
    assert len(RELEASES) == 27
    assert list(RELEASES) == sorted(RELEASES, key=lambda v: tuple(int(p) for p in v.split(".")))
    assert [release.version for release in ALL] == list(RELEASES)
    assert newest().version == "1.20.0" == RELEASES[-1]
    assert release_for("1.17.8") is release_for("v1.17.8")


def test_identical_releases_share_objects() -> None:
    assert release_for("1.14.0").keys is release_for("1.14.6").keys
    assert release_for("1.17.7").keys is release_for("1.18.0").keys
    assert release_for("1.17.7").default_entries is not release_for("1.18.0").default_entries  # runtimes changed
    assert release_for("1.19.0").default_entries is release_for("1.19.1").default_entries
    assert release_for("1.17.9").keys is not release_for("1.18.1").keys


# ---------------------------------------------------------------------------------------------------------------
# Keys


def test_jit_cdi_table_from_1_18_1() -> None:
    for release in ALL:
        has = JIT_TABLE in release.keys
        assert has == releases.at_least(release.version, "1.18.1"), release.version
    assert releases.first_release_with(JIT_TABLE) == "1.18.1"
    assert releases.releases_with(JIT_TABLE + ".nvcdi-disable-hooks") == ("1.20.0",)
    # The mode came a patch before its table.
    assert JIT_CDI in release_for("1.18.0").modes
    assert JIT_TABLE not in release_for("1.18.0").keys
    assert JIT_CDI not in release_for("1.17.9").modes


@pytest.mark.parametrize(
    ("key", "first"),
    [
        ("features", "1.15.0"),
        ("features.gds", "1.15.0"),
        ("features.disable-imex-channel-creation", "1.17.0"),
        ("features.allow-ldconfig-from-container", "1.17.3"),
        ("features.allow-cuda-compat-libs-from-container", "1.17.4"),
        ("features.ignore-imex-channel-requests", "1.17.5"),
        ("nvidia-container-runtime.modes.legacy.cuda-compat-mode", "1.17.7"),
        ("nvidia-container-runtime.modes.csv.compat-container-root", "1.19.0"),
        ("features.no-additional-gids-for-device-nodes", "1.19.0"),
        ("nvidia-container-cli.no-pivot", "1.14.0"),
        ("nvidia-container-runtime-hook.skip-mode-detection", "1.14.0"),
        ("nvidia-container-runtime.runtimes", "1.14.0"),
    ],
)
def test_key_first_release(key: str, first: str) -> None:
    assert releases.first_release_with(key) == first


def test_feature_gates_of_1_15_and_1_16_are_gone_in_1_17() -> None:
    assert releases.releases_with("features.gds") == ("1.15.0", "1.16.0", "1.16.1", "1.16.2")
    assert release_for("1.16.2").extra_keys == (
        "features.gds",
        "features.mofed",
        "features.nvswitch",
        "features.gdrcopy",
    )
    assert release_for("1.17.0").features == ("disable-imex-channel-creation",)
    assert release_for("1.14.6").features == ()


def test_old_keys_are_in_no_release() -> None:
    for key in releases.GONE_BEFORE_1_14:
        assert releases.releases_with(key) == ()


# The 1.20 keys every release has, with the shape the decoder converts to.
CORE = {
    "disable-require": releases.BOOL,
    "swarm-resource": releases.STRING,
    "accept-nvidia-visible-devices-envvar-when-unprivileged": releases.BOOL,
    "accept-nvidia-visible-devices-as-volume-mounts": releases.BOOL,
    "supported-driver-capabilities": releases.STRING,
    "nvidia-container-cli": releases.TABLE,
    "nvidia-container-cli.root": releases.STRING,
    "nvidia-container-cli.path": releases.STRING,
    "nvidia-container-cli.environment": releases.STRINGS,
    "nvidia-container-cli.load-kmods": releases.BOOL,
    "nvidia-container-cli.no-pivot": releases.BOOL,
    "nvidia-container-cli.no-cgroups": releases.BOOL,
    "nvidia-container-cli.user": releases.STRING,
    LDCONFIG: releases.STRING,
    "nvidia-ctk.path": releases.STRING,
    "nvidia-container-runtime.debug": releases.STRING,
    "nvidia-container-runtime.log-level": releases.STRING,
    "nvidia-container-runtime.runtimes": releases.STRINGS,
    "nvidia-container-runtime.mode": releases.STRING,
    "nvidia-container-runtime.modes.csv.mount-spec-path": releases.STRING,
    "nvidia-container-runtime.modes.cdi.spec-dirs": releases.STRINGS,
    "nvidia-container-runtime.modes.cdi.default-kind": releases.STRING,
    "nvidia-container-runtime.modes.cdi.annotation-prefixes": releases.STRINGS,
    "nvidia-container-runtime-hook.path": releases.STRING,
    "nvidia-container-runtime-hook.skip-mode-detection": releases.BOOL,
}


@pytest.mark.parametrize("version", RELEASES)
def test_every_release_has_the_core_keys(version: str) -> None:
    keys = release_for(version).keys
    for key, shape in CORE.items():
        assert keys.type_of(key).shape == shape, (version, key)
    ldconfig = keys.type_of(LDCONFIG)
    assert ldconfig.decoder_name == ("string" if before(version, "1.17.3") else "config.ldconfigPath")
    assert ldconfig.underlying == "string"
    # A table's keys come after it, and every key's table is a key.
    seen: set[str] = set()
    for key in keys:
        parent = key.rpartition(".")[0]
        assert not parent or parent in seen, (version, key)
        seen.add(key)


def test_named_types_as_the_decoder_names_them() -> None:
    keys = newest().keys
    feature = keys.type_of("features.allow-ldconfig-from-container")
    assert (feature.decoder_name, feature.underlying, feature.pointer) == ("config.feature", "*bool", True)
    flags = keys.type_of(JIT_TABLE + ".nvcdi-feature-flags")
    assert (flags.underlying, flags.decoder_name, flags.element) == (
        "[]string",
        "[]nvcdi.FeatureFlag",
        "nvcdi.FeatureFlag",
    )
    hooks = keys.type_of(JIT_TABLE + ".nvcdi-disable-hooks")
    assert (hooks.declared, hooks.decoder_name) == ("[]nvcdi.HookName", "[]discover.HookName")
    assert keys.type_of("nvidia-container-runtime").decoder_name == "config.RuntimeConfig"
    assert keys.children("nvidia-container-runtime.modes") == ("csv", "cdi", "jit-cdi", "legacy")
    assert keys.children("") == (
        "disable-require",
        "swarm-resource",
        "accept-nvidia-visible-devices-envvar-when-unprivileged",
        "accept-nvidia-visible-devices-as-volume-mounts",
        "supported-driver-capabilities",
        "nvidia-container-cli",
        "nvidia-ctk",
        "nvidia-container-runtime",
        "nvidia-container-runtime-hook",
        "features",
    )


def test_missing_keys_against_newest() -> None:
    assert newest().missing_keys == ()
    assert release_for("1.19.1").missing_keys == (JIT_TABLE + ".nvcdi-disable-hooks",)
    assert "features" in release_for("1.14.0").missing_keys


# ---------------------------------------------------------------------------------------------------------------
# Defaults


@pytest.mark.parametrize(
    ("version", "runtimes"),
    [
        ("1.14.3", ("docker-runc", "runc")),
        ("1.14.4", ("docker-runc", "runc", "crun")),
        ("1.17.9", ("docker-runc", "runc", "crun")),
        ("1.18.0", ("runc", "crun")),
        ("1.20.0", ("runc", "crun")),
    ],
)
def test_default_runtimes(version: str, runtimes: tuple[str, ...]) -> None:
    assert release_for(version).defaults["nvidia-container-runtime.runtimes"] == runtimes


def test_machine_dependent_defaults() -> None:
    for release in ALL:
        defaults = release.default_entries
        assert defaults[LDCONFIG] == "@/sbin/ldconfig"
        assert defaults.value(LDCONFIG, {LDCONFIG_REAL}) == "@/sbin/ldconfig.real"
        suse_user = defaults.value("nvidia-container-cli.user", {SUSE})
        assert suse_user == ("" if before(release.version, "1.14.4") else "root:video"), release.version
        assert defaults["nvidia-container-cli.user"] == ""
        assert release.defaults_on({LDCONFIG_REAL})[LDCONFIG] == "@/sbin/ldconfig.real"
        assert release.defaults[LDCONFIG] == "@/sbin/ldconfig"


def test_defaults_cover_every_setting() -> None:
    for release in ALL:
        assert set(release.defaults) == set(release.keys.settings()), release.version
    defaults = newest().defaults
    assert defaults["nvidia-container-runtime.mode"] == "auto"
    assert defaults["accept-nvidia-visible-devices-envvar-when-unprivileged"] is True
    assert defaults["nvidia-container-cli.load-kmods"] is True
    assert defaults["features.allow-ldconfig-from-container"] is None
    assert defaults["nvidia-container-runtime.modes.cdi.spec-dirs"] == ("/etc/cdi", "/var/run/cdi")
    assert defaults["nvidia-container-runtime.modes.cdi.annotation-prefixes"] == ("cdi.k8s.io/",)
    assert defaults["nvidia-container-runtime.modes.legacy.cuda-compat-mode"] == "ldconfig"
    assert defaults["supported-driver-capabilities"] == "compat32,compute,display,graphics,ngx,utility,video"
    assert defaults.get("no-such-key") is None
    assert newest().default_entries.machine_dependent() == ("nvidia-container-cli.user", LDCONFIG)


# ---------------------------------------------------------------------------------------------------------------
# Modes and auto


@pytest.mark.parametrize("version", RELEASES)
def test_auto_resolution(version: str) -> None:
    release = release_for(version)
    expected_default = LEGACY if before(version, "1.18.0") else JIT_CDI
    assert release.auto_mode == expected_default
    for platform in (PLATFORM_NVML, PLATFORM_WSL, PLATFORM_UNKNOWN):
        assert release.auto.resolve(platform) == expected_default
        assert release.auto.resolve(platform, component=HOOK) == LEGACY
    assert release.auto.resolve(PLATFORM_TEGRA) == CSV
    assert release.auto.resolve(PLATFORM_TEGRA, component=HOOK) == CSV
    for platform in releases.PLATFORMS:
        assert release.auto.resolve(platform, only_cdi_devices=True) == CDI


@pytest.mark.parametrize(
    ("version", "mode", "said"),
    [
        ("1.17.9", "jit-cdi", "invalid runtime mode: jit-cdi"),
        ("1.14.0", "bogus", "invalid runtime mode: bogus"),
        ("1.18.2", "CDI", "invalid runtime mode: CDI"),
        ("1.18.2", "", "invalid runtime mode: "),
        ("1.19.0", "CDI", 'invalid mode "CDI"'),
        ("1.20.0", 'a"b', 'invalid mode "a\\"b"'),
        ("1.20.0", "", "a mode must be specified"),
    ],
)
def test_invalid_mode_texts(version: str, mode: str, said: str) -> None:
    assert release_for(version).invalid_mode_text(mode) == releases.MODIFIER_ERROR_PREFIX + said


def test_accepted_modes() -> None:
    for release in ALL:
        assert release.mode_rules.refusal("auto") is None
        for mode in release.modes:
            assert release.mode_rules.refusal(mode) is None
    with pytest.raises(ValueError):
        newest().invalid_mode_text("legacy")


# ---------------------------------------------------------------------------------------------------------------
# Load-time validation, hook, lookups


@pytest.mark.parametrize("version", RELEASES)
def test_ldconfig_validation(version: str) -> None:
    loading = release_for(version).loading
    refusal = loading.ldconfig_refusal("/sbin/ldconfig")
    if before(version, "1.17.3"):
        assert refusal is None
        assert not release_for(version).validates_ldconfig
        return
    assert refusal == (
        "nvidia-container-cli.ldconfig value \"/sbin/ldconfig\" is not host-relative (does not start with a '@')\n"
        "invalid config value"
    )
    assert loading.ldconfig_refusal("/sbin/ldconfig", allow_from_container=True) is None
    assert loading.ldconfig_refusal("@/sbin/ldconfig") is None
    assert loading.ldconfig_refusal("") is not None
    assert loading.runtime_validation_error(refusal).startswith(LOAD_ERROR_PREFIX + "nvidia-container-cli.ldconfig")
    assert loading.hook_validation_error(refusal).startswith(HOOK_LOAD_ERROR_PREFIX)


def test_parse_errors_wrapped_from_1_20() -> None:
    assert release_for("1.19.1").loading.runtime_parse_error("(2, 1): x") == LOAD_ERROR_PREFIX + "(2, 1): x"
    assert newest().loading.runtime_parse_error("(2, 1): x") == LOAD_FILE_ERROR_PREFIX + "(2, 1): x"
    assert newest().loading.runtime_unmarshal_error("(1, 1): y") == UNMARSHAL_ERROR_PREFIX + "(1, 1): y"


def test_hook_per_release() -> None:
    assert not release_for("1.14.0").hook.reads_files
    assert all(release.hook.reads_files for release in ALL[1:])
    assert release_for("1.17.9").hook.direct_invocation == HOOK_DIRECT_INVOCATION_BEFORE_1_18
    assert release_for("1.18.0").hook.direct_invocation == HOOK_DIRECT_INVOCATION
    assert HOOK_DIRECT_INVOCATION_BEFORE_1_18 == HOOK_DIRECT_INVOCATION + "."
    assert release_for("1.17.9").hook.paths[0].startswith("/run/nvidia/driver/")
    assert release_for("1.18.0").hook.env_override == "NVIDIA_CTK_CONFIG_FILE_PATH"
    assert release_for("1.17.9").hook.capabilities_refusal is not None
    assert release_for("1.18.0").hook.capabilities_refusal is None


def test_decoder_and_cdi_library_per_release() -> None:
    assert {release.toml.version for release in ALL if before(release.version, "1.14.6")} == {"v1.9.4"}
    assert {release.toml.version for release in ALL if not before(release.version, "1.14.6")} == {"v1.9.5"}
    assert all(release.toml.ignores_unknown_keys for release in ALL)
    assert release_for("1.14.4").cdi.module.startswith("github.com/container-orchestrated-devices/")
    assert release_for("1.14.5").cdi.module.startswith("tags.cncf.io/")
    assert newest().cdi.version == "v1.1.0"
    assert all(release.cdi.spec_dirs == ("/etc/cdi", "/var/run/cdi") for release in ALL)
    assert release_for("1.18.1").jit_failure_falls_back
    assert not release_for("1.18.2").jit_failure_falls_back


def test_runtime_lookup_and_tool_paths() -> None:
    assert RUNTIME_LOOKUP.refusal([]).endswith("at least one runtime candidate must be specified")
    assert RUNTIME_LOOKUP.refusal(["runc", "crun"]).endswith("no runtime binary found from candidate list: [runc crun]")
    ctk, hook = TOOL_PATHS
    assert ctk.resolve("/opt/nvidia-ctk") == "/opt/nvidia-ctk"  # used as is, no check
    assert ctk.resolve("nvidia-ctk") == "/usr/bin/nvidia-ctk"
    assert ctk.resolve("nvidia-ctk", found="/usr/local/bin/nvidia-ctk") == "/usr/local/bin/nvidia-ctk"
    assert hook.resolve("") == "/usr/bin/nvidia-container-runtime-hook"


def test_go_quote() -> None:
    assert go_quote("/sbin/ldconfig") == '"/sbin/ldconfig"'
    assert go_quote('a"b\\c\n') == '"a\\"b\\\\c\\n"'
    assert go_quote("\x01é") == '"\\x01é"'


# ---------------------------------------------------------------------------------------------------------------
# Against the 1.20.0 binaries

MSG = re.compile(r'msg="((?:[^"\\]|\\.)*)"')


def _messages(stderr: str) -> list[str]:
    """logrus's msg values, unquoted (Go's %q escapes are JSON's for these texts)."""
    return [json.loads(f'"{found}"') for found in MSG.findall(stderr)]


def _bundle(root: Path) -> Path:
    bundle = root / "bundle"
    (bundle / "rootfs").mkdir(parents=True)
    spec = {
        "ociVersion": "1.0.2",
        "process": {"env": ["PATH=/usr/bin", "NVIDIA_VISIBLE_DEVICES=all"], "cwd": "/", "args": ["sh"]},
        "root": {"path": "rootfs"},
        "mounts": [],
    }
    (bundle / "config.json").write_text(json.dumps(spec))
    return bundle


def _env(config: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "XDG_CONFIG_HOME"}
    env["NVIDIA_CTK_CONFIG_FILE_PATH"] = str(config)
    return env


@needs_binaries
def test_binaries_are_1_20_0() -> None:
    out = subprocess.run([str(RUNTIME_BIN), "--version"], capture_output=True, text=True, timeout=60, check=False)
    assert out.stdout.startswith("NVIDIA Container Runtime version 1.20.0\n")


@needs_binaries
@pytest.mark.parametrize("measured", MEASURED, ids=lambda m: m.config.splitlines()[0][:40])
def test_runtime_prints_the_measured_texts(measured: releases.Measured, tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(measured.config + "\n")
    if measured.create:
        args = ["create", "--bundle", str(_bundle(tmp_path)), "nvidia-oci-hook-test"]
    else:
        args = ["state", "nvidia-oci-hook-test"]
    out = subprocess.run(
        [str(RUNTIME_BIN), *args], capture_output=True, text=True, timeout=60, env=_env(config), check=False
    )
    assert out.returncode != 0
    assert _messages(out.stderr)[:1] == [measured.message], out.stderr


@needs_binaries
def test_runtime_ignores_unknown_keys(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        "unknown-key = 1\nnvidia-container-runtime.experimental = true\n"
        '[nvidia-container-runtime]\nbogus = true\nruntimes = ["no-such-runtime-x"]\n'
    )
    out = subprocess.run(
        [str(RUNTIME_BIN), "state", "x"], capture_output=True, text=True, timeout=60, env=_env(config), check=False
    )
    # The file loaded: what stops the runtime is the next step, finding the low-level runtime.
    assert _messages(out.stderr) == [RUNTIME_LOOKUP.refusal(["no-such-runtime-x"])]


def _hook(config_text: str, root: Path, *, write: bool = True) -> subprocess.CompletedProcess[str]:
    root.mkdir(parents=True, exist_ok=True)
    config = root / "hook.toml"
    if write:
        config.write_text(config_text + "\n")
    state = {"ociVersion": "1.0.2", "id": "x", "status": "creating", "pid": 1, "bundle": str(_bundle(root))}
    return subprocess.run(
        [str(HOOK_BIN), "prestart"],
        input=json.dumps(state),
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(config),
        check=False,
    )


@needs_binaries
@pytest.mark.parametrize("mode", ["cdi", "jit-cdi", "csv", "bogus"])
def test_hook_refuses_modes_other_than_legacy(mode: str, tmp_path: Path) -> None:
    out = _hook(f'nvidia-container-runtime.mode = "{mode}"', tmp_path)
    assert out.returncode == 1
    assert out.stderr.splitlines() == [HOOK_REQUESTED_MODE_LOG.format(mode=mode), newest().hook.direct_invocation]


@needs_binaries
def test_hook_load_errors(tmp_path: Path) -> None:
    loading = newest().loading
    refused = _hook('nvidia-container-cli.ldconfig = "/sbin/ldconfig"', tmp_path / "a")
    assert refused.stderr == loading.hook_validation_error(loading.ldconfig_refusal("/sbin/ldconfig") or "") + "\n"
    mistyped = _hook('disable-require = "yes"', tmp_path / "b")
    assert mistyped.stderr == loading.hook_unmarshal_error("(1, 1): Can't convert yes(string) to bool") + "\n"
    unparsed = _hook("x = ", tmp_path / "c")
    assert unparsed.stderr == loading.hook_parse_error("(2, 1): expecting a value") + "\n"
    missing = _hook("", tmp_path / "d", write=False)
    assert missing.stderr == HOOK_MISSING_CONFIG_ERROR + "\n"
    assert {out.returncode for out in (refused, mistyped, unparsed, missing)} == {1}


@needs_binaries
def test_hook_bad_capabilities_exit_silently(tmp_path: Path) -> None:
    out = _hook('supported-driver-capabilities = "compute,bogus"', tmp_path)
    assert (out.returncode, out.stderr) == (1, "")
    assert newest().hook.capabilities_refusal is None
