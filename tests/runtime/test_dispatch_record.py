"""The settings Python takes from the record instead of parsing the configuration: only where the record is its
own and the file is still the one it recorded; otherwise the file is read, and recorded again."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from nvidia_oci_hook import config as config_module
from nvidia_oci_hook.config import SETTINGS, Settings, load_settings_leniently
from nvidia_oci_hook.runtime import dispatch
from tests.runtime.support import write_config


def _values(settings: Settings) -> dict[str, object]:
    return {key.attribute: getattr(settings, key.attribute) for key in SETTINGS}


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """(the state directory, a settled configuration file that sets a value of every kind)."""
    for key in SETTINGS:
        monkeypatch.delenv(key.env, raising=False)
    monkeypatch.delenv(config_module.CONFIG_ENV, raising=False)
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    config = write_config(
        tmp_path / "config.yaml",
        driver_roots=["/", "/opt/driver"],
        runtime={"low_level": ["crun"]},
        policy={"fail_closed": True, "fail_on": "error"},
        cdi={"spec_dirs": ["/etc/cdi"], "annotation_prefixes": ["cdi.k8s.io/", "example.com/"]},
        log={"file": "", "syslog": False},
    )
    stamp = time.time() - 60
    os.utime(config, (stamp, stamp))
    return state, config


def test_a_settled_file_is_parsed_once(node: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    state, config = node
    read, problems = dispatch.load(str(config), str(state))
    assert problems == [] and read.runtime_low_level == ("crun",) and read.policy_fail_closed

    # From now on the file is not parsed: a parse would fail.
    def refuse(*_args: object) -> None:
        raise AssertionError("the configuration was parsed again")

    monkeypatch.setattr(config_module, "load_settings_leniently", refuse)
    again, problems = dispatch.load(str(config), str(state))
    assert problems == [] and _values(again) == _values(read) == _values(load_settings_leniently(str(config))[0])


@pytest.mark.parametrize(
    "spoil",
    ["modified", "replaced with the same time", "edited keeping the time", "a setting in the environment",
     "another file", "a directory others can write", "a link for the record", "not JSON", "too large",
     "removed"],
)  # fmt: skip
def test_the_record_is_not_trusted_where_it_could_be_stale(node: tuple[Path, Path], spoil: str) -> None:
    state, config = node
    dispatch.load(str(config), str(state))
    assert dispatch.recorded_settings(str(state), str(config), True, {}) is not None, "trusted before it was spoiled"
    record = state / dispatch.RECORD_FILE
    environ: dict[str, str] = {}
    file = str(config)
    named = True
    stamp = config.stat().st_mtime_ns
    if spoil == "modified":
        os.utime(config, ns=(stamp + 1, stamp + 1))
    elif spoil == "replaced with the same time":
        replacement = config.with_suffix(".new")
        replacement.write_bytes(config.read_bytes())
        os.utime(replacement, ns=(stamp, stamp))
        replacement.rename(config)
    elif spoil == "edited keeping the time":
        config.write_text(config.read_text() + "# edited\n")
        os.utime(config, ns=(stamp, stamp))
    elif spoil == "a setting in the environment":
        environ["NVIDIA_OCI_HOOK_LOG_SYSLOG"] = "true"
    elif spoil == "another file":
        file = str(config.with_name("other.yaml"))
        config.rename(file)
    elif spoil == "a directory others can write":
        state.chmod(0o777)
    elif spoil == "a link for the record":
        moved = state / "elsewhere"
        record.rename(moved)
        record.symlink_to(moved)
    elif spoil == "not JSON":
        lines = record.read_text().split("\n")
        lines[7] = lines[7][:-1]
        record.write_text("\n".join(lines))
    elif spoil == "too large":
        record.write_text(record.read_text() + " " * (1 << 16))
    elif spoil == "removed":
        config.unlink()
    assert dispatch.recorded_settings(str(state), file, named, environ) is None


def test_an_absent_default_file_is_recorded_but_never_stands_for_a_named_one(node: tuple[Path, Path]) -> None:
    state, config = node
    missing = str(config.with_name("missing.yaml"))
    dispatch.remember(str(state), missing, None, Settings(), [], {})
    recorded = dispatch.recorded_settings(str(state), missing, False, {})
    assert recorded is not None and _values(recorded) == _values(Settings())
    assert dispatch.recorded_settings(str(state), missing, True, {}) is None


@pytest.mark.root
def test_a_record_of_another_user_is_not_trusted(node: tuple[Path, Path], as_root: None) -> None:
    state, config = node
    dispatch.load(str(config), str(state))
    assert dispatch.recorded_settings(str(state), str(config), True, {}) is not None
    os.chown(state / dispatch.RECORD_FILE, 65534, 65534)
    assert dispatch.recorded_settings(str(state), str(config), True, {}) is None


def test_a_changed_file_is_read_and_recorded_again(node: tuple[Path, Path]) -> None:
    state, config = node
    dispatch.load(str(config), str(state))
    write_config(config, runtime={"low_level": ["runc"]})
    stamp = time.time() - 30
    os.utime(config, (stamp, stamp))
    read, _ = dispatch.load(str(config), str(state))
    assert read.runtime_low_level == ("runc",) and read.policy_fail_closed is False
    recorded = dispatch.recorded_settings(str(state), str(config), True, {})
    assert recorded is not None and _values(recorded) == _values(read)
