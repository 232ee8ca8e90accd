"""Manifest benchmark: `lint --kind kubernetes` on `kubectl get pods -A -o yaml` of a large cluster and on a
`helm template` stream, against checkov's Kubernetes framework on the same files.

Usage: python benchmarks/bench_manifests.py [--pods 5000] [--sizes 500,1000,2000,5000] [--runs N] [--no-checkov]
       [--checkov-sizes 5000] [--checkov-timeout SECONDS] [--seed N] [--keep DIR]

The files come from benchmarks/cluster_manifests.py (about 12 KB a pod, so 5,000 pods are about 60 MB) and are
written once to a temporary directory. Every case is a separate process: the project's launcher
(.venv/bin/nvidia-oci-hook, Debian's python3) as a user runs it, `lint --offline --kind kubernetes FILE`, and
checkov as `checkov -f FILE --framework kubernetes --quiet --compact -o json --skip-download` (no platform
download: nothing here may reach the network, and its timeout would be counted as checkov's scan). The cases
take turns round by round (timing.interleaved_times), each timed wall-clock, its peak RSS read from the kernel's
accounting of that child (os.wait4's ru_maxrss; the children are started from a small process of their own,
whose peak, printed, is the least any of them can show: see Spawner). Reported per tool and file: the median
wall time, the largest peak RSS, the findings (ours: the findings of a `--format json` run before the timing;
checkov: its failed checks) and, for checkov, how many resources it says it checked, so that a scan that skipped
the pods shows; the median over the rounds of checkov's time / ours in the same round; ours' time per pod at each
size and the ratio of time per pod at the largest size to the smallest (linear growth: about 1, start-up
amortized: below).

checkov lives in a virtual environment of its own, so that it never becomes a dependency of the tool; the
benchmark leaves its column out, saying so, where it is absent:

    python3 -m venv .tools/checkov && .tools/checkov/bin/pip install checkov

checkov 3.3 took about 20 s on 500 pods and 5 minutes and 5 GB on 5,000 on a 2-CPU machine, so by default it
gets the --pods list and the helm stream only (--checkov-sizes adds others); a run that passes --checkov-timeout
is killed and reported as timed out, its ratio and peak RSS then lower bounds, and checkov is not run on that
file again.

Targets: 5,000 pods in <= 5 s and <= 400 MB; >= 10x faster than checkov on the same file.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Optional

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY / "benchmarks"))

from cluster_manifests import HELM_OBJECTS, PodList, helm_template  # noqa: E402
from timing import Case, Row, Section, interleaved_times, machine, render_text, summary  # noqa: E402

OURS = REPOSITORY / ".venv/bin/nvidia-oci-hook"
CHECKOV = REPOSITORY / ".tools/checkov/bin/checkov"
CHECKOV_INSTALL = "python3 -m venv .tools/checkov && .tools/checkov/bin/pip install checkov"
TIME_BOUND = 5.0  # seconds, for TARGET_PODS pods
RSS_BOUND = 400  # MB
SPEEDUP_BOUND = 10.0  # checkov / ours
TARGET_PODS = 5000
SERVE = "--serve-runs"  # how Spawner starts this file as its spawner
# checkov counts a workload's pod template as a resource of its own, and kinds it has no check for not at all.
POD_TEMPLATES = "; checkov adds a resource for each workload's pod template"
# What the tool reports instead of linting a file it did not read: the file too large, not found, not UTF-8.
READ_FAILURE = re.compile(r"^DOC00[1-9]$")


def _wait(process: subprocess.Popen[bytes], timeout: Optional[float]) -> tuple[Optional[int], int]:
    """(exit status, peak RSS in kilobytes) of the process; the status None when it ran past timeout and was
    killed, the RSS then the peak up to the kill."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(process.pid, 0 if deadline is None else os.WNOHANG)
        if pid:
            process.returncode = os.waitstatus_to_exitcode(status)
            return process.returncode, usage.ru_maxrss
        if deadline is not None and time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            _, _, usage = os.wait4(process.pid, 0)
            process.returncode = -signal.SIGKILL
            return None, usage.ru_maxrss
        time.sleep(0.02)


def serve() -> None:
    """The spawner's side: one JSON request a line on stdin (argv, env, timeout, output), one JSON answer a line
    on stdout (exit, maxrss)."""
    for line in sys.stdin:
        request = json.loads(line)
        with open(request["output"], "wb") as out:
            # A session of its own, so that a timeout ends whatever the tool started too.
            process = subprocess.Popen(
                request["argv"], stdout=out, stderr=subprocess.STDOUT, env=request["env"], start_new_session=True
            )
            code, maxrss = _wait(process, request["timeout"])
        sys.stdout.write(json.dumps({"exit": code, "maxrss": maxrss}) + "\n")
        sys.stdout.flush()


class Spawner:
    """Starts the timed processes from a small process of its own. The kernel counts in a child's ru_maxrss the
    peak RSS of the process it was spawned from (exec records the old address space's high-water mark, and
    Python's vfork shares the parent's), so children spawned from this process, which holds the files' text
    and checkov's reports, would all seem to need hundreds of MB."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, SERVE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def run(
        self, argv: Sequence[str], output: Path, env: Optional[dict[str, str]] = None, timeout: Optional[float] = None
    ) -> tuple[Optional[int], int]:
        """(exit status or None where it timed out, peak RSS in kilobytes) of one run."""
        assert self.process.stdin is not None and self.process.stdout is not None
        request = {"argv": list(argv), "env": env, "timeout": timeout, "output": str(output)}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        answer = json.loads(self.process.stdout.readline())
        return answer["exit"], answer["maxrss"]

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


@dataclass
class Runs:
    """One tool on one file: what each of its timed runs left beside its time."""

    tool: str
    label: str
    argv: list[str]
    env: Optional[dict[str, str]] = None
    timeout: Optional[float] = None
    peak_rss: list[int] = field(default_factory=list)  # kilobytes
    exits: list[int] = field(default_factory=list)
    output: Optional[Path] = None  # the last finished run's
    timed_out: bool = False

    def run(self, spawner: Spawner, output: Path) -> None:
        if self.timed_out:
            return  # its time is the timeout's, as in the round that reached it
        code, maxrss = spawner.run(self.argv, output, self.env, self.timeout)
        self.peak_rss.append(maxrss)  # where it timed out, the peak up to the kill: a lower bound
        if code is None:
            self.timed_out = True
            return
        self.exits.append(code)
        self.output = output

    def output_text(self) -> str:
        return self.output.read_text(errors="replace") if self.output else ""


def ours_argv(path: Path, *extra: str) -> list[str]:
    return [str(OURS), "lint", "--offline", "--kind", "kubernetes", *extra, str(path)]


def checkov_argv(path: Path) -> list[str]:
    return [
        str(CHECKOV),
        "-f",
        str(path),
        "--framework",
        "kubernetes",
        "--quiet",
        "--compact",
        "-o",
        "json",
        "--skip-download",
    ]


@dataclass(frozen=True)
class Findings:
    codes: dict[str, int]  # how many of each code
    severities: dict[str, int]  # the report's summary: how many errors, warnings, infos

    @property
    def count(self) -> int:
        return sum(self.codes.values())


def our_findings(path: Path) -> Findings:
    """What ours finds in the file, from an untimed JSON run; exits the benchmark where the tool failed
    (status 2) instead of judging the file."""
    result = subprocess.run(ours_argv(path, "--format", "json"), capture_output=True, text=True, check=False)
    if result.returncode not in (0, 1):
        tail = (result.stderr or result.stdout)[-600:]
        raise SystemExit(f"bench_manifests: {' '.join(ours_argv(path))}: exit {result.returncode}: {tail}")
    codes: dict[str, int] = {}
    report = json.loads(result.stdout)
    for entry in report["files"]:
        for finding in entry["findings"]:
            codes[finding["code"]] = codes.get(finding["code"], 0) + 1
    return Findings(codes, dict(report.get("summary", {})))


def checkov_summary(output: str) -> dict[str, Any]:
    """checkov's own summary (passed, failed, resource_count, ...) from its JSON report: one report, or a list
    of them where it added an image report."""
    try:
        report = json.loads(output)
    except json.JSONDecodeError:
        return {}
    reports = report if isinstance(report, list) else [report]
    for entry in reports:
        if entry.get("check_type") == "kubernetes":
            return dict(entry.get("summary", {}))
    # A report with nothing to check is a bare summary.
    return dict(reports[0]) if reports and "resource_count" in reports[0] else {}


def write_files(directory: Path, sizes: Sequence[int], seed: int) -> dict[str, tuple[Path, int]]:
    """The files, by label: the pod lists (label: the pod count) and the helm stream; with their sizes."""
    pods = PodList(seed)
    files: dict[str, tuple[Path, int]] = {}
    for count in sorted(set(sizes)):
        path = directory / f"pods-{count}.yaml"
        files[str(count)] = (path, pods.write(path, count))
    helm = directory / "helm-template.yaml"
    helm.write_text(helm_template(seed))
    files["helm"] = (helm, helm.stat().st_size)
    return files


def speedup(theirs: Sequence[float], ours: Sequence[float]) -> float:
    """The median of the rounds' ratios of checkov's time to ours, which the drift between rounds does not
    reach."""
    return statistics.median(their / our for their, our in zip(theirs, ours))


def megabytes(kilobytes: float) -> float:
    return kilobytes / 1024


def bound_text(value: float, bound: float, unit: str, at_most: bool = True) -> str:
    met = value <= bound if at_most else value >= bound
    return f"{'<=' if at_most else '>='} {bound:g}{unit}: {'met' if met else 'missed'}"


def file_label(label: str) -> str:
    return "helm template" if label == "helm" else f"{int(label):,} pods"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--pods", type=int, default=TARGET_PODS, help="the pod list checkov and the targets get")
    parser.add_argument("--sizes", default="500,1000,2000,5000", help="pod lists ours is timed on (linear growth)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-checkov", action="store_true")
    parser.add_argument("--checkov-sizes", default="", help="pod lists checkov gets (default: --pods)")
    parser.add_argument("--checkov-timeout", type=float, default=900, metavar="SECONDS", help="per run")
    parser.add_argument("--keep", metavar="DIR", help="write the files here and leave them")
    options = parser.parse_args(argv)
    # Started before this process holds anything large: see Spawner.
    spawner = Spawner()
    sizes = sorted({int(size) for size in options.sizes.split(",") if size} | {options.pods})
    checkov_sizes = {int(size) for size in options.checkov_sizes.split(",") if size} or {options.pods}
    if options.runs < 1 or min(sizes) < 1:
        parser.error("--runs and the sizes must be at least 1")
    if not OURS.is_file():
        raise SystemExit(f"bench_manifests: {OURS} is absent (sh scripts/setup)")
    with_checkov = not options.no_checkov
    if with_checkov and not CHECKOV.is_file():
        print(f"checkov not installed: run `{CHECKOV_INSTALL}`; leaving its column out", flush=True)
        with_checkov = False
    programs: dict[str, Sequence[str]] = {"nvidia-oci-hook": [str(OURS), "--version"]}
    if with_checkov:
        programs["checkov"] = [str(CHECKOV), "--version"]
    print(machine(programs), flush=True)

    with contextlib.ExitStack() as stack:
        stack.callback(spawner.close)
        if options.keep:
            directory = Path(options.keep)
            directory.mkdir(parents=True, exist_ok=True)
        else:
            directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-manifests-")))
        started = time.perf_counter()
        files = write_files(directory, sizes, options.seed)
        print(f"files written in {time.perf_counter() - started:.1f} s to {directory}:", flush=True)
        for label, (path, size) in files.items():
            print(f"  {file_label(label):<15} {size / 1e6:7.1f} MB  {path.name}", flush=True)
        return measure(spawner, directory, files, sizes, checkov_sizes if with_checkov else set(), options)


def measure(
    spawner: Spawner,
    directory: Path,
    files: dict[str, tuple[Path, int]],
    sizes: list[int],
    checkov_sizes: set[int],
    options: Any,
) -> int:
    findings: dict[str, Findings] = {}
    unread: dict[str, str] = {}
    for label, (path, _) in files.items():
        findings[label] = our_findings(path)
        failures = [code for code in findings[label].codes if READ_FAILURE.match(code)]
        if failures:
            unread[label] = ", ".join(failures)
    runs: dict[str, Runs] = {}
    for label, (path, _) in files.items():
        runs[f"ours {label}"] = Runs("ours", label, ours_argv(path))
    checkov_env = {**os.environ, "BC_SKIP_MAPPING": "TRUE"}
    for label, (path, _) in files.items():
        if checkov_sizes and (label == "helm" or int(label) in checkov_sizes):
            runs[f"checkov {label}"] = Runs("checkov", label, checkov_argv(path), checkov_env, options.checkov_timeout)
    cases = {
        name: Case(partial(r.run, spawner, directory / f"{name.replace(' ', '-')}.out"), settle=0)
        for name, r in runs.items()
    }
    print(f"{options.runs} interleaved rounds of {len(cases)} cases ...", flush=True)
    started, load = time.perf_counter(), os.getloadavg()[0]
    times = interleaved_times(options.runs, cases)
    # Other work on the machine lands on whichever case ran then; the load shows whether there was any.
    after = os.getloadavg()[0]
    print(f"timed in {time.perf_counter() - started:.0f} s; 1-minute load {load:.2f} before, {after:.2f} after", end="")
    print(" (the benchmark's own runs add about 1)", flush=True)
    for name, r in runs.items():
        if r.timed_out:  # the rounds it was not run in count as the timeout, the least it would have taken
            times[name] = [max(t, r.timeout * 1000) if r.timeout else t for t in times[name]]
        bad = [code for code in r.exits if code not in (0, 1)]
        if bad and not r.timed_out:
            print(f"warning: {name} exited {bad[0]}: {r.output_text()[-400:]}", file=sys.stderr)

    _, floor = spawner.run(["true"], directory / "true.out")
    report(files, sizes, runs, times, findings, unread, floor)
    return 0


def report(
    files: dict[str, tuple[Path, int]],
    sizes: list[int],
    runs: dict[str, Runs],
    times: dict[str, list[float]],
    findings: dict[str, Findings],
    unread: dict[str, str],
    floor: int,
) -> None:
    print()
    rows: list[Row] = []
    for name, r in runs.items():
        target = versus = ""
        if r.tool == "ours" and r.label == str(TARGET_PODS):
            target = bound_text(summary(times[name]).median / 1000, TIME_BOUND, " s")
        if r.tool == "checkov":
            versus = f"{'>= ' if r.timed_out else ''}x{speedup(times[name], times[f'ours {r.label}']):.1f} paired"
        note = "timed out" if r.timed_out else ""
        timing = summary(times[name])
        rows.append(Row(f"{r.tool:<8} {file_label(r.label)}", timing, versus, target=target, note=note))
    print(render_text(Section("wall time, median of the rounds; checkov against ours", rows)))

    print(f"\npeak RSS (of a process that does nothing, started the same way: {megabytes(floor):.1f} MB) and findings:")
    for r in runs.values():
        rss = megabytes(max(r.peak_rss)) if r.peak_rss else float("nan")
        at_least = ">=" if r.timed_out else "  "
        line = f"  {r.tool:<8} {file_label(r.label):<15} peak RSS {at_least}{rss:8.1f} MB"
        if r.tool == "ours":
            found = findings[r.label]
            severities = ", ".join(f"{severity} {n}" for severity, n in found.severities.items() if n)
            top = ", ".join(f"{code} {n}" for code, n in sorted(found.codes.items(), key=lambda item: -item[1])[:6])
            line += f"   {found.count} findings ({severities or 'none'}; {top or '-'})"
            if r.label == str(TARGET_PODS):
                line += f"   target {bound_text(rss, RSS_BOUND, ' MB')}"
            if r.label in unread:
                line += f"   NOT LINTED: {unread[r.label]}"
        else:
            counted = checkov_summary(r.output_text())
            expected = HELM_OBJECTS if r.label == "helm" else int(r.label)
            if counted:
                line += (
                    f"   {counted.get('failed', '?')} failed checks, {counted.get('passed', '?')} passed,"
                    f" {counted.get('resource_count', '?')} resources checked (the file has {expected} objects"
                    f"{POD_TEMPLATES if r.label == 'helm' else ''})"
                )
            if r.timed_out:
                line += f"   timed out after {r.timeout:.0f} s" + (" (no run finished)" if not r.exits else "")
        print(line)

    comparisons = [(name, r) for name, r in runs.items() if r.tool == "checkov"]
    if comparisons:
        print("\ncheckov / ours, median of the per-round ratios:")
    for name, r in comparisons:
        ours = times[f"ours {r.label}"]
        ratios = [theirs / mine for theirs, mine in zip(times[name], ours)]
        ratio = speedup(times[name], ours)
        prefix = ">= " if r.timed_out else ""
        target = bound_text(ratio, SPEEDUP_BOUND, "x", at_most=False)
        if r.timed_out and ratio < SPEEDUP_BOUND:
            target = f">= {SPEEDUP_BOUND:g}x: not known (checkov timed out before it)"
        if r.label in unread:
            target += "; ours did not lint the file"
        print(
            f"  {file_label(r.label):<15} x{ratio:.1f} {prefix and '(a lower bound: checkov timed out) '}"
            f"[rounds: {', '.join(f'{prefix}x{value:.1f}' for value in ratios)}]   target {target}"
        )

    print("\nours, time per pod:")
    per_pod = {}
    for size in sizes:
        median = summary(times[f"ours {size}"]).median
        per_pod[size] = median / size
        print(f"  {size:>6,} pods  {median / 1000:7.2f} s  {per_pod[size] * 1000:8.1f} us/pod")
    if len(sizes) > 1:
        low, high = sizes[0], sizes[-1]
        # The same ratio round by round, so that drift between rounds does not reach it.
        paired = statistics.median(
            (big / high) / (small / low) for big, small in zip(times[f"ours {high}"], times[f"ours {low}"])
        )
        print(
            f"  time per pod at {high:,} / at {low:,}: x{per_pod[high] / per_pod[low]:.2f} of the medians,"
            f" x{paired:.2f} per round (1: linear; below 1: start-up spread over more pods)"
        )
    if unread:
        print(f"\nwarning: ours did not lint {', '.join(file_label(label) for label in unread)}: {unread}")


if __name__ == "__main__":
    if sys.argv[1:] == [SERVE]:
        serve()
    else:
        sys.exit(main())
