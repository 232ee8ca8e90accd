"""The dispatcher's pre-check on `create`: it execs the runtime without Python only for a config the full plan
leaves as it is, with nothing to log.

Held on every config of `tests/runtime/precheck_corpus.py`.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any, Optional

import pytest

from nvidia_oci_hook.config import Settings
from nvidia_oci_hook.engine.pipeline import plan
from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.runtime.dispatch import RECORD_FILE, remember
from tests.e2e.bundles import base_config
from tests.runtime.precheck_corpus import DRIVER_ROOT, GPU_WITHOUT_CONTROL, compact, corpus_configs
from tests.runtime.test_dispatcher import Dispatcher

pytestmark = [pytest.mark.runtime, pytest.mark.root]  # the corpus is generated with the real runtimes

SETTINGS = Settings(runtime_low_level=("test-runc",))


@pytest.fixture
def dispatcher(tmp_path: Path) -> Dispatcher:
    made = Dispatcher(tmp_path)
    made.runtime("test-runc")
    assert not os.path.exists(DRIVER_ROOT), f"{DRIVER_ROOT} exists on this machine: the pre-check would never run"
    remember(str(made.state), str(made.config), None, SETTINGS, [], {})
    assert (
        (made.state / RECORD_FILE)
        .read_text()
        .startswith(f"absent\ntest-runc\n/run/nvidia/driver\ncdi.k8s.io/\nenv\nfail-open\n{made.config}\n{{")
    )
    return made


def _hold_to_the_plan(dispatcher: Dispatcher, settings: Settings, bundle: Path) -> tuple[dict[str, int], int]:
    """Every config of the corpus through the dispatcher: where it skips Python, the plan must do nothing.
    Returns how many texts of each form skipped Python, and how many configs the plan acted on."""
    bundle.mkdir()
    host = HostView("/")
    skipped: dict[str, int] = {}
    reconciled = 0
    create = ["--root", "/run/test", "create", "--bundle", str(bundle), "c1"]
    for label, config, forms in corpus_configs():
        result = plan(config, host, settings)
        nothing = not (result.edits or result.findings)
        reconciled += not nothing
        skips: dict[str, bool] = {}
        for form, text in forms:
            (bundle / "config.json").write_bytes(text)
            who, args = dispatcher.run(create)
            skips[form] = who != "python"
            if who != "python":
                assert nothing, f"{label} ({form}): the dispatcher skipped a plan with {result.edits} {result.findings}"
                assert args == create
                skipped[form] = skipped.get(form, 0) + 1
        # cri-o's tab-indented text skips Python exactly where the compact text of the same config does.
        assert "cri-o" not in skips or skips["cri-o"] == skips["compact"], (label, skips)
    return skipped, reconciled


def test_a_create_skips_python_only_where_the_plan_does_nothing(dispatcher: Dispatcher, tmp_path: Path) -> None:
    skipped, reconciled = _hold_to_the_plan(dispatcher, SETTINGS, tmp_path / "bundle")
    # The pre-check proves something both ways: many plain configs skip Python, the plan acted on many others.
    assert skipped.get("compact", 0) > 300 and reconciled > 300, (skipped, reconciled)
    assert not [form for form in skipped if "escaped" in form], skipped
    assert skipped.get("cri-o", 0) > 30, skipped


def test_a_gpu_without_its_control_node_never_skips_python(dispatcher: Dispatcher, tmp_path: Path) -> None:
    """The plan refuses it with nothing to edit: in every text the dispatcher must leave it to Python."""
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    host = HostView("/")
    create = ["create", "--bundle", str(bundle), "c1"]
    texts = 0
    for label, config, forms in corpus_configs():
        if not label.endswith(GPU_WITHOUT_CONTROL):
            continue
        refusals = plan(config, host, SETTINGS).refusals(SETTINGS.policy_fail_on)
        assert "GPU001" in [finding.code for finding in refusals], label
        for form, text in forms:
            (bundle / "config.json").write_bytes(text)
            assert dispatcher.run(create)[0] == "python", (label, form)
            texts += 1
    assert texts > 40, texts


def _driver_root(directory: Path) -> Path:
    """A driver root with what the corpus's GPU mounts and hooks look for, where the host lacks it."""
    root = directory / "driver"
    for relative in ("usr/lib/libcuda.so.1", "usr/lib/x86_64-linux-gnu/libcuda.so.1", "usr/bin/nvidia-ctk"):
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text("")
    return root


def test_with_a_driver_root_on_the_node_only_configs_whose_paths_all_exist_skip_python(
    dispatcher: Dispatcher, tmp_path: Path
) -> None:
    settings = Settings(runtime_low_level=("test-runc",), driver_roots=("/", DRIVER_ROOT, str(_driver_root(tmp_path))))
    remember(str(dispatcher.state), str(dispatcher.config), None, settings, [], {})
    skipped, reconciled = _hold_to_the_plan(dispatcher, settings, tmp_path / "bundle")
    assert skipped.get("compact", 0) > 100 and reconciled > 300, (skipped, reconciled)


def test_a_driver_root_on_the_node_sends_a_config_with_a_missing_path_to_python(
    dispatcher: Dispatcher, tmp_path: Path
) -> None:
    root = _driver_root(tmp_path)
    settings = Settings(runtime_low_level=("test-runc",), driver_roots=("/", str(root)))
    remember(str(dispatcher.state), str(dispatcher.config), None, settings, [], {})
    (tmp_path / "rootfs").mkdir()
    config = base_config(tmp_path / "rootfs", "true")
    runtime = str(dispatcher.bin / "test-runc")

    def decided(value: Any, text: Optional[str] = None) -> str:
        (tmp_path / "plain").mkdir(exist_ok=True)
        (tmp_path / "plain/config.json").write_text(text or compact(value))
        return dispatcher.run(["create", "-b", "plain", "c1"])[0]

    assert decided(config) == runtime, "every path exists: nothing can move"
    # The space after each colon goes as cri-o's does; the one after each comma stays, and reads the same.
    assert decided(config, json.dumps(config)) == runtime, "the same config, spaced"
    assert decided(config, json.dumps(config, separators=(",", " : "))) == "python", "a key the patterns cannot read"
    missing_source = json.loads(json.dumps(config))
    missing_source["mounts"].append({"destination": "/l", "type": "bind", "source": "/usr/lib/libcuda.so.1"})
    missing_hook = json.loads(json.dumps(config))
    missing_hook["hooks"] = {"createRuntime": [{"path": "/usr/bin/nvidia-ctk"}]}
    for value in (missing_source, missing_hook):
        assert plan(value, HostView("/"), settings).edits, "the plan moves it to the root that has it"
        assert decided(value) == "python"
    shutil.rmtree(root)
    assert decided(missing_source) == runtime, "no driver root on the node: nothing can move"


def test_the_bundle_is_found_as_the_wrapper_finds_it(dispatcher: Dispatcher, tmp_path: Path) -> None:
    plain = json.dumps(base_config(Path("/nonexistent-rootfs"), "true"), separators=(",", ":"))
    gpu = json.loads(plain)
    gpu["linux"]["devices"] = [{"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0}]
    for where, text in (("plain", plain), ("gpu", json.dumps(gpu, separators=(",", ":")))):
        (tmp_path / where).mkdir()
        (tmp_path / where / "config.json").write_text(text)
    (tmp_path / "config.json").write_text(json.dumps(gpu, separators=(",", ":")))  # the working directory's
    # Relative bundles that awk would take for assignments were they its operands.
    for where, text in (("p=q", plain), ("g=h", json.dumps(gpu, separators=(",", ":")))):
        (tmp_path / where).mkdir()
        (tmp_path / where / "config.json").write_text(text)
    runtime = str(dispatcher.bin / "test-runc")
    cases = [
        (["create", "--bundle", "plain", "c1"], runtime),
        (["create", "-b", "plain", "c1"], runtime),
        (["create", "--bundle=plain", "c1"], runtime),
        (["create", "---b=plain", "c1"], runtime),
        (["--root", "/r", "create", "--pid-file", "--bundle", "-b", "plain", "c1"], runtime),
        (["create", "-b", "gpu", "-b", "plain", "c1"], runtime),
        (["create", "-b", "plain", "-b", "gpu", "c1"], "python"),
        (["create", "c1", "--bundle", "plain"], runtime),
        (["create", "--", "--bundle", "plain"], "python"),  # after "--" nothing is an option: the cwd's bundle
        (["create", "--bundle", "plain", "--bundle"], runtime),
        (["create", "--bundle=", "c1"], "python"),  # an empty bundle is the working directory
        (["create", "--bundle", "gpu", "c1"], "python"),
        (["create", "--console-socket", "-b", "gpu", "c1"], "python"),
        (["create", "--bundle", "missing", "c1"], "python"),
        (["--", "create", "-b", "plain", "c1"], runtime),
        (["create", "-b", "p=q", "c1"], runtime),
        (["create", "-b", "g=h", "c1"], "python"),
    ]
    for args, expected in cases:
        assert dispatcher.run(args)[0] == expected, args


def test_hostile_configs_are_decided_quickly_and_never_skip_a_plan(dispatcher: Dispatcher, tmp_path: Path) -> None:
    plain = compact(base_config(Path("/nonexistent-rootfs"), "true"))
    cases: dict[str, Any] = {
        "larger than the dispatcher reads": plain[:-1] + ',"x":"' + "a" * (1 << 21) + '"}',
        "NUL bytes": plain.replace('"true"', '"tr\x00ue"'),
        "not UTF-8": plain.encode("utf-8").replace(b"true", b"tr\xffue"),
        "100,000 escaped quotes": plain[:-1] + ',"x":"' + '\\"' * 100_000 + '"}',
        "unbalanced": plain[:-3],
        "500,000 line breaks": plain[:-1] + "\n" * 500_000 + "}",
        "100,000 keys a line break parts from their colons": plain[:-1] + ',"x"\n: 1' * 100_000 + "}",
        "a directory": None,
        "a character device": "/dev/zero",
    }
    host = HostView("/")
    decided: dict[str, str] = {}
    for index, (label, text) in enumerate(cases.items()):
        bundle = tmp_path / f"bundle-{index}"
        bundle.mkdir()
        config = bundle / "config.json"
        if text is None:
            config.mkdir()
        elif isinstance(text, str) and text.startswith("/dev/"):
            config.symlink_to(text)
        else:
            config.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
        started = time.monotonic()
        who, _ = dispatcher.run(["create", "--bundle", str(bundle), "c1"])
        assert time.monotonic() - started < 5, label
        decided[label] = who
        if who != "python":
            raw = config.read_bytes()
            try:
                value = json.loads(raw)
            except ValueError:
                continue  # the wrapper hands what it cannot read to the runtime unchanged, as the dispatcher did
            result = plan(value, host, SETTINGS)
            assert not (result.edits or result.findings), label
    for label in ("larger than the dispatcher reads", "a directory", "a character device"):
        assert decided[label] == "python", decided
    assert dispatcher.run(["create", "--bundle", str(tmp_path / "missing"), "c1"])[0] == "python"
