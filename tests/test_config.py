"""The configuration file and its environment overrides: every key typed, every error naming its key."""

from __future__ import annotations

from pathlib import Path

import pytest

from nvidia_oci_hook.config import SETTINGS, ConfigError, Settings, load_settings, load_settings_leniently


def _file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return str(path)


def test_defaults_without_a_file(tmp_path: Path) -> None:
    settings = load_settings(None, {"NVIDIA_OCI_HOOK_CONFIG": ""})
    assert settings.policy_fail_on == "gpu-unusable" and settings.cdi_spec_dirs == ("/etc/cdi", "/var/run/cdi")
    assert load_settings(_file(tmp_path, ""), {}).runtime_low_level == ("runc", "crun")


def test_every_key_from_the_file_and_from_the_environment(tmp_path: Path) -> None:
    text = """
driver_roots: [/, /opt/driver]
lint: {select: [DEV], ignore: [DEV001], fail_on: warning}
runtime:
  low_level: [/usr/bin/crun]
policy:
  fail_on: error
  fail_closed: true
  device_conflict: refuse
cdi:
  spec_dirs: [/etc/cdi]
  annotation_prefixes: [cdi.k8s.io/, example.com/]
  visible_devices_env: false
log:
  file: ""
  syslog: false
"""
    settings = load_settings(_file(tmp_path, text), {})
    assert settings.driver_roots == ("/", "/opt/driver") and settings.lint_select == ("DEV",)
    assert (settings.policy_fail_on, settings.policy_fail_closed, settings.policy_device_conflict) == (
        "error",
        True,
        "refuse",
    )
    assert settings.cdi_annotation_prefixes == ("cdi.k8s.io/", "example.com/") and not settings.cdi_visible_devices_env
    assert (settings.log_file, settings.log_syslog) == ("", False)
    environ = {
        "NVIDIA_OCI_HOOK_POLICY_FAIL_ON": "never",
        "NVIDIA_OCI_HOOK_CDI_SPEC_DIRS": "/a, /b",
        "NVIDIA_OCI_HOOK_LOG_SYSLOG": "yes",
    }
    settings = load_settings(_file(tmp_path, text), environ)
    assert (settings.policy_fail_on, settings.cdi_spec_dirs, settings.log_syslog) == ("never", ("/a", "/b"), True)
    assert {key.env for key in SETTINGS} >= set(environ)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "policy:\n  fail_on: sometimes\n",
            "policy.fail_on must be one of gpu-unusable, error, never (got 'sometimes')",
        ),
        ("policy:\n  fail_closed: 1\n", "policy.fail_closed must be true or false"),
        ("cdi:\n  spec_dirs: [relative]\n", "cdi.spec_dirs entry 'relative' is not an absolute path"),
        (
            "cdi:\n  spec_dir: [/x]\n",
            "unknown key 'cdi.spec_dir' (known: annotation_prefixes, spec_dirs, visible_devices_env)",
        ),
        ("runtimes: {}\n", "unknown key 'runtimes' (known: cdi, driver_roots, lint, log, policy, runtime)"),
        ("log: [1]\n", "log must be a mapping"),
        ("log:\n  file: relative.log\n", "log.file must be an absolute path, or empty for none"),
        ("- a\n", "expected a mapping at the top level"),
        ("policy:\n\tfail_on: error\n", "not valid YAML"),
    ],
)
def test_errors_name_the_key(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_settings(_file(tmp_path, text), {})
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_environment_errors_name_the_variable() -> None:
    with pytest.raises(
        ConfigError, match=r"NVIDIA_OCI_HOOK_POLICY_DEVICE_CONFLICT: policy\.device_conflict must be one of"
    ):
        load_settings("/dev/null", {"NVIDIA_OCI_HOOK_POLICY_DEVICE_CONFLICT": "last"})


def test_lenient_loading_keeps_what_it_can(tmp_path: Path) -> None:
    environ = {"NVIDIA_OCI_HOOK_RUNTIME_LOW_LEVEL": "crun", "NVIDIA_OCI_HOOK_LOG_SYSLOG": "maybe"}
    settings, problems = load_settings_leniently(_file(tmp_path, "policy: [\n"), environ)
    assert settings.runtime_low_level == ("crun",) and settings.log_syslog is True
    assert len(problems) == 2 and "not valid YAML" in problems[0] and "NVIDIA_OCI_HOOK_LOG_SYSLOG" in problems[1]


def test_yaml_outside_the_lean_subset_still_reads(tmp_path: Path) -> None:
    text = "roots: &roots [/, /opt/driver]\ndriver_roots: *roots\n"
    with pytest.raises(ConfigError, match="unknown key 'roots'"):
        load_settings(_file(tmp_path, text), {})  # read by PyYAML (an anchor), then checked like any other


def test_replace_leaves_the_original() -> None:
    settings = Settings()
    changed = settings.replace(driver_roots=("/x",))
    assert changed.driver_roots == ("/x",) and settings.driver_roots == ("/", "/run/nvidia/driver")
