"""The real scrape: Debian's prometheus-node-exporter serves what doctor wrote for a fake seed-003 node from its
textfile directory, Debian's prometheus scrapes it every second with the shipped rules, the stray-nodes alert
fires, doctor --fix repairs the node, the metrics written again resolve it, and a removed file turns the
metrics-absent alert pending. The shipped rules are loaded unchanged: the alerts used here wait `for: 0m`, and the
15 minutes of NvidiaOciHookMetricsAbsent are seen as its pending state.

Both daemons listen on 127.0.0.1 only, every wait has a deadline, and the fixtures stop them (SIGTERM, then
SIGKILL), whatever the test's outcome.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, TypeVar

import pytest
import yaml

from tests.fleet.nodes import doctor, samples, seed_003_node
from tests.helpers import FakeHost

pytestmark = pytest.mark.root  # the fake node's device nodes (mknod)

RULES = Path(__file__).parents[2] / "packaging/prometheus/nvidia-oci-hook.rules.yml"
NODE_EXPORTER = "/usr/bin/prometheus-node-exporter"
PROMETHEUS = "/usr/bin/prometheus"
PROM_FILE = "nvidia-oci-hook.prom"
STRAY = "NvidiaOciHookStrayDeviceNodes"
T = TypeVar("T")


@dataclass
class Daemon:
    process: subprocess.Popen[bytes]
    url: str
    log: Path

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


def _need(binary: str) -> None:
    if not os.access(binary, os.X_OK):
        pytest.fail(f"{binary} is missing (scripts/setup test installs Debian's prometheus and node exporter)")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _get(url: str, timeout: float = 2) -> str:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return str(response.read().decode("utf-8"))
    except urllib.error.HTTPError as error:
        # An answer other than 2xx (a daemon not ready yet) keeps its connection until closed: unclosed, it is
        # a ResourceWarning whenever the collector happens to run, which the suite turns into a failure.
        error.close()
        raise


def wait_for(what: str, probe: Callable[[], Optional[T]], deadline_s: float, daemon: Daemon) -> T:
    """probe() until it returns something, for at most deadline_s; the daemon's exit or the deadline fail."""
    deadline = time.monotonic() + deadline_s
    last: object = None
    while time.monotonic() < deadline:
        if daemon.process.poll() is not None:
            pytest.fail(
                f"{daemon.process.args[0]} exited ({daemon.process.returncode}) waiting for {what}:\n{daemon.tail()}"
            )
        try:
            found = probe()
        except (OSError, urllib.error.URLError, ValueError) as exc:  # not listening yet, or not ready
            found, last = None, exc
        if found is not None:
            return found
        time.sleep(0.25)
    pytest.fail(f"no {what} within {deadline_s:.0f} s (last: {last!r}):\n{daemon.tail()}")


def _start(argv: list[str], log: Path, url: str, ready: str) -> Iterator[Daemon]:
    """Start, wait until url answers, yield, and stop it: SIGTERM, 10 s, then SIGKILL."""
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    daemon = Daemon(process, url, log)
    try:
        wait_for(f"answer on {url}{ready}", lambda: _get(url + ready), 30, daemon)
        yield daemon
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@pytest.fixture
def textfile_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "textfile"
    directory.mkdir()
    return directory


@pytest.fixture
def node_exporter(tmp_path: Path, textfile_dir: Path) -> Iterator[Daemon]:
    _need(NODE_EXPORTER)
    port = _free_port()
    argv = [
        NODE_EXPORTER,
        f"--web.listen-address=127.0.0.1:{port}",
        # The textfile collector alone: the test reads nothing else, and the other collectors read the machine.
        "--collector.disable-defaults",
        "--collector.textfile",
        f"--collector.textfile.directory={textfile_dir}",
    ]
    yield from _start(argv, tmp_path / "node-exporter.log", f"http://127.0.0.1:{port}", "/metrics")


@pytest.fixture
def prometheus(tmp_path: Path, node_exporter: Daemon) -> Iterator[Daemon]:
    _need(PROMETHEUS)
    port = _free_port()
    config = tmp_path / "prometheus.yml"
    target = node_exporter.url.removeprefix("http://")
    config.write_text(
        json.dumps(  # JSON is YAML: no YAML writer needed for a config this small
            {
                "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(RULES)],
                "scrape_configs": [{"job_name": "node", "static_configs": [{"targets": [target]}]}],
            }
        )
    )
    argv = [
        PROMETHEUS,
        f"--config.file={config}",
        f"--storage.tsdb.path={tmp_path / 'tsdb'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    yield from _start(argv, tmp_path / "prometheus.log", f"http://127.0.0.1:{port}", "/-/ready")


def shipped_rules() -> int:
    document = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    return sum(len(group["rules"]) for group in document["groups"])


def api(daemon: Daemon, path: str) -> Any:
    reply = json.loads(_get(daemon.url + path))
    assert reply["status"] == "success", reply
    return reply["data"]


def alerts(daemon: Daemon, name: str) -> list[dict[str, Any]]:
    return [alert for alert in api(daemon, "/api/v1/alerts")["alerts"] if alert["labels"]["alertname"] == name]


def write_metrics(host: FakeHost, textfile_dir: Path) -> dict[str, float]:
    """doctor --format prometheus --output, as the timer runs it; returns the samples it wrote."""
    result = doctor(host.root, "--format", "prometheus", "--output", str(textfile_dir / PROM_FILE))
    assert result.returncode in (0, 1) and result.stdout == "" and result.stderr == "", result
    return samples((textfile_dir / PROM_FILE).read_text())


def test_the_stray_nodes_alert_fires_and_resolves_through_a_real_scrape(
    tmp_path: Path, as_root: None, textfile_dir: Path, node_exporter: Daemon, prometheus: Daemon
) -> None:
    started = time.monotonic()
    timings: dict[str, float] = {}
    host = seed_003_node(FakeHost(tmp_path / "host"))
    written = write_metrics(host, textfile_dir)
    assert written["nvidia_oci_hook_stray_device_nodes"] == 2

    # node_exporter serves the file as written, and read it without error.
    scraped = samples(_get(node_exporter.url + "/metrics"))
    assert scraped["nvidia_oci_hook_stray_device_nodes"] == 2
    assert scraped['nvidia_oci_hook_check_status{check="stray-device-nodes"}'] == 2
    assert scraped['nvidia_oci_hook_driver_root_info{root="/run/nvidia/driver",status="found"}'] == 1
    assert scraped["node_textfile_scrape_error"] == 0
    assert scraped[f'node_textfile_mtime_seconds{{file="{textfile_dir / PROM_FILE}"}}'] > 0

    instance = node_exporter.url.removeprefix("http://")

    def firing() -> Optional[dict[str, Any]]:
        found = [alert for alert in alerts(prometheus, STRAY) if alert["state"] == "firing"]
        return found[0] if found else None

    alert = wait_for(f"{STRAY} firing", firing, 60, prometheus)
    timings["firing"] = time.monotonic() - started
    assert alert["labels"] == {"alertname": STRAY, "instance": instance, "job": "node", "severity": "critical"}
    assert alert["annotations"]["summary"].startswith(f"{instance}: 2 stray /dev/nvidia* node(s) on the host")
    assert alert["annotations"]["summary"].endswith("; fix: nvidia-oci-hook doctor --fix")
    # Every rule evaluates without error against the real series, and the lint --node errors that repeat the stray
    # nodes (engine-configs, NODE002) do not page a second time.
    groups = api(prometheus, "/api/v1/rules?type=alert")["groups"]
    health = {rule["name"]: (rule["health"], rule.get("lastError", "")) for group in groups for rule in group["rules"]}
    assert len(health) == shipped_rules() and all(state == ("ok", "") for state in health.values()), health
    assert written['nvidia_oci_hook_check_status{check="engine-configs"}'] == 2
    assert alerts(prometheus, "NvidiaOciHookCheckError") == []

    repaired = doctor(host.root, "--fix")
    assert "fixed: remove /dev/nvidia0" in repaired.stdout, repaired.stdout + repaired.stderr
    assert "fixed: remove /dev/nvidiactl" in repaired.stdout
    assert write_metrics(host, textfile_dir)["nvidia_oci_hook_stray_device_nodes"] == 0
    fixed = time.monotonic()
    wait_for(f"{STRAY} resolved", lambda: True if alerts(prometheus, STRAY) == [] else None, 60, prometheus)
    timings["resolved after the fix"] = time.monotonic() - fixed
    assert [alert["labels"]["alertname"] for alert in api(prometheus, "/api/v1/alerts")["alerts"]] == []

    # The file removed: the series vanish, and the metrics-absent alert waits its 15 minutes, pending.
    (textfile_dir / PROM_FILE).unlink()
    removed = time.monotonic()

    def pending() -> Optional[dict[str, Any]]:
        found = alerts(prometheus, "NvidiaOciHookMetricsAbsent")
        return found[0] if found else None

    absent = wait_for("NvidiaOciHookMetricsAbsent pending", pending, 60, prometheus)
    timings["absent pending after removal"] = time.monotonic() - removed
    assert absent["state"] == "pending" and absent["labels"]["instance"] == instance
    assert alerts(prometheus, "NvidiaOciHookMetricsStale") == []
    sys.stderr.write("\nprometheus e2e timings: " + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items()) + "\n")
