"""What the runtime benchmarks share: interleaved timing, the rows they report, the machine they ran on, and the
clean-up that must happen whatever interrupts them."""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

SETTLE = 0.05  # seconds between the untimed setup of a run and its timed action


def _nothing() -> None:
    pass


@dataclass(frozen=True)
class Case:
    """One timed action; setup runs before it and teardown after it, both untimed, on every run."""

    action: Callable[[], object]
    setup: Callable[[], object] = _nothing
    teardown: Callable[[], object] = _nothing
    settle: float = SETTLE


@dataclass(frozen=True)
class Timing:
    median: float  # milliseconds
    low: float  # first and third quartile, milliseconds
    high: float
    runs: int


def interleaved_times(runs: int, cases: dict[str, Case]) -> dict[str, list[float]]:
    """Each case's action timed `runs` times (milliseconds, in run order), the cases taking turns run by run, so
    that the machine's drift (two cores, other work, caches) falls on all of them alike rather than on whichever
    ran last. The nth time of each case comes from the same round."""
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(runs):
        for name, case in cases.items():
            case.setup()
            # What the setup started (a container's init, a cgroup's removal) finishes outside the timing.
            time.sleep(case.settle)
            start = time.perf_counter()
            case.action()
            times[name].append((time.perf_counter() - start) * 1000)
            case.teardown()
    return times


def summary(values: Sequence[float]) -> Timing:
    """The median and quartiles of one case's times (milliseconds)."""
    milliseconds = sorted(values)
    quartiles = statistics.quantiles(milliseconds, n=4) if len(milliseconds) > 1 else milliseconds * 3
    return Timing(statistics.median(milliseconds), quartiles[0], quartiles[2], len(milliseconds))


def interleaved_medians(runs: int, cases: dict[str, Case]) -> dict[str, Timing]:
    """interleaved_times, each case summed up as its median and quartiles."""
    return {name: summary(values) for name, values in interleaved_times(runs, cases).items()}


@dataclass(frozen=True)
class Row:
    label: str
    timing: Timing
    versus: str = ""  # against the section's baseline: "+1.2 ms", "x1.04"; empty for the baseline itself
    target: str = ""  # the bound, with whether this run met it
    note: str = ""


@dataclass
class Section:
    title: str
    rows: list[Row]


def _target(bound: Optional[float], value: float, digits: int, unit: str) -> str:
    """The bound and whether value met it; with more digits where both round alike (x1.104 against x1.10)."""
    if bound is None:
        return ""
    verdict = "met" if value <= bound else "missed"
    if round(value, digits) == round(bound, digits) and value != bound:
        verdict += f" at {unit.replace('#', f'{value:.{digits + 2}f}')}"
    return f"<= {unit.replace('#', f'{bound:.{digits}f}')}: {verdict}"


def delta_row(label: str, timing: Timing, baseline: Timing, bound: Optional[float] = None, note: str = "") -> Row:
    """A row against a baseline as a difference in milliseconds, bound the largest difference the target allows."""
    delta = timing.median - baseline.median
    return Row(label, timing, f"{delta:+.1f} ms", _target(bound, delta, 1, "+# ms"), note)


def ratio_row(label: str, timing: Timing, baseline: Timing, bound: Optional[float] = None, note: str = "") -> Row:
    """A row against a baseline as a ratio (and the difference), bound the largest ratio the target allows."""
    ratio = timing.median / baseline.median
    versus = f"x{ratio:.2f} ({timing.median - baseline.median:+.1f} ms)"
    return Row(label, timing, versus, _target(bound, ratio, 2, "x#"), note)


def paired_row(
    label: str, values: Sequence[float], baseline: Sequence[float], bound: Optional[float] = None, note: str = ""
) -> Row:
    """A row against a baseline timed in the same rounds: the median of the rounds' ratios (and of their
    differences), which the drift between rounds does not reach; bound the largest ratio the target allows."""
    ratio = statistics.median(value / base for value, base in zip(values, baseline))
    delta = statistics.median(value - base for value, base in zip(values, baseline))
    versus = f"x{ratio:.2f} ({delta:+.1f} ms) paired"
    return Row(label, summary(values), versus, _target(bound, ratio, 2, "x#"), note)


def render_text(section: Section) -> str:
    width = max(len(row.label) for row in section.rows)
    lines = [f"{section.title}:", f"  {'':<{width}} {'median':>11} {'quartiles':>15} {'against the baseline':>20}"]
    for row in section.rows:
        spread = f"[{row.timing.low:.1f}-{row.timing.high:.1f}]"
        extras = [part for part in (row.target and "target " + row.target, row.note) if part]
        tail = f"  ({'; '.join(extras)})" if extras else ""
        lines.append(f"  {row.label:<{width}} {row.timing.median:8.1f} ms {spread:>15} {row.versus:>20}{tail}")
    return "\n".join(lines)


def render_markdown(machine: str, sections: Sequence[Section]) -> str:
    lines = [f"Measured on {machine}.", ""]
    for section in sections:
        lines += [
            f"**{section.title}**",
            "",
            "| case | median | against the baseline | target |",
            "| --- | ---: | --- | --- |",
        ]
        for row in section.rows:
            label = row.label + (f" ({row.note})" if row.note else "")
            lines.append(f"| {label} | {row.timing.median:.1f} ms | {row.versus or 'baseline'} | {row.target} |")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def version_of(command: Sequence[str]) -> str:
    """The first dotted version number a command prints, or "?" when it cannot be run."""
    try:
        out = subprocess.run(list(command), capture_output=True, text=True, timeout=30, check=False).stdout
    except OSError:
        return "?"
    found = re.search(r"\d+\.\d+(?:\.\d+)?", out)
    return found.group(0) if found else "?"


def machine(programs: dict[str, Sequence[str]]) -> str:
    """nproc, the kernel and the versions of the programs measured, in one line."""
    versions = ", ".join(f"{name} {version_of(command)}" for name, command in programs.items())
    return f"{len(os.sched_getaffinity(0))} CPUs, Linux {platform.release()}, {versions}"


@contextlib.contextmanager
def tmpfs(prefix: str, size: str = "512m") -> Iterator[Path]:
    """A temporary directory with a tmpfs of its own: engines keep bundles and state on tmpfs (/run), and the
    disk's flushes would otherwise land on whichever case happened to run then."""
    directory = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", prefix.rstrip("-"), str(directory)], check=True)
        yield directory
    finally:
        unmount_below(directory)
        subprocess.run(["umount", "--lazy", str(directory)], capture_output=True, check=False)
        shutil.rmtree(directory, ignore_errors=True)


def unmount_below(directory: Path) -> None:
    """Every mount below directory, deepest first (overlays, a runtime's rootfs left by an interrupted create)."""
    prefix = str(directory.resolve()) + "/"
    with open("/proc/self/mountinfo", encoding="utf-8") as mountinfo:
        points = [line.split()[4] for line in mountinfo]
    for point in reversed(points):
        if point.startswith(prefix):
            subprocess.run(["umount", "--lazy", point], capture_output=True, check=False)


def subreaper(enabled: bool) -> None:
    """Adopt (or stop adopting) orphaned descendants: container inits that runc leaves behind, the conmon that
    podman leaves behind. PID 1 on these machines reaps them only now and then, so the benchmark reaps its own."""
    ctypes.CDLL(None, use_errno=True).prctl(36, int(enabled), 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def reap() -> None:
    """Every adopted child that has exited, without waiting for the others."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] != 0:
            pass


def wait_orphans(timeout: float = 10) -> bool:
    """Until every child has exited and been reaped (False when some are still running at the timeout). Only for
    a process whose own subprocesses have all been waited for: the rest are orphans it adopted."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] != 0:
                continue
        except ChildProcessError:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)


def interrupt_once() -> None:
    """SIGINT and SIGTERM raise KeyboardInterrupt once; later ones are ignored, so that a second Ctrl-C cannot
    cut short the clean-up the first one started."""

    def handler(number: int, _frame: Any) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt(f"signal {number}")

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
