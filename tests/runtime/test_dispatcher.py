"""The sh dispatcher in front of the Python wrapper: the same scan of the arguments, the same low-level runtime,
and Python whenever the record it reads could be stale.

The dispatcher is written by the launcher code with a stand-in interpreter and stand-in runtimes that print how
they were run, so every test sees which program the dispatcher exec'd and with which arguments.
"""

from __future__ import annotations

import itertools
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

import pytest

from nvidia_oci_hook.config import Settings
from nvidia_oci_hook.launcher import dispatcher_text
from nvidia_oci_hook.runtime.dispatch import RECORD_FILE, file_identity, remember
from nvidia_oci_hook.runtime.wrapper import GLOBAL_VALUE_OPTIONS, find_runtime, parse_invocation

# Prints who it is and its arguments, NUL-separated, so that any byte an argument holds comes back as it was.
RECORDER = """#!/bin/sh
printf '%s\\0' {who} "$0" "$@"
"""
PATH_DIRS = "/usr/sbin:/usr/bin:/sbin:/bin"


class Dispatcher:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.state = directory / "state"
        self.state.mkdir(mode=0o700)
        self.config = directory / "config.yaml"
        self.bin = directory / "runtimes"
        self.bin.mkdir()
        self.interpreter = self._recorder(directory / "python3", "python")
        self.path = directory / "nvidia-oci-runtime"
        self.path.write_text(dispatcher_text(str(self.interpreter), ["/nowhere"], str(self.config), str(self.state)))
        self.path.chmod(0o755)

    def _recorder(self, path: Path, who: str) -> Path:
        path.write_text(RECORDER.format(who=who))
        path.chmod(0o755)
        return path

    def runtime(self, name: str, directory: Optional[Path] = None) -> Path:
        return self._recorder((directory or self.bin) / name, "runtime")

    def record(self, *names: str, present: bool = False) -> None:
        lines = [
            "present" if present else "absent",
            ":".join(names),
            "/run/nvidia/driver",
            "cdi.k8s.io/",
            "env",
            "fail-open",
            str(self.config),
        ]
        (self.state / RECORD_FILE).write_text("".join(line + "\n" for line in lines))
        if present:
            mtime = self.config.stat().st_mtime_ns
            os.utime(self.state / RECORD_FILE, ns=(mtime, mtime))

    def run(self, args: list[str], env: Optional[dict[str, str]] = None) -> tuple[str, list[str]]:
        environ = {"PATH": f"{self.bin}:{PATH_DIRS}"} if env is None else env
        result = subprocess.run(
            [str(self.path), *args], capture_output=True, env=environ, timeout=30, check=False, cwd=self.directory
        )
        assert result.returncode == 0, result.stderr
        who, program, *rest = result.stdout.split(b"\0")[:-1]
        arguments = [item.decode("utf-8", "surrogateescape") for item in rest]
        if who == b"python":
            assert arguments[:2] == ["-IS", "-c"], arguments
            assert arguments[3] == str(self.path)
            return "python", arguments[4:]
        return program.decode(), arguments


@pytest.fixture
def dispatcher(tmp_path: Path) -> Dispatcher:
    made = Dispatcher(tmp_path)
    made.runtime("test-runc")
    made.record("test-runc")
    return made


def _expected(dispatcher: Dispatcher, args: list[str]) -> tuple[str, list[str]]:
    stripped = args[1:] if args[:1] == ["--"] else args
    if parse_invocation(stripped).subcommand == "create":
        return "python", args
    return str(dispatcher.bin / "test-runc"), stripped


# Every shape of argument runc's and crun's command lines take, and some they do not.
VALUE_OPTIONS = sorted(GLOBAL_VALUE_OPTIONS)
TOKENS = [
    *[f"{dashes}{name}" for name in VALUE_OPTIONS for dashes in ("-", "--")],
    *[f"--{name}=/x" for name in VALUE_OPTIONS[:3]],
    "-log=", "---log", "--log==x", "--debug", "--systemd-cgroup", "-v", "--help", "--", "-", "", "---", "-=x",
    "create", "state", "start", "kill", "delete", "run", "exec", "ps", "spec", "list", "CREATE", "create=",
    "--bundle", "/bundle", "-b", "c1", "KILL", "9", "--force", "x y", "\n", "é", "*", "$HOME", "'", '"',
]  # fmt: skip


def _argument_lists() -> list[list[str]]:
    lists: list[list[str]] = [[]]
    lists += [[token] for token in TOKENS]
    lists += [[a, b] for a, b in itertools.product(TOKENS, ["create", "state", "--", "c1"])]
    lists += [["--", *rest] for rest in (["create"], ["--", "create"], ["--"], ["--root", "create", "x"])]
    generator = random.Random(20261201)
    lists += [[generator.choice(TOKENS) for _ in range(generator.randint(1, 7))] for _ in range(600)]
    # Engines' own shapes: global options, a subcommand, its options.
    globals_ = [token for token in TOKENS if token.startswith("-")] + ["/run/runc", "json", "/var/log/x"]
    subcommands = ["create", "create", "state", "start", "kill", "delete", "run"]
    lists += [
        [generator.choice(globals_) for _ in range(generator.randint(0, 4))]
        + [generator.choice(subcommands)]
        + [generator.choice(TOKENS) for _ in range(generator.randint(0, 3))]
        for _ in range(400)
    ]
    return lists


def test_the_scan_is_the_python_wrapper_s_on_every_argument_shape(dispatcher: Dispatcher) -> None:
    lists = _argument_lists()
    creates = 0
    for args in lists:
        expected = _expected(dispatcher, args)
        creates += expected[0] == "python"
        assert dispatcher.run(args) == expected, args
    # Both branches were taken many times: the comparison proves something either way.
    assert creates > 100 and len(lists) - creates > 500, creates


def test_a_long_hostile_argument_list_reaches_the_runtime_unchanged(dispatcher: Dispatcher) -> None:
    args = ["--root", "/run/runc", "state", *[chr(c) * 3 for c in range(1, 256) if c != 0], "x" * 100_000]
    assert dispatcher.run(args) == (str(dispatcher.bin / "test-runc"), args)


def _path_cases(tmp_path: Path, dispatcher: Dispatcher) -> list[tuple[tuple[str, ...], str]]:
    other = tmp_path / "other"
    other.mkdir()
    relative = tmp_path / "relative"
    relative.mkdir()
    dispatcher.runtime("test-crun", other)
    dispatcher.runtime("test-crun", relative)
    (tmp_path / "runc-not-executable").write_text("#!/bin/sh\n")
    (tmp_path / "adir").mkdir()
    # The dispatcher itself under a runtime's name is passed over, as the wrapper passes over itself.
    (other / "test-runc").symlink_to(dispatcher.path)
    return [
        (("test-runc",), f"{dispatcher.bin}:{PATH_DIRS}"),
        (("test-runc",), f"{other}:{dispatcher.bin}"),
        (("test-crun", "test-runc"), f"{dispatcher.bin}:{other}"),
        (("test-crun", "test-runc"), f"{dispatcher.bin}/:{other}/"),
        (("test-crun",), f"{dispatcher.bin}::relative"),
        (("test-crun",), f"{dispatcher.bin}:"),
        (("test-crun",), ""),
        (("missing", "adir", "runc-not-executable", "test-runc"), f"{tmp_path}:{dispatcher.bin}"),
        ((f"{other}/test-crun", "test-runc"), f"{dispatcher.bin}"),
        (("relative/test-crun", "test-runc"), f"{dispatcher.bin}"),
        (("nvidia-oci-runtime", "test-runc"), f"{tmp_path}:{dispatcher.bin}"),
    ]


def test_the_low_level_runtime_is_the_one_the_wrapper_finds(
    tmp_path: Path, dispatcher: Dispatcher, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The wrapper as the dispatcher starts it: its own path first, in the engine's working directory.
    monkeypatch.setattr(sys, "argv", [str(dispatcher.path)])
    monkeypatch.chdir(tmp_path)
    found = 0
    for names, search in _path_cases(tmp_path, dispatcher):
        dispatcher.record(*names)
        env = {"PATH": search} if search else {}
        expected = find_runtime(names, env)
        found += expected is not None
        program, args = dispatcher.run(["state", "c1"], env)
        assert expected is not None or program == "python", (names, search)
        if expected is not None:
            assert (program, args) == (expected, ["state", "c1"]), (names, search)
    assert found >= 9, found


def test_none_found_is_python_s_to_report(dispatcher: Dispatcher) -> None:
    dispatcher.record("no-such-runtime")
    assert dispatcher.run(["state", "c1"]) == ("python", ["state", "c1"])


@pytest.mark.parametrize(
    "spoil",
    [
        "no record",
        "record unreadable",
        "record of another kind",
        "no names",
        "record of another file",
        "configuration appeared",
        "configuration modified",
        "configuration older",
        "configuration removed",
        "config in the environment",
        "low level in the environment",
        "empty low level in the environment",
        "another setting in the environment",
        "record not root's",
    ],
)
@pytest.mark.root
def test_python_decides_whenever_the_record_could_be_stale(dispatcher: Dispatcher, spoil: str, as_root: None) -> None:
    record = dispatcher.state / RECORD_FILE
    env = {"PATH": f"{dispatcher.bin}:{PATH_DIRS}"}
    if spoil in ("configuration modified", "configuration older", "configuration removed"):
        dispatcher.config.write_text("runtime:\n  low_level: [test-runc]\n")
        os.utime(dispatcher.config, (time.time() - 60, time.time() - 60))
        dispatcher.record("test-runc", present=True)
        assert dispatcher.run(["state", "c1"], env)[0] != "python", "the record was valid before it was spoiled"
    else:
        assert dispatcher.run(["state", "c1"], env)[0] != "python", "the record was valid before it was spoiled"
    if spoil == "no record":
        record.unlink()
    elif spoil == "record unreadable":
        record.unlink()
        record.mkdir()
    elif spoil == "record of another kind":
        record.write_text("test-runc\n")
    elif spoil == "no names":
        record.write_text(f"absent\n\n/run/nvidia/driver\ncdi.k8s.io/\nenv\nfail-open\n{dispatcher.config}\n")
    elif spoil == "record of another file":
        record.write_text(record.read_text().replace(str(dispatcher.config), f"{dispatcher.config}.other"))
    elif spoil == "configuration appeared":
        dispatcher.config.write_text("runtime:\n  low_level: [test-crun]\n")
    elif spoil == "configuration modified":
        stamp = dispatcher.config.stat().st_mtime
        os.utime(dispatcher.config, (stamp + 1, stamp + 1))
    elif spoil == "configuration older":
        stamp = dispatcher.config.stat().st_mtime
        os.utime(dispatcher.config, (stamp - 1, stamp - 1))
    elif spoil == "configuration removed":
        dispatcher.config.unlink()
    elif spoil == "config in the environment":
        env["NVIDIA_OCI_HOOK_CONFIG"] = str(dispatcher.config)
    elif spoil == "low level in the environment":
        env["NVIDIA_OCI_HOOK_RUNTIME_LOW_LEVEL"] = "test-crun"
    elif spoil == "empty low level in the environment":
        env["NVIDIA_OCI_HOOK_RUNTIME_LOW_LEVEL"] = ""
    elif spoil == "another setting in the environment":
        env["NVIDIA_OCI_HOOK_POLICY_FAIL_ON"] = "never"
    elif spoil == "record not root's":
        os.chown(record, 65534, 65534)
    assert dispatcher.run(["state", "c1"], env) == ("python", ["state", "c1"])


def _remember(dispatcher: Dispatcher, before: Optional[tuple[int, int, int, int, int]], **values: object) -> None:
    problems = [str(values.pop("problem"))] if "problem" in values else []
    settings = Settings(**{"runtime_low_level": ("test-runc",), **values})
    remember(str(dispatcher.state), str(dispatcher.config), before, settings, problems, {})


def _lines_for_the_fronts(record: Path) -> str:
    return "".join(line + "\n" for line in record.read_text().split("\n")[:7])


def test_the_wrapper_records_what_the_dispatcher_reads(dispatcher: Dispatcher) -> None:
    record = dispatcher.state / RECORD_FILE
    record.unlink()
    _remember(dispatcher, None)
    assert _lines_for_the_fronts(record) == (
        f"absent\ntest-runc\n/run/nvidia/driver\ncdi.k8s.io/\nenv\nfail-open\n{dispatcher.config}\n"
    )
    assert dispatcher.run(["kill", "c1", "9"]) == (str(dispatcher.bin / "test-runc"), ["kill", "c1", "9"])

    dispatcher.config.write_text("runtime:\n  low_level: [test-crun, test-runc]\n")
    stamp = time.time() - 30
    os.utime(dispatcher.config, (stamp, stamp))
    identity = file_identity(str(dispatcher.config))
    _remember(
        dispatcher,
        identity,
        runtime_low_level=("test-crun", "test-runc"),
        driver_roots=("/", "/run/nvidia/driver", "/opt/driver"),
        cdi_annotation_prefixes=("cdi.k8s.io/", "example.com/cdi."),
        cdi_visible_devices_env=False,
        policy_fail_closed=True,
    )
    assert _lines_for_the_fronts(record) == (
        "present\ntest-crun:test-runc\n/run/nvidia/driver:/opt/driver\ncdi.k8s.io/:example.com/cdi.\n-\n"
        f"fail-closed\n{dispatcher.config}\n"
    )
    assert record.stat().st_mtime_ns == dispatcher.config.stat().st_mtime_ns
    assert dispatcher.run(["delete", "c1"]) == (str(dispatcher.bin / "test-runc"), ["delete", "c1"])
    dispatcher.runtime("test-crun")
    assert dispatcher.run(["delete", "c1"]) == (str(dispatcher.bin / "test-crun"), ["delete", "c1"])


@pytest.mark.parametrize(
    "reason",
    ["modified just now", "changed while read", "a path with a newline", "low level in the environment",
     "another setting in the environment", "a problem in the file", "a name with the separator",
     "a name with a newline", "an empty name", "a root a JSON escape could spell", "an empty prefix",
     "a directory others can write"],
)  # fmt: skip
def test_the_wrapper_records_nothing_it_cannot_vouch_for(dispatcher: Dispatcher, reason: str) -> None:
    record = dispatcher.state / RECORD_FILE
    record.unlink()
    dispatcher.config.write_text("runtime:\n  low_level: [test-runc]\n")
    stamp = time.time() - 30
    os.utime(dispatcher.config, (stamp, stamp))
    before = file_identity(str(dispatcher.config))
    values: dict[str, object] = {}
    environ: dict[str, str] = {}
    if reason == "modified just now":
        os.utime(dispatcher.config)
        before = file_identity(str(dispatcher.config))
    elif reason == "changed while read":
        dispatcher.config.write_text("runtime:\n  low_level: [test-crun, test-runc]\n")
        os.utime(dispatcher.config, (stamp, stamp))
    elif reason == "low level in the environment":
        environ["NVIDIA_OCI_HOOK_RUNTIME_LOW_LEVEL"] = "test-runc"
    elif reason == "another setting in the environment":
        environ["NVIDIA_OCI_HOOK_DRIVER_ROOTS"] = "/"
    elif reason == "a problem in the file":
        values["problem"] = "unknown key"
    elif reason == "a name with the separator":
        values["runtime_low_level"] = ("run:c",)
    elif reason == "a name with a newline":
        values["runtime_low_level"] = ("test-runc\nx",)
    elif reason == "an empty name":
        values["runtime_low_level"] = ("test-runc", "")
    elif reason == "a root a JSON escape could spell":
        values["driver_roots"] = ("/", "/run/<driver>")
    elif reason == "an empty prefix":
        values["cdi_annotation_prefixes"] = ("",)
    elif reason == "a directory others can write":
        dispatcher.state.chmod(0o777)
    problems = [str(values.pop("problem"))] if "problem" in values else []
    settings = Settings(**{"runtime_low_level": ("test-runc",), **values})
    config_file = str(dispatcher.config)
    if reason == "a path with a newline":
        config_file = str(dispatcher.directory / "config\n.yaml")
        os.link(dispatcher.config, config_file)
    remember(str(dispatcher.state), config_file, before, settings, problems, environ)
    assert not record.exists()
    os.utime(dispatcher.config, (stamp, stamp))
    _remember(dispatcher, file_identity(str(dispatcher.config)))
    assert record.exists() == (reason != "a directory others can write"), "the control case records"
