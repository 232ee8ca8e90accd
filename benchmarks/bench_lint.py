"""Lint benchmark: a config.json with 10,000 devices and 10,000 mounts, against start-up on a tiny one.

Usage: python benchmarks/bench_lint.py [--runs N] [--devices N] [--mounts N] [--env N]

The driver-layer cases give the config N environment entries, an NVIDIA_VISIBLE_DEVICES of N/10 entries and an
NVIDIA_REQUIRE_CUDA of N/100 terms, and a tenth of that: linear means ten times the size costs ten times the work.

Each case runs `python -m nvidia_oci_hook lint` as a separate process and reads its CPU time (user + system)
from the kernel's accounting of waited-for children; "beyond start-up" subtracts the median CPU time of linting
a minimal config. An in-process breakdown (parse, schema, rules, positions) follows.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BASE: dict[str, Any] = {
    "ociVersion": "1.0.2",
    "process": {
        "user": {"uid": 0, "gid": 0},
        "args": ["sh"],
        "env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
        "cwd": "/",
        "capabilities": {"bounding": ["CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"]},
    },
    "root": {"path": "rootfs", "readonly": True},
    "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}],
    "linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}]},
}


def big_config(devices: int, mounts: int, allowed: bool) -> dict[str, Any]:
    value = json.loads(json.dumps(BASE))
    value["linux"]["devices"] = [
        {"path": f"/dev/bench/d{i}", "type": "c", "major": 240 + i // 1000, "minor": i % 1000, "fileMode": 0o666}
        for i in range(devices)
    ]
    rules: list[dict[str, Any]] = [{"allow": False, "access": "rwm"}]
    if allowed:
        rules.append({"allow": True, "type": "c", "access": "rwm"})
    value["linux"]["resources"] = {"devices": rules}
    value["mounts"] += [
        {"destination": f"/opt/m{i}", "type": "bind", "source": f"/tmp/bench-missing/s{i}", "options": ["rbind", "ro"]}
        for i in range(mounts)
    ]
    return value


def nvidia_config(entries: int) -> dict[str, Any]:
    value = json.loads(json.dumps(BASE))
    terms = " ".join(
        f"brand=tesla,driver>={470 + i % 100},driver<{471 + i % 100}" for i in range(max(1, entries // 100))
    )
    value["process"]["env"] += [f"VARIABLE_{i}=value {i}" for i in range(entries)] + [
        "NVIDIA_VISIBLE_DEVICES=" + ",".join(str(i % 8) for i in range(max(1, entries // 10))),
        "NVIDIA_DRIVER_CAPABILITIES=compute,utility,graphics",
        f"NVIDIA_REQUIRE_CUDA=cuda>=12.8 {terms}",
    ]
    return value


def child_cpu(args: list[str]) -> tuple[float, float, int]:
    """(cpu seconds, wall seconds, exit status) of one lint process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "nvidia_oci_hook", "lint", *args], stdout=subprocess.DEVNULL, check=False
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, proc.returncode


def measure(label: str, args: list[str], runs: int) -> tuple[float, float]:
    samples = [child_cpu(args) for _ in range(runs)]
    cpu = statistics.median(s[0] for s in samples)
    wall = statistics.median(s[1] for s in samples)
    print(f"{label:<44} cpu {cpu * 1000:8.1f} ms   wall {wall * 1000:8.1f} ms   exit {samples[0][2]}")
    return cpu, wall


def breakdown(path: Path) -> None:
    from nvidia_oci_hook.kinds.document import parse_document
    from nvidia_oci_hook.kinds.schema import fast_check, schema_problems
    from nvidia_oci_hook.lint import LintOptions, active_rules, lint_document
    from nvidia_oci_hook.rules.base import Context

    raw = path.read_bytes()
    fast_check("oci")
    t0 = time.process_time()
    document = parse_document(str(path), raw)
    t1 = time.process_time()
    list(schema_problems("oci", document.value))
    t2 = time.process_time()
    findings = lint_document(document, active_rules(LintOptions(offline=True)), Context())
    t3 = time.process_time()
    print(
        f"  in-process: parse {1000 * (t1 - t0):.1f} ms, schema {1000 * (t2 - t1):.1f} ms, "
        f"rules + schema + positions {1000 * (t3 - t2):.1f} ms, {len(findings)} findings"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--devices", type=int, default=10_000)
    parser.add_argument("--mounts", type=int, default=10_000)
    parser.add_argument("--env", type=int, default=10_000)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        small = Path(tmp, "small.json")
        small.write_text(json.dumps(BASE))
        clean = Path(tmp, "clean.json")
        clean.write_text(json.dumps(big_config(options.devices, options.mounts, allowed=True), indent=2))
        noisy = Path(tmp, "noisy.json")
        noisy.write_text(json.dumps(big_config(options.devices, options.mounts, allowed=False), indent=2))
        nvidia_big = Path(tmp, "nvidia-big.json")
        nvidia_big.write_text(json.dumps(nvidia_config(options.env), indent=2))
        nvidia_small = Path(tmp, "nvidia-small.json")
        nvidia_small.write_text(json.dumps(nvidia_config(options.env // 10), indent=2))
        size = clean.stat().st_size
        print(f"python {sys.version.split()[0]}, {options.devices} devices + {options.mounts} mounts ({size} bytes)")
        print(f"median of {options.runs} runs")
        base_cpu, _ = measure("start-up (minimal config, offline)", ["--offline", str(small)], options.runs)
        cases = [
            ("10k/10k, no findings, offline", ["--offline", str(clean)]),
            ("10k/10k, 10k DEV003 findings, offline", ["--offline", str(noisy)]),
            ("10k/10k, host checks (10k HOST003)", [str(clean)]),
            (f"driver layer, {options.env // 10} env entries, host checks", [str(nvidia_small)]),
            (f"driver layer, {options.env} env entries, host checks", [str(nvidia_big)]),
        ]
        for label, args in cases:
            cpu, _ = measure(label, args, options.runs)
            print(f"{'':<44} beyond start-up: {1000 * (cpu - base_cpu):.1f} ms CPU")
        print("breakdown, no findings:")
        breakdown(clean)
        print("breakdown, 10k findings:")
        breakdown(noisy)


if __name__ == "__main__":
    main()
