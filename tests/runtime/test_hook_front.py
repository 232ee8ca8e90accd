"""The sh front of `nvidia-oci-hook`: the guard of a container with nothing to guard ends there, with Python's
verdict; everything else reaches Python with its arguments and every byte of stdin.

The front is written by the launcher code with a stand-in interpreter that prints how it was run and what it
got on stdin, so every test sees whether Python would have started, and with what; the last tests run the real
interpreter behind it.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any, Optional

import pytest

from nvidia_oci_hook.config import Settings
from nvidia_oci_hook.engine.pipeline import plan
from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.launcher import hook_front_text
from nvidia_oci_hook.runtime.dispatch import RECORD_FILE, file_identity, remember
from tests.e2e.bundles import base_config
from tests.helpers import control_node
from tests.runtime.precheck_corpus import (
    DRIVER_ROOT,
    GPU_WITHOUT_CONTROL,
    compact,
    corpus_configs,
    crio_specs,
    go_indented,
)
from tests.runtime.support import counting_interpreter, python_starts, settled, write_config

REPOSITORY = Path(__file__).resolve().parents[2]
SETTINGS = Settings(runtime_low_level=("runc",))
# Prints who it is and its arguments, NUL-separated, then everything on its stdin.
RECORDER = """#!/bin/sh
printf '%s\\0' python "$0" "$@" stdin
exec cat
"""
CONFIG_ENV = "NVIDIA_OCI_HOOK_CONFIG"


class Ended:
    """The front decided in sh."""

    def __init__(self, returncode: int, output: bytes) -> None:
        self.returncode = returncode
        self.output = output


class Started:
    """The front started Python: its arguments after the front's own path, and what it got on stdin."""

    def __init__(self, args: list[str], stdin: bytes) -> None:
        self.args = args
        self.stdin = stdin


class HookFront:
    def __init__(self, directory: Path, interpreter: Optional[Path] = None) -> None:
        self.directory = directory
        self.state = directory / "state"
        self.state.mkdir(mode=0o700)
        self.config = settled(write_config(directory / "config.yaml", runtime={"low_level": ["runc"]}))
        if interpreter is None:
            interpreter = directory / "python3"
            interpreter.write_text(RECORDER)
            interpreter.chmod(0o755)
        self.path = directory / "nvidia-oci-hook"
        self.path.write_text(hook_front_text(str(interpreter), [str(REPOSITORY)], str(self.state)))
        self.path.chmod(0o755)
        self.env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", CONFIG_ENV: str(self.config)}

    def remember(self, settings: Settings = SETTINGS) -> None:
        remember(str(self.state), str(self.config), file_identity(str(self.config)), settings, [], {})
        assert (self.state / RECORD_FILE).exists()

    def run(
        self, args: list[str], stdin: bytes, env: Optional[dict[str, str]] = None
    ) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [str(self.path), *args], input=stdin, capture_output=True, env=self.env if env is None else env, timeout=30
        )

    def decide(self, args: list[str], stdin: bytes, env: Optional[dict[str, str]] = None) -> Ended | Started:
        result = self.run(args, stdin, env)
        if not result.stdout.startswith(b"python\0"):
            return Ended(result.returncode, result.stdout + result.stderr)
        assert result.returncode == 0, result.stderr
        parts = result.stdout.split(b"\0")
        stdin_at = parts.index(b"stdin")
        arguments = [item.decode("utf-8", "surrogateescape") for item in parts[2:stdin_at]]
        assert arguments[:2] == ["-IS", "-c"] and arguments[3] == str(self.path), arguments
        return Started(arguments[4:], b"\0".join(parts[stdin_at + 1 :]))


def go_json(value: Any) -> str:
    """JSON as Go's encoding/json writes it (runc's state): compact, with <, >, & and line separators escaped."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    for char in "<>&\u2028\u2029":
        text = text.replace(char, f"\\u{ord(char):04x}")
    return text


def runc_state(bundle: Path, config: Any) -> str:
    state: dict[str, Any] = {"ociVersion": "1.0.2", "id": "c1", "status": "creating", "pid": 4242}
    state["bundle"] = str(bundle)
    annotations = config.get("annotations") if isinstance(config, dict) else None
    if isinstance(annotations, dict) and annotations:
        state["annotations"] = annotations
    return go_json(state)


@pytest.fixture
def front(tmp_path: Path) -> HookFront:
    made = HookFront(tmp_path)
    assert not os.path.exists(DRIVER_ROOT), f"{DRIVER_ROOT} exists on this machine: the pre-check would never run"
    made.remember()
    return made


def _plain_bundle(directory: Path) -> Path:
    bundle = directory / "plain"
    bundle.mkdir()
    (bundle / "config.json").write_text(compact(base_config(Path("/nonexistent-rootfs"), "true")))
    return bundle


def test_the_corpus_writes_configs_as_crio_does() -> None:
    """The cri-o form of every config is what cri-o 1.37 itself writes: its specs, parsed and written again, are
    the same bytes."""
    specs = crio_specs()
    assert len(specs) == 6
    for name, raw in specs:
        assert go_indented(json.loads(raw)).encode("utf-8") == raw, name
        assert b'\n\t"ociVersion": "1.3.0"' in raw, name
    assert b"\\u003c" in dict(specs)["cri-o 1.37 annotated"]


@pytest.mark.runtime
@pytest.mark.root  # the corpus is generated with the real runtimes
def test_the_guard_ends_in_sh_only_where_python_would_find_nothing(front: HookFront, tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    host = HostView("/")
    ended = started = 0
    ended_by_form: dict[str, int] = {}
    differ: list[str] = []
    captured = {name for name, _raw in crio_specs()}
    crio_ended: set[str] = set()
    for index, (label, config, forms) in enumerate(corpus_configs()):
        ends_in_sh: dict[str, bool] = {}
        nothing = not plan(config, host, SETTINGS).unapplied()
        stage = ("prestart", "createRuntime")[index % 2]
        state = runc_state(bundle, config)
        for form, text in forms:
            (bundle / "config.json").write_bytes(text)
            decided = front.decide(["hook", stage], state.encode("utf-8"))
            ends_in_sh[form] = isinstance(decided, Ended)
            if isinstance(decided, Ended):
                assert nothing, f"{label} ({form}): the front passed a container the guard would look at"
                assert (decided.returncode, decided.output) == (0, b""), (label, form)
                ended += 1
                ended_by_form[form] = ended_by_form.get(form, 0) + 1
            else:
                # Python gets the whole state, as the argument that stands for stdin.
                assert decided.args == [state, "hook", stage] and decided.stdin == b"", (label, form)
                started += 1
        if "cri-o" in ends_in_sh and ends_in_sh["cri-o"] != ends_in_sh["compact"]:
            differ.append(label)
        if label in captured and ends_in_sh["cri-o"]:
            crio_ended.add(label)
    # Both ways, many times: the comparison proves something. cri-o's tab-indented text ends in sh exactly where
    # the compact text of the same config does.
    assert ended > 300 and started > 1000, (ended, started)
    assert ended_by_form.get("cri-o", 0) > 30 and not differ, (ended_by_form, differ[:5])
    # What cri-o 1.37 wrote for containers with nothing to guard ends in sh; a device, or a privileged pod's host
    # devices, are Python's.
    assert sorted(crio_ended) == ["cri-o 1.37 annotated", "cri-o 1.37 plain"], crio_ended


@pytest.mark.runtime
@pytest.mark.root  # the corpus is generated with the real runtimes
def test_a_gpu_without_its_control_node_reaches_the_guard(front: HookFront, tmp_path: Path) -> None:
    """The plan refuses it with nothing to edit: in every text the front must leave it to Python."""
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    host = HostView("/")
    texts = 0
    for label, config, forms in corpus_configs():
        if not label.endswith(GPU_WITHOUT_CONTROL):
            continue
        assert "GPU001" in [finding.code for finding in plan(config, host, SETTINGS).unapplied()], label
        state = runc_state(bundle, config)
        for form, text in forms:
            (bundle / "config.json").write_bytes(text)
            assert isinstance(front.decide(["hook", "createRuntime"], state.encode("utf-8")), Started), (label, form)
            texts += 1
    assert texts > 40, texts


def test_states_it_cannot_be_sure_of_reach_python_whole(front: HookFront, tmp_path: Path) -> None:
    bundle = _plain_bundle(tmp_path)
    plain = runc_state(bundle, {})
    control = front.decide(["hook", "prestart"], plain.encode())
    assert isinstance(control, Ended) and control.returncode == 0, "the plain state ends in sh"
    assert isinstance(front.decide(["hook", "prestart"], (plain + "\n").encode()), Ended)
    # An engine's annotations come last and may hold escapes (cri-o's are JSON); they end in sh like the rest.
    annotated = runc_state(bundle, {"annotations": {"io.kubernetes.cri-o.Metadata": '{"name":"c1"}', "n": "<b>"}})
    assert "\\u003c" in annotated and '\\"' in annotated
    decided = front.decide(["hook", "createRuntime"], annotated.encode())
    assert isinstance(decided, Ended) and decided.returncode == 0
    whole_line = {
        "an escape before the annotations": plain.replace('"id":"c1"', '"id":"c\\u00311"'),
        "a letter escaped in the annotations": runc_state(bundle, {"annotations": {"n": "x"}}).replace(
            '"n":"x"', '"n":"\\u0078"'
        ),
        "a bundle key spelled with escapes after the annotations": plain[:-1]
        + ',"annotations":{"n":"x"},"\\u0062undle":"/elsewhere"}',
        "a second bundle": plain[:-1] + ',"annotations":{"bundle":"/elsewhere"}}',
        "a bundle key spelled otherwise": plain.replace('"bundle":', '"bundle" :'),
        "a relative bundle": plain.replace(str(bundle), "plain"),
        "an array": f"[{plain}]",
        "not closed": plain[:-1],
        "empty": "",
        "a bundle whose config is missing": plain.replace(str(bundle), str(tmp_path / "missing")),
    }
    for label, state in whole_line.items():
        for ending in ("", "\n"):
            decided = front.decide(["hook", "createRuntime"], (state + ending).encode())
            assert isinstance(decided, Started), label
            assert decided.args == [state + ending, "hook", "createRuntime"] and decided.stdin == b"", label
    # More than a line, or more than an argument may hold: Python reads every byte from stdin.
    piped = {
        "indented": json.dumps(json.loads(plain), indent=2).encode(),
        "two lines and no end": (plain + "\n" + plain).encode(),
        "a line and a blank one": (plain + "\n\n").encode(),
        # An escape sends it to Python; its size, to Python's stdin.
        "larger than an argument": runc_state(bundle, {"annotations": {"x": "y" * 70_000}})
        .encode()
        .replace(b"y", b"\\u0079", 1),
        "bytes that are not UTF-8": plain.encode().replace(b"creating", b"cr\xffating") + b"\n" + b"\xfe" * 10,
    }
    for label, stdin in piped.items():
        decided = front.decide(["hook", "prestart"], stdin)
        assert isinstance(decided, Started), label
        assert decided.args == ["hook", "prestart"] and decided.stdin == stdin, label
    # The shell reads a state without its NUL bytes. With one the state is not JSON, which Python lets pass too
    # (policy.fail_closed sends every state to Python); where Python must look, it gets the state without them.
    with_nul = plain.replace("creating", "cre\0ating").encode()
    decided = front.decide(["hook", "prestart"], with_nul)
    assert isinstance(decided, Ended) and decided.returncode == 0
    (bundle / "config.json").write_text(compact({"linux": {"devices": [{"path": "/dev/nvidia0"}]}}))
    decided = front.decide(["hook", "prestart"], with_nul)
    assert isinstance(decided, Started) and decided.args == [plain, "hook", "prestart"]


def test_every_other_command_reaches_python_untouched(front: HookFront) -> None:
    stdin = b'{"bundle":"/x"}\n\0tail'
    for args in [
        [],
        ["--version"],
        ["lint", "config.json"],
        ["hook"],
        ["hook", "precreate"],
        ["hook", "poststop"],
        ["hook", "prestart", "extra"],
        ["--config", "/etc/x.yaml", "hook", "prestart"],
        ["hook", "prestart\n"],
        ["doctor", "--format", "json", "é", ""],
    ]:
        decided = front.decide(args, stdin)
        assert isinstance(decided, Started), args
        assert decided.args == args and decided.stdin == stdin, args


@pytest.mark.parametrize(
    "spoil",
    ["fail-closed", "a setting in the environment", "named configuration missing", "the default configuration",
     "configuration modified", "record of another file", "no record"],
)  # fmt: skip
def test_python_decides_whenever_the_record_could_be_stale(front: HookFront, tmp_path: Path, spoil: str) -> None:
    stdin = runc_state(_plain_bundle(tmp_path), {}).encode()
    assert isinstance(front.decide(["hook", "prestart"], stdin), Ended), "the record was valid before it was spoiled"
    env = dict(front.env)
    record = front.state / RECORD_FILE
    if spoil == "fail-closed":
        front.remember(Settings(runtime_low_level=("runc",), policy_fail_closed=True))
    elif spoil == "a setting in the environment":
        env["NVIDIA_OCI_HOOK_POLICY_FAIL_ON"] = "never"
    elif spoil == "named configuration missing":
        env[CONFIG_ENV] = str(tmp_path / "missing.yaml")
        record.write_text(record.read_text().replace(str(front.config), env[CONFIG_ENV]))
    elif spoil == "the default configuration":
        del env[CONFIG_ENV]
    elif spoil == "configuration modified":
        stamp = front.config.stat().st_mtime + 1
        os.utime(front.config, (stamp, stamp))
    elif spoil == "record of another file":
        record.write_text(record.read_text().replace(str(front.config), f"{front.config}.other"))
    elif spoil == "no record":
        record.unlink()
    decided = front.decide(["hook", "prestart"], stdin, env)
    assert isinstance(decided, Started) and decided.args == ["hook", "prestart"] and decided.stdin == stdin, spoil


def test_python_records_what_the_front_reads_and_still_refuses_what_it_must(tmp_path: Path) -> None:
    shim, starts = counting_interpreter(tmp_path)
    front = HookFront(tmp_path, shim)
    log = tmp_path / "hook.log"
    write_config(front.config, runtime={"low_level": ["runc"]}, log={"file": str(log), "syslog": False})
    stamp = time.time() - 60
    os.utime(front.config, (stamp, stamp))
    plain = runc_state(_plain_bundle(tmp_path), {})

    first = front.run(["hook", "prestart"], plain.encode())
    assert first.returncode == 0 and python_starts(starts) == 1, first.stderr
    assert f"\nfail-open\n{front.config}\n" in (front.state / RECORD_FILE).read_text()
    second = front.run(["hook", "prestart"], plain.encode())
    assert (second.returncode, second.stdout, second.stderr) == (0, b"", b"") and python_starts(starts) == 1

    gpu = tmp_path / "gpu"
    gpu.mkdir()
    config = base_config(Path("/nonexistent-rootfs"), "true")
    config["linux"]["devices"] = [{"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0}, control_node()]
    (gpu / "config.json").write_text(compact(config))
    # The state as an argument, and the state on stdin when it is too large for one.
    for state in (runc_state(gpu, config), runc_state(gpu, {"annotations": {"x": "y" * 70_000}})):
        refused = front.run(["hook", "createRuntime"], state.encode())
        assert refused.returncode == 1, refused.stderr
        lines = refused.stderr.decode().splitlines()
        assert len(lines) == 1 and lines[0].startswith("nvidia-oci-hook: refusing container c1: [DEV003]"), lines
    assert python_starts(starts) == 3
    assert [json.loads(line)["mode"] for line in log.read_text().splitlines()] == ["prestart", "prestart"]
