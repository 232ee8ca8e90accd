"""The shipped alerting rules under Debian's promtool: `check rules`, and `test rules` on a fleet of the seeds'
broken nodes and healthy ones over an hour, each alert expected to fire exactly where and when it should.

The input series are what doctor --format prometheus writes for each fake node (tests/fleet/nodes/*.prom; the
last test holds those files to doctor's real output), spread over time as the 5-minute timer writes them. The
expected annotations are the rules' templates filled in here, so promtool's rendering is checked against an
independent one, and the seed 003 summary once more against its literal text.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import pytest
import yaml

from tests.fleet.nodes import NODES, PER_RUN, SNAPSHOTS, doctor, samples, with_labels
from tests.helpers import FakeHost

RULES = Path(__file__).parents[2] / "packaging/prometheus/nvidia-oci-hook.rules.yml"
PROMTOOL = "/usr/bin/promtool"
MINUTES = 60  # the series cover minutes 0..60, one sample a minute
RUN_EVERY = 5  # minutes, as the timer runs doctor
TIMESTAMP = "nvidia_oci_hook_last_run_timestamp_seconds"
EVAL_TIMES = (1, 4, 7, 9, 25, 27, 45)  # minutes: before and after each `for:` and the 900 s of staleness


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    if shutil.which(PROMTOOL) is None:
        pytest.fail(f"{PROMTOOL} is missing (apt-get install prometheus; scripts/setup test installs it)")
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=120, check=False)


def rules() -> dict[str, dict[str, Any]]:
    document = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    return {rule["alert"]: rule for group in document["groups"] for rule in group["rules"]}


@dataclass
class Node:
    """One node of the fleet: the doctor metrics it serves, and what happens to them over the hour."""

    snapshot: str
    changed: dict[str, float] = field(default_factory=dict)  # series -> value, set by hand where no seed has it
    first_run_only: dict[str, float] = field(default_factory=dict)  # values of the first run (minutes 0-4) alone
    timer_stops_at: Optional[int] = None  # the minute of the last run; the file stays and is served on
    file_gone_at: Optional[int] = None  # the minute node_exporter stops serving the file
    exporter_down_at: Optional[int] = None  # the minute node_exporter stops answering (up 0)


FLEET = {
    "seed-003:9100": Node("seed-003"),
    "seed-000:9100": Node("seed-000"),
    "healthy:9100": Node("healthy"),
    "ambiguous:9100": Node("ambiguous"),
    "driver-upgraded:9100": Node("driver-upgraded"),
    # No seed has these: the healthy node with the counts a broken one would have.
    "gpu-lost:9100": Node(
        "healthy",
        {"nvidia_oci_hook_containers_gpu_access_lost": 1, 'nvidia_oci_hook_check_status{check="gpu-access"}': 2},
    ),
    "cdi-names:9100": Node("healthy", {'nvidia_oci_hook_cdi_unresolvable_names{engine="cri-o"}': 1}),
    # Seed 000's window: one run catches the validator between deleting and rewriting its markers.
    "validating:9100": Node(
        "healthy",
        first_run_only={
            "nvidia_oci_hook_validation_markers_contradicting": 1,
            'nvidia_oci_hook_check_status{check="validation-markers"}': 2,
        },
    ),
    "stuck:9100": Node("healthy", timer_stops_at=10),
    "gone:9100": Node("healthy", file_gone_at=11),
    "down:9100": Node("healthy", file_gone_at=11, exporter_down_at=11),
}

# (alert, instance, extra labels) -> the first minute it fires; it then fires to the end. Nothing else fires:
# not the healthy node, not the validator's window, not a node whose node_exporter is down, not the
# engine-configs errors (lint --node) of seeds 000 and 003, which repeat the problems alerted on.
FIRES: dict[tuple[str, str, tuple[tuple[str, str], ...]], int] = {
    ("NvidiaOciHookStrayDeviceNodes", "seed-003:9100", ()): 0,
    ("NvidiaOciHookValidationMarkers", "seed-000:9100", ()): 8,
    ("NvidiaOciHookCdiSpecsUnreconciled", "seed-000:9100", ()): 8,
    ("NvidiaOciHookCheckError", "ambiguous:9100", (("check", "driver-root"),)): 8,
    ("NvidiaOciHookDriverVersionMismatch", "driver-upgraded:9100", ()): 8,
    ("NvidiaOciHookGpuAccessLost", "gpu-lost:9100", ()): 0,
    ("NvidiaOciHookCdiNamesUnresolvable", "cdi-names:9100", (("engine", "cri-o"),)): 8,
    ("NvidiaOciHookMetricsStale", "stuck:9100", ()): 26,  # 960 s after its last run at minute 10
    ("NvidiaOciHookMetricsAbsent", "gone:9100", ()): 26,  # 15 minutes after the series vanished at 11
}


def series_values(node: Node) -> dict[str, list[str]]:
    """Each series of the node, as promtool's input_series values: one token a minute."""
    base = samples((SNAPSHOTS / f"{node.snapshot}.prom").read_text())
    base.update(node.changed)
    values: dict[str, list[str]] = {}
    for minute in range(MINUTES + 1):
        last_run = minute - minute % RUN_EVERY
        if node.timer_stops_at is not None:
            last_run = min(last_run, node.timer_stops_at)
        now = dict(base)
        if last_run == 0:
            now.update(node.first_run_only)
        now[TIMESTAMP] = last_run * 60.0
        gone = node.file_gone_at is not None and minute >= node.file_gone_at
        for key, value in now.items():
            # Prometheus marks a series stale at the first scrape without it, as promtool's "stale" does.
            token = ("stale" if minute == node.file_gone_at else "_") if gone else repr(value)
            values.setdefault(key, []).append(token)
        down = node.exporter_down_at is not None and minute >= node.exporter_down_at
        values.setdefault("up", []).append("0" if down else "1")
    return values


def fill(template: str, labels: dict[str, str], value: float) -> str:
    """The rules' templates, filled in: only these constructs are used in them."""
    if "humanizeDuration" in template:
        assert 60 <= value < 3600 and value.is_integer()
        template = template.replace("{{ $value | humanizeDuration }}", f"{int(value) // 60}m {int(value) % 60}s")
    text = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda match: labels[match[1]], template)
    assert value.is_integer()
    text = text.replace("{{ $value }}", str(int(value)))
    assert "{{" not in text, text
    return text


def alert_value(alert: str, node: Node, minute: int) -> float:
    values = series_values(node)
    count = {
        "NvidiaOciHookStrayDeviceNodes": "nvidia_oci_hook_stray_device_nodes",
        "NvidiaOciHookValidationMarkers": "nvidia_oci_hook_validation_markers_contradicting",
        "NvidiaOciHookCdiSpecsUnreconciled": "nvidia_oci_hook_cdi_specs_unreconciled",
        "NvidiaOciHookGpuAccessLost": "nvidia_oci_hook_containers_gpu_access_lost",
        "NvidiaOciHookCdiNamesUnresolvable": 'nvidia_oci_hook_cdi_unresolvable_names{engine="cri-o"}',
        "NvidiaOciHookCheckError": 'nvidia_oci_hook_check_status{check="driver-root"}',
        "NvidiaOciHookDriverVersionMismatch": "nvidia_oci_hook_driver_version_mismatches",
    }
    if alert == "NvidiaOciHookMetricsStale":
        return minute * 60.0 - float(values[TIMESTAMP][minute])
    if alert == "NvidiaOciHookMetricsAbsent":
        return max(float(token) for token in values[TIMESTAMP] if token not in ("_", "stale"))
    return float(values[count[alert]][minute])


def unit_tests(fires: dict[tuple[str, str, tuple[tuple[str, str], ...]], int]) -> dict[str, Any]:
    """promtool's test file: the fleet's series, and at each time for each alert the exact list that fires."""
    shipped = rules()
    input_series = [
        {"series": with_labels(key, instance=instance, job="node"), "values": " ".join(tokens)}
        for instance, node in FLEET.items()
        for key, tokens in series_values(node).items()
    ]
    checks = []
    for minute in EVAL_TIMES:
        for alert, rule in shipped.items():
            expected = []
            for (name, instance, extra), first in sorted(fires.items()):
                if name != alert or minute < first:
                    continue
                labels = {"instance": instance, "job": "node", **dict(extra)}
                value = alert_value(alert, FLEET[instance], minute)
                expected.append(
                    {
                        "exp_labels": {**labels, **rule["labels"]},
                        "exp_annotations": {
                            key: fill(text, labels, value) for key, text in rule["annotations"].items()
                        },
                    }
                )
            checks.append({"eval_time": f"{minute}m", "alertname": alert, "exp_alerts": expected})
    return {
        "rule_files": [str(RULES)],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": input_series, "alert_rule_test": checks}],
    }


def test_promtool_check_rules() -> None:
    result = promtool("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules())} rules found" in result.stdout


def test_every_alert_names_the_node_and_its_fix() -> None:
    shipped = rules()
    assert set(shipped) == {name for name, _, _ in FIRES}, "every alert has its case in FIRES"
    for name, rule in shipped.items():
        assert rule["labels"]["severity"] in ("critical", "warning"), name
        assert "for" in rule, f"{name}: say how long it waits"
        summary = rule["annotations"]["summary"]
        assert summary.startswith("{{ $labels.instance }}: ") and "; fix: " in summary, name
        assert re.search(r"nvidia-oci-hook|systemctl", rule["annotations"]["description"]), name


def test_promtool_test_rules_on_the_seeds_fleet(tmp_path: Path) -> None:
    document = unit_tests(FIRES)
    seed_003 = document["tests"][0]["alert_rule_test"][0]
    assert seed_003["alertname"] == "NvidiaOciHookStrayDeviceNodes" and seed_003["eval_time"] == "1m"
    assert seed_003["exp_alerts"][0]["exp_annotations"]["summary"] == (
        "seed-003:9100: 2 stray /dev/nvidia* node(s) on the host while the driver's are under the driver root: cri-o "
        "refuses privileged GPU containers; fix: nvidia-oci-hook doctor --fix"
    )
    path = tmp_path / "rules_test.yml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    result = promtool("test", "rules", str(path))
    assert result.returncode == 0 and "SUCCESS" in result.stdout, f"{path}:\n{result.stdout}{result.stderr}"


def test_promtool_test_rules_fails_on_a_wrong_expectation(tmp_path: Path) -> None:
    """The harness can fail: seed 003's alert expected an hour late, and the healthy node expected to alert."""
    for fires in (
        {**FIRES, ("NvidiaOciHookStrayDeviceNodes", "seed-003:9100", ()): 60},
        {**FIRES, ("NvidiaOciHookStrayDeviceNodes", "healthy:9100", ()): 0},
    ):
        path = tmp_path / "wrong_test.yml"
        path.write_text(yaml.safe_dump(unit_tests(fires), sort_keys=False))
        result = promtool("test", "rules", str(path))
        output = result.stdout + result.stderr  # promtool reports a failure on stderr
        assert result.returncode == 1 and "FAILED" in output, output
        assert "alertname: NvidiaOciHookStrayDeviceNodes, time: 1m" in output


@pytest.mark.root
@pytest.mark.parametrize("name", sorted(NODES))
def test_the_fleets_series_are_what_doctor_writes(name: str, tmp_path: Path, as_root: None) -> None:
    host = NODES[name](FakeHost(tmp_path))
    result = doctor(host.root, "--format", "prometheus")
    assert result.stderr == "" and result.returncode in (0, 1), result.stderr
    written = samples(result.stdout)
    kept = samples((SNAPSHOTS / f"{name}.prom").read_text())
    for found in (written, kept):
        for key in PER_RUN:
            assert found.pop(key) > 0
        assert [found.pop(key) for key in list(found) if key.startswith("nvidia_oci_hook_build_info{")] == [1.0]
    assert written == kept, f"regenerate tests/fleet/nodes/{name}.prom from doctor --format prometheus"
