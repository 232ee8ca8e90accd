"""Fake nodes whose links and data lead out of --host-root, and a harness that says where each command went.

Every layout is a node root (CASE/node) built on a node with real work in it (stale markers, stale CDI specs,
missing /dev/char links, a running GPU container that lost its device rules, engine configurations), plus
CASE/outside: canary files and directories that the node's links, and the paths in its files, lead to. Under
--host-root every one of them must resolve inside the root, as the node's own processes would see it: an
absolute link target starts again at the root, ".." stops there.

A command runs as `python -m nvidia_oci_hook` under strace. The interpreter imports its libraries first and
stops itself; strace attaches, and the command proper runs traced (the imports of start-up would be most of the
log and most of the time). Each syscall's path is then resolved as the kernel resolved it: from the descriptor
path strace printed (-y) and the name given, following links in every component and in the last one unless the
call does not follow it; once against the node as it was before the command and once as it is after, and the
descriptor a successful open returned is the kernel's own answer.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import selectors
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from tests.helpers import FakeHost
from tests.node.fakenodes import CONTAINER, seed_000, seed_003
from tests.node.test_lint_node import CONTAINERD, CRIO, cdi_spec

REPO = Path(__file__).resolve().parents[2]
STRACE = shutil.which("strace")
_LINK_LIMIT = 40  # the kernel's

# -- running a command under strace ----------------------------------------------------------------------------

# A fork server, started with `python -c` (sys.path[0] is then the working directory, as for `python -m`): it
# imports what the command imports, then forks one child per request, each a fresh interpreter with everything
# imported, which stops itself until strace holds it. What the command imports later (its rules, its node modules)
# is imported here too, so that the traced part is the command's own work; a module this list misses is imported
# while traced, from the allowed places. The imports are done once, not once per command: they were most of the
# suite's time. A request is the command's argv, with its stdin, stdout and stderr passed as descriptors; the
# answer is the child's pid, then its wait status.
_LAUNCHER = """
import array, importlib, json, os, pkgutil, runpy, signal, socket, sys

def _import(name):
    try:
        return importlib.import_module(name)
    except Exception:
        return None

for _name in ("nvidia_oci_hook.entry", "nvidia_oci_hook.cli", "click", "yaml", "jsonschema", "json", "difflib",
              "glob", "fnmatch", "gzip", "sqlite3", "subprocess", "ctypes", "weakref", "tomllib", "shutil",
              "hashlib", "nvidia_oci_hook.lint", "nvidia_oci_hook.reconcile", "nvidia_oci_hook.runtime.logbook"):
    _import(_name)
_rules = _import("nvidia_oci_hook.rules.base")
if _rules is not None and hasattr(_rules, "all_rules"):
    _rules.all_rules()
for _package in ("nvidia_oci_hook.node", "nvidia_oci_hook.engine", "nvidia_oci_hook.report"):
    _found = _import(_package)
    for _module in pkgutil.walk_packages(getattr(_found, "__path__", []), _package + "."):
        _import(_module.name)
_channel = socket.socket(fileno=int(sys.argv[1]))
while True:
    _request, _fds, _, _ = socket.recv_fds(_channel, 65536, 3)
    if not _request:
        os._exit(0)
    _pid = os.fork()
    if _pid == 0:
        for _target, _fd in enumerate(_fds):
            os.dup2(_fd, _target)
            os.close(_fd)
        _channel.close()
        os.kill(os.getpid(), signal.SIGSTOP)
        sys.argv = ["nvidia_oci_hook", *json.loads(_request)]
        runpy.run_module("nvidia_oci_hook", run_name="__main__", alter_sys=True)
        sys.exit(0)
    for _fd in _fds:
        os.close(_fd)
    _channel.sendall(b"%d\\n" % _pid)
    _, _status = os.waitpid(_pid, 0)
    _channel.sendall(b"%d\\n" % _status)
"""

_STRACE_OPTIONS = ("-f", "-qq", "-y", "-s", "0", "-e", "signal=none", "-e", "trace=%file,%desc")


def command_environment() -> dict[str, str]:
    """This process's environment (PYTHONPATH too: a copy of the checkout imports its own code), without the
    tool's settings, in the C locale, where the interpreter looks up no message catalogue."""
    environment = {key: value for key, value in os.environ.items() if not key.startswith("NVIDIA_OCI_HOOK_")}
    environment.pop("LANGUAGE", None)
    environment["LC_ALL"] = "C"
    return environment


@dataclass
class Run:
    argv: list[str]
    status: int
    stdout: str
    stderr: str
    accesses: list[Access]

    @property
    def shown(self) -> str:
        return "nvidia-oci-hook " + " ".join(self.argv)


def run_plain(argv: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nvidia_oci_hook", *argv],
        cwd=REPO,
        env=command_environment(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


class _ForkServer:
    """One launcher process (see _LAUNCHER); a thread uses its own, one command at a time."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair()
        self.channel = ours
        self.process = subprocess.Popen(
            [sys.executable, "-c", _LAUNCHER, str(theirs.fileno())],
            cwd=REPO,
            env=command_environment(),
            stdin=subprocess.DEVNULL,
            pass_fds=(theirs.fileno(),),
        )
        theirs.close()
        self.answers = ours.makefile("rb")

    def start(self, argv: list[str], stdio: tuple[int, int, int]) -> int:
        socket.send_fds(self.channel, [json.dumps(argv).encode()], list(stdio))
        return int(self._answer("the launcher ended before the command"))

    def status(self) -> int:
        return int(self._answer("the launcher ended while the command ran"))

    def _answer(self, failure: str) -> bytes:
        line = self.answers.readline()
        if not line:
            raise RuntimeError(f"{failure} (launcher status {self.process.wait()})")
        return line

    def close(self) -> None:
        self.channel.close()
        self.answers.close()
        self.process.wait(timeout=30)


_servers = threading.local()
_all_servers: list[_ForkServer] = []


def _fork_server() -> _ForkServer:
    server: Optional[_ForkServer] = getattr(_servers, "server", None)
    if server is None:
        server = _servers.server = _ForkServer()
        _all_servers.append(server)
    return server


def close_fork_servers() -> None:
    while _all_servers:
        _all_servers.pop().close()


def run_traced(argv: list[str], log: Path, timeout: float = 120) -> Run:
    assert STRACE is not None
    server = _fork_server()
    stdin = os.open(os.devnull, os.O_RDONLY)
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    try:
        pid = server.start(argv, (stdin, out_write, err_write))
    finally:
        for fd in (stdin, out_write, err_write):
            os.close(fd)
    tracer = None
    outputs: dict[int, bytes] = {}
    try:
        _wait_until(pid, lambda fields: fields.get("State", "").startswith("T"), "stop itself")
        tracer = subprocess.Popen([STRACE, *_STRACE_OPTIONS, "-o", str(log), "-p", str(pid)])
        _wait_until_traced(pid, tracer)
        os.kill(pid, signal.SIGCONT)
        outputs = _read_until_closed((out_read, err_read), pid, timeout)
        status = os.waitstatus_to_exitcode(server.status())
        tracer.wait(timeout=timeout)
    finally:
        for fd in (out_read, err_read):
            os.close(fd)
        if tracer is not None and tracer.poll() is None:
            tracer.kill()
            tracer.wait()
    out, err = outputs[out_read], outputs[err_read]
    return Run(argv, status, out.decode(errors="replace"), err.decode(errors="replace"), parse_log(log))


def _read_until_closed(fds: tuple[int, ...], pid: int, timeout: float) -> dict[int, bytes]:
    """Everything written to the pipes until each is closed; past the timeout the command is killed."""
    outputs = {fd: b"" for fd in fds}
    open_fds = set(fds)
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        for fd in fds:
            selector.register(fd, selectors.EVENT_READ)
        while open_fds:
            ready = selector.select(max(0.0, deadline - time.monotonic()))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                deadline = time.monotonic() + 30
            for key, _ in ready:
                chunk = os.read(key.fd, 65536)
                if chunk:
                    outputs[key.fd] += chunk
                else:
                    selector.unregister(key.fd)
                    open_fds.discard(key.fd)
    return outputs


def _wait_until_traced(pid: int, tracer: subprocess.Popen[bytes]) -> None:
    """Until strace holds the stopped process in a tracing stop: a SIGCONT sent earlier could let the command
    make calls strace never sees."""

    def traced(fields: dict[str, str]) -> bool:
        if tracer.poll() is not None:
            raise RuntimeError(f"strace could not attach to {pid} (status {tracer.returncode})")
        return fields.get("TracerPid", "0") != "0" and fields.get("State", "").startswith("t")

    _wait_until(pid, traced, "be traced by strace")


def _wait_until(pid: int, condition: Callable[[dict[str, str]], bool], what: str) -> None:
    """Until condition holds for the fields of the process's /proc status."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        fields = {}
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if condition(fields):
            return
        time.sleep(0.001)
    raise RuntimeError(f"process {pid} did not {what} within 30 s")


# -- reading strace's log --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Access:
    """One path a syscall made the kernel look up, or one open descriptor it used."""

    line: str  # the call as strace wrote it
    syscall: str
    named: Optional[str]  # dir fd's path + the name given (or the absolute name), for a lookup
    follows: bool  # whether a link in the last component was followed
    writes: bool
    descriptor: Optional[str] = None  # for a call on an open descriptor: its path, as the kernel had it
    opened: Optional[str] = None  # the path of the descriptor the call returned


_CALL = re.compile(r"^(\d+)\s+(.*)$")
_DESCRIPTOR = re.compile(r"^(?:\d+|AT_FDCWD)<(.*)>$")
_RETURNED = re.compile(r"^\s*=\s*(-?\d+|\?)(?:<(.*?)>)?")

# syscall -> the (dir fd argument or None, name argument) of each path it looks up.
_PATH_ARGUMENTS: dict[str, tuple[tuple[Optional[int], int], ...]] = {
    **{name: ((None, 0),) for name in (
        "open", "creat", "stat", "lstat", "access", "readlink", "unlink", "rmdir", "mkdir", "chmod", "chown",
        "lchown", "utime", "utimes", "truncate", "mknod", "chdir", "chroot", "execve", "statfs", "getxattr",
        "lgetxattr", "setxattr", "lsetxattr", "listxattr", "llistxattr", "removexattr", "lremovexattr",
    )},
    **{name: ((0, 1),) for name in (
        "openat", "openat2", "newfstatat", "fstatat64", "statx", "faccessat", "faccessat2", "readlinkat",
        "unlinkat", "mkdirat", "fchmodat", "fchmodat2", "fchownat", "utimensat", "futimesat", "mknodat",
        "execveat", "name_to_handle_at",
    )},
    "rename": ((None, 0), (None, 1)),
    "link": ((None, 0), (None, 1)),
    "symlink": ((None, 1),),  # the target is data, not a lookup
    "renameat": ((0, 1), (2, 3)),
    "renameat2": ((0, 1), (2, 3)),
    "linkat": ((0, 1), (2, 3)),
    "symlinkat": ((1, 2),),
    "inotify_add_watch": ((None, 1),),
}  # fmt: skip
_NEVER_FOLLOW = {
    "lstat", "readlink", "readlinkat", "unlink", "unlinkat", "rmdir", "mkdir", "mkdirat", "rename", "renameat",
    "renameat2", "symlink", "symlinkat", "link", "lchown", "lgetxattr", "lsetxattr", "llistxattr", "lremovexattr",
    "mknod", "mknodat",
}  # fmt: skip
# Calls whose flags argument (this index) says whether the last component is followed.
_AT_FLAGS = {"newfstatat": 3, "fstatat64": 3, "statx": 2, "fchmodat": 3, "fchmodat2": 3, "fchownat": 4,
             "utimensat": 3, "faccessat2": 3, "execveat": 4}  # fmt: skip
_CHANGES = {
    "creat", "unlink", "unlinkat", "rmdir", "mkdir", "mkdirat", "rename", "renameat", "renameat2", "link",
    "linkat", "symlink", "symlinkat", "chmod", "fchmodat", "fchmodat2", "chown", "lchown", "fchownat", "utime",
    "utimes", "utimensat", "futimesat", "truncate", "mknod", "mknodat", "setxattr", "lsetxattr", "removexattr",
    "lremovexattr",
}  # fmt: skip
# Calls on an open descriptor that read or change what it names; the rest (close, lseek, fstat) add nothing.
_DESCRIPTOR_READS = {"read", "pread64", "readv", "preadv", "preadv2", "getdents", "getdents64", "fgetxattr",
                     "flistxattr", "fchdir", "fstatfs", "mmap"}  # fmt: skip
_DESCRIPTOR_WRITES = {"write", "pwrite64", "writev", "pwritev", "pwritev2", "fchmod", "fchown", "ftruncate",
                      "fallocate", "fsetxattr", "fremovexattr"}  # fmt: skip
_OPEN_WRITES = ("O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND")


def parse_log(log: Path) -> list[Access]:
    pending: dict[str, str] = {}
    accesses: list[Access] = []
    for raw in log.read_text(errors="surrogateescape").splitlines():
        matched = _CALL.match(raw)
        if matched is None:
            continue
        pid, text = matched.groups()
        if text.endswith("<unfinished ...>"):
            pending[pid] = text[: -len("<unfinished ...>")].rstrip()
            continue
        if text.startswith("<..."):
            head = pending.pop(pid, None)
            if head is None:
                continue
            text = head + text.split("resumed>", 1)[1]
        accesses.extend(_accesses(f"{pid} {text}", text))
    return accesses


def _accesses(line: str, text: str) -> list[Access]:
    name, opening, rest = text.partition("(")
    if not opening or not re.fullmatch(r"[a-z0-9_]+", name):
        return []
    arguments, end = _split_arguments(rest)
    returned = _RETURNED.match(rest[end:])
    opened = returned.group(2) if returned else None
    if name in _PATH_ARGUMENTS:
        found = []
        for index, (directory, named) in enumerate(_PATH_ARGUMENTS[name]):
            if named >= len(arguments):
                continue
            path = _unquote(arguments[named])
            if path is None:  # NULL: the call acts on the descriptor
                descriptor = _descriptor(arguments[directory]) if directory is not None else None
                if descriptor is not None:
                    found.append(Access(line, name, None, True, name in _CHANGES, descriptor=descriptor))
                continue
            base = _descriptor(arguments[directory]) if directory is not None else None
            if path == "" and base is not None:  # AT_EMPTY_PATH: the descriptor itself
                found.append(Access(line, name, None, True, name in _CHANGES, descriptor=base))
                continue
            if not path.startswith("/"):
                if base is None or not base.startswith("/"):
                    continue
                path = base.rstrip("/") + "/" + path
            follows, writes = _semantics(name, arguments, index)
            found.append(Access(line, name, path, follows, writes, opened=opened if index == 0 else None))
        return found
    if name in _DESCRIPTOR_READS or name in _DESCRIPTOR_WRITES:
        return [
            Access(line, name, None, True, name in _DESCRIPTOR_WRITES and position == 0, descriptor=path)
            for position, argument in enumerate(arguments)
            if (path := _descriptor(argument)) is not None and path.startswith("/")
        ]
    return []


def _semantics(name: str, arguments: list[str], index: int) -> tuple[bool, bool]:
    """(follows the last component, changes something) for the index-th path of the call."""
    if name in ("open", "openat", "openat2", "creat"):
        flags = arguments[{"open": 1, "creat": 1, "openat": 2, "openat2": 2}[name]] if name != "creat" else ""
        words = set(re.findall(r"[A-Z_0-9]+", flags))
        writes = name == "creat" or any(word in words for word in _OPEN_WRITES)
        # O_CREAT|O_EXCL fails on a link rather than follow it; RESOLVE_* keep the lookup in the kernel's hands.
        exclusive = "O_CREAT" in words and "O_EXCL" in words
        contained = bool(words & {"RESOLVE_IN_ROOT", "RESOLVE_BENEATH", "RESOLVE_NO_SYMLINKS"})
        return not ("O_NOFOLLOW" in words or exclusive or contained), writes
    if name in _NEVER_FOLLOW or (name == "linkat" and index == 1):
        return False, name in _CHANGES
    if name == "linkat":
        return "AT_SYMLINK_FOLLOW" in (arguments[4] if len(arguments) > 4 else ""), True
    if name == "name_to_handle_at":
        return "AT_SYMLINK_FOLLOW" in (arguments[4] if len(arguments) > 4 else ""), False
    if name in _AT_FLAGS:
        flags = arguments[_AT_FLAGS[name]] if _AT_FLAGS[name] < len(arguments) else ""
        return "AT_SYMLINK_NOFOLLOW" not in flags, name in _CHANGES
    if name == "inotify_add_watch":
        return "IN_DONT_FOLLOW" not in (arguments[2] if len(arguments) > 2 else ""), False
    return True, name in _CHANGES


def _split_arguments(text: str) -> tuple[list[str], int]:
    """The top-level arguments of a call (text starts after its '('), and the index just after its ')'."""
    arguments: list[str] = []
    current: list[str] = []
    depth = 0
    index = 0
    while index < len(text):
        char = text[index]
        if char == '"':
            end = index + 1
            while end < len(text) and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            current.append(text[index : end + 1])
            index = end + 1
            continue
        if char == "<" and re.search(r"(\d|AT_FDCWD)$", "".join(current)):
            end = text.find(">", index)  # -y: the descriptor's path
            end = len(text) - 1 if end < 0 else end
            current.append(text[index : end + 1])
            index = end + 1
            continue
        if char in "([{":
            depth += 1
        elif char in ")]}":
            if depth == 0:
                arguments.append("".join(current).strip())
                return [argument for argument in arguments if argument], index + 1
            depth -= 1
        elif char == "," and depth == 0:
            arguments.append("".join(current).strip())
            current = []
            index += 1
            continue
        current.append(char)
        index += 1
    arguments.append("".join(current).strip())
    return [argument for argument in arguments if argument], len(text)


def _descriptor(argument: str) -> Optional[str]:
    matched = _DESCRIPTOR.match(argument)
    if matched is None:
        return None
    path = matched.group(1)
    return path[: -len(" (deleted)")] if path.endswith(" (deleted)") else path


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "v": "\v", "f": "\f", "a": "\a", "b": "\b", "\\": "\\", '"': '"'}


def _unquote(argument: str) -> Optional[str]:
    """A C string as strace prints it, decoded; None for anything else (NULL, an address)."""
    if not argument.startswith('"'):
        return None
    body = argument[1 : argument.rindex('"')]
    out = bytearray()
    index = 0
    while index < len(body):
        char = body[index]
        if char != "\\":
            out += char.encode("utf-8", "surrogateescape")
            index += 1
            continue
        following = body[index + 1 : index + 2]
        if following == "x":
            out.append(int(body[index + 2 : index + 4], 16))
            index += 4
        elif following.isdigit():
            digits = re.match(r"[0-7]{1,3}", body[index + 1 :]).group(0)  # type: ignore[union-attr]
            out.append(int(digits, 8))
            index += 1 + len(digits)
        else:
            out += _ESCAPES.get(following, following).encode()
            index += 2
    return out.decode("utf-8", "surrogateescape")


# -- where the kernel went -------------------------------------------------------------------------------------

Look = Callable[[str], Optional[tuple[str, Optional[str]]]]  # path -> (kind, link target), None when absent


def live_look(path: str) -> Optional[tuple[str, Optional[str]]]:
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISLNK(info.st_mode):
        return "link", os.readlink(path)
    return ("directory" if stat.S_ISDIR(info.st_mode) else "other"), None


def snapshot_look(tree: Path, before: dict[str, tuple]) -> Look:
    """The look of the tree as it was before a command, from its snapshot; elsewhere the machine as it is."""
    prefix = str(tree)

    def look(path: str) -> Optional[tuple[str, Optional[str]]]:
        if path != prefix and not path.startswith(prefix + "/"):
            return live_look(path)
        entry = before.get(path)
        if entry is None:
            return None
        if entry[0] == "link":
            return "link", entry[2]
        return ("directory" if entry[0] == "directory" else "other"), None

    return look


def kernel_walk(path: str, follows: bool, look: Look) -> list[str]:
    """Each place the kernel's lookup of the absolute path reaches, in order, the place it ends at last: links
    followed in every component (the last one when follows), ".." from the resolved place, a missing or
    non-directory component ending the walk where the kernel fails."""
    pending = [part for part in reversed(path.split("/")) if part]
    current: list[str] = []
    reached: list[str] = []
    links = 0
    while pending:
        part = pending.pop()
        if part == ".":
            continue
        if part == "..":
            if current:
                current.pop()
            continue
        candidate = "/" + "/".join([*current, part])
        found = look(candidate)
        reached.append(candidate)
        last = not pending
        if found is None:
            return reached
        kind, target = found
        if kind == "link" and (follows or not last):
            links += 1
            if links > _LINK_LIMIT or target is None:
                return reached
            if target.startswith("/"):
                current = []
            pending.extend(reversed([piece for piece in target.split("/") if piece]))
            continue
        if not last and kind != "directory":
            return reached
        current.append(part)
    ended = "/" + "/".join(current)
    if not reached or reached[-1] != ended:
        reached.append(ended)
    return reached


def within(path: str, place: str) -> bool:
    place = place.rstrip("/") or "/"
    return place == "/" or path == place or path.startswith(place + "/")


@dataclass
class Verdict:
    """What a traced run touched where it must not: the places and the calls that reached them."""

    escapes: dict[str, list[Access]] = field(default_factory=dict)  # a forbidden place -> the calls
    strays: dict[str, list[Access]] = field(default_factory=dict)  # outside the root, not the interpreter's

    def problems(self, run: Run, label: Callable[[str], str]) -> list[str]:
        found = []
        for title, places in (("reached", self.escapes), ("touched outside the root", self.strays)):
            if not places:
                continue
            calls = {access.line: access for accesses in places.values() for access in accesses}
            shown = "\n".join(f"    {line}" for line in list(calls)[:12])
            more = f"\n    ... and {len(calls) - 12} more calls" if len(calls) > 12 else ""
            listed = ", ".join(f"{label(place)} ({_verbs(places[place])})" for place in sorted(places)[:8])
            found.append(f"{run.shown}: {title}: {listed}\n{shown}{more}")
        return found


def _verbs(accesses: list[Access]) -> str:
    return "written" if any(access.writes for access in accesses) else "read"


def judge(
    accesses: Iterable[Access],
    root: Path,
    forbidden: tuple[str, ...],
    allowed: tuple[str, ...],
    before: Look,
) -> Verdict:
    """Every place each access reached, before the command's changes and after them; a place inside a forbidden
    one is an escape wherever it is on the way, a last place outside the root and not allowed is a stray."""
    verdict = Verdict()
    inside = str(root)
    for access in accesses:
        walks: list[list[str]] = []
        if access.named is not None:
            walks.append(kernel_walk(access.named, access.follows, before))
            walks.append(kernel_walk(access.named, access.follows, live_look))
        for known in (access.descriptor, access.opened):
            if known is not None and known.startswith("/"):
                walks.append([known])
        for walk in walks:
            for place in walk:
                if any(within(place, where) for where in forbidden):
                    verdict.escapes.setdefault(place, []).append(access)
            last = walk[-1]
            if within(last, inside) or any(within(last, where) for where in forbidden):
                continue
            if not any(within(last, where) for where in allowed):
                verdict.strays.setdefault(last, []).append(access)
    return verdict


def interpreter_places(*given: Path) -> tuple[str, ...]:
    """What the interpreter itself reads outside the root while the command runs: the standard library, the
    site-packages and this checkout's package, for what the command imports late, and the files the test names
    on the command line. A baseline trace of every command on a node without links out (the no-escape layout)
    reads nothing else."""
    import site
    import sysconfig

    import nvidia_oci_hook

    paths = sysconfig.get_paths()
    places = {
        *(os.path.realpath(paths[name]) for name in ("stdlib", "platstdlib", "purelib", "platlib")),
        *(os.path.realpath(directory) for directory in site.getsitepackages()),
        os.path.realpath(os.path.dirname(nvidia_oci_hook.__file__)),
        str(REPO / "nvidia_oci_hook"),
        *(str(path) for path in given),
    }
    return tuple(sorted(places))


# -- snapshots -------------------------------------------------------------------------------------------------


def snapshot(tree: Path) -> dict[str, tuple]:
    """Every entry under tree (tree itself too): (kind, mode, content sha256 / link target / device numbers)."""
    found: dict[str, tuple] = {}
    pending = [str(tree)]
    while pending:
        path = pending.pop()
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            continue
        mode = stat.S_IMODE(info.st_mode)
        if stat.S_ISLNK(info.st_mode):
            found[path] = ("link", mode, os.readlink(path))
        elif stat.S_ISDIR(info.st_mode):
            found[path] = ("directory", mode, None)
            pending.extend(os.path.join(path, name) for name in os.listdir(path))
        elif stat.S_ISREG(info.st_mode):
            found[path] = ("file", mode, hashlib.sha256(Path(path).read_bytes()).hexdigest())
        elif stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode):
            found[path] = ("device", mode, (stat.S_ISCHR(info.st_mode), info.st_rdev))
        else:
            found[path] = ("other", mode, None)
    return found


def snapshot_changes(before: dict[str, tuple], after: dict[str, tuple]) -> list[tuple[str, str]]:
    """(path, what happened to it) for every entry created, removed or changed."""
    changes = [(path, f"created ({after[path][0]})") for path in sorted(set(after) - set(before))]
    changes += [(path, f"removed ({before[path][0]})") for path in sorted(set(before) - set(after))]
    changes += [
        (path, f"changed: {before[path]} -> {after[path]}")
        for path in sorted(set(before) & set(after))
        if before[path] != after[path]
    ]
    return changes


# -- the node and its outside ----------------------------------------------------------------------------------

CONTAINER_ID = "3f2a9c51d0e8"
CGROUP = f"/sys/fs/cgroup/devices/kubepods/{CONTAINER_ID}"
BUNDLE = f"/run/containers/{CONTAINER_ID}/userdata"
GUARD = "/usr/share/containers/oci/hooks.d/nvidia-oci-hook-guard.json"
LOG = "/var/log/nvidia-oci-hook.log"
PROMETHEUS_OUTPUT = "/var/lib/nvidia-oci-hook.prom"
DPKG = "Package: containerd\nStatus: install ok installed\nVersion: 1.7.24~ds1-6\n\n"
LOST_RULES = "c 1:3 rwm\nc 1:5 rwm\n"  # the NVIDIA rules are gone: /dev/nvidia0 is visible, open fails


def gpu_spec(**annotations: str) -> dict[str, object]:
    """A running GPU container's config.json: /dev/nvidia0 and its own allow rule."""
    return {
        "ociVersion": "1.0.2",
        "annotations": annotations,
        "linux": {
            "devices": [{"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0}],
            "resources": {"devices": [{"allow": True, "type": "c", "major": 195, "minor": 0, "access": "rwm"}]},
        },
    }


def runc_state(cgroup: str, bundle: str) -> str:
    return json.dumps({
        "id": CONTAINER_ID, "init_process_pid": 4301, "created": "2026-11-30T10:00:00Z",
        "config": {"labels": ["io.kubernetes.pod.name=trainer", f"bundle={bundle}"]},
        "cgroup_paths": {"devices": cgroup},
    })  # fmt: skip


def cgroup_files(host: FakeHost, directory: str) -> None:
    host.text(f"{directory}/devices.list", LOST_RULES).text(f"{directory}/devices.allow", "")


def guard(program: str) -> str:
    return json.dumps({"version": "1.0.0", "hook": {"path": program, "args": ["nvidia-oci-hook", "hook",
                       "createRuntime"]}, "when": {"always": True}, "stages": ["createRuntime"]})  # fmt: skip


def working_node(host: FakeHost, driver: str) -> FakeHost:
    """A node with work for every command: stale validation markers (seed 000) or stray /dev/nvidia* nodes (seed
    003), a CDI spec generated for the other driver root, no /dev/char links, a running GPU container whose
    device cgroup lost its rules, containerd (CDI on, its dpkg entry) and cri-o configured, podman's
    containers.conf, the wrapper and the guard installed, and a log for the metrics."""
    (seed_000 if driver == "host" else seed_003)(host)
    host.text("/var/run/cdi/nvidia.yaml", cdi_spec(CONTAINER if driver == "host" else "/"))
    host.text("/etc/containerd/config.toml", CONTAINERD).text("/var/lib/dpkg/status", DPKG)
    host.executable("/usr/bin/containerd-shim-runc-v2").executable("/usr/sbin/runc")
    host.text("/etc/crio/crio.conf", CRIO).directory("/etc/crio/crio.conf.d")
    host.executable("/usr/bin/crun").executable("/usr/bin/conmon")
    host.text("/etc/containers/containers.conf", "[engine]\n")
    host.executable("/usr/bin/nvidia-oci-runtime").executable("/usr/bin/nvidia-oci-hook")
    host.text(GUARD, guard("/usr/bin/nvidia-oci-hook"))
    host.text(f"/run/runc/{CONTAINER_ID}/state.json", runc_state(CGROUP, BUNDLE))
    host.text(f"{BUNDLE}/config.json", json.dumps(gpu_spec()))
    cgroup_files(host, CGROUP)
    entry = {"summary": "2 edits", "mode": "runtime", "container": CONTAINER_ID, "edits": [{"code": "DEV003"}]}
    host.text(LOG, json.dumps(entry) + "\n").directory("/var/lib")
    return host


def given_files(directory: Path, requests: tuple[str, ...]) -> tuple[Path, Path]:
    """The tool's configuration and the config.json `reconcile` reads: a GPU container asking for CDI devices,
    with a library under the driver root the node does not have and /dev/nvidia0 without its rule."""
    directory.mkdir(parents=True, exist_ok=True)
    settings = directory / "config.yaml"
    settings.write_text("driver_roots: [/, /run/nvidia/driver]\ncdi:\n  spec_dirs: [/etc/cdi, /var/run/cdi]\n")
    container = {
        "ociVersion": "1.0.2",
        "process": {"args": ["nvidia-smi"], "cwd": "/", "env": ["PATH=/usr/bin"]},
        "root": {"path": "rootfs"},
        "annotations": {"cdi.k8s.io/gpu": ",".join(requests)},
        "mounts": [{"destination": "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "type": "bind",
                    "source": f"{CONTAINER}/usr/lib/x86_64-linux-gnu/libcuda.so.1", "options": ["ro", "bind"]}],
        "linux": {"devices": [{"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0}]},
    }  # fmt: skip
    config = directory / "config.json"
    config.write_text(json.dumps(container, indent=2))
    return settings, config


def climbing(start: str, rest: str) -> str:
    """A node path that starts at the node path start and climbs with ".." one step past the root into the
    directory that holds the node and its outside: the kernel, joining it to the root, lands in CASE/rest; resolved
    inside the root it is /rest."""
    depth = len([part for part in start.split("/") if part])
    return start.rstrip("/") + "/.." * (depth + 1) + "/" + rest


def move(host: FakeHost, path: str, destination: Path) -> None:
    """Move a node path's content to destination (outside), leaving nothing at the node path."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(host.root / path.lstrip("/")), str(destination))


def under_root(host: FakeHost, absolute: Path) -> FakeHost:
    """The same absolute path, taken as a node path: where an absolute link target lands inside the root."""
    return FakeHost(host.root / str(absolute).lstrip("/"))


def bait_spec() -> str:
    """A CDI spec outside the root that `cdi reconcile` would rewrite, were it read: generated for a driver root
    the node does not have, with a device name of its own."""
    return cdi_spec(CONTAINER).replace('name: "0"', 'name: "bait"')


BAIT_CRIO = """\
[crio.runtime]
hooks_dir = ["/opt/bait-hooks"]
[crio.runtime.runtimes.bait]
runtime_path = "/usr/bin/crun"
runtime_root = "/run/bait-runc"
"""
BAIT_CONTAINERD = """\
version = 2
[plugins."io.containerd.grpc.v1.cri"]
  enable_cdi = true
  cdi_spec_dirs = ["/opt/bait-cdi"]
"""


def _etc_link_absolute(node: FakeHost, outside: FakeHost) -> None:
    move(node, "/etc", outside.root / "etc")
    node.symlink("/etc", str(outside.root / "etc"))


def _cdi_dir_absolute(node: FakeHost, outside: FakeHost) -> None:
    # The target is an absolute path that exists on this machine only as the outside directory.
    outside.text("/cdi/nvidia.yaml", bait_spec())
    node.symlink("/etc/cdi", str(outside.root / "cdi"))


def _cdi_dir_climbing(node: FakeHost, outside: FakeHost) -> None:
    outside.text("/cdi/nvidia.yaml", bait_spec())
    node.symlink("/etc/cdi", "../../outside/cdi")


def _containerd_dir_link(node: FakeHost, outside: FakeHost) -> None:
    move(node, "/etc/containerd", outside.root / "containerd")
    node.symlink("/etc/containerd", "../../outside/containerd")


def _last_component_links(node: FakeHost, outside: FakeHost) -> None:
    outside.text("/x.yaml", bait_spec()).text("/10.conf", BAIT_CRIO)
    node.symlink("/etc/cdi/x.yaml", str(outside.root / "x.yaml"))
    node.symlink("/etc/crio/crio.conf.d/10.conf", str(outside.root / "10.conf"))
    bait = {"summary": "bait", "mode": "precreate", "container": "bait", "edits": [{"code": "BAIT"}]}
    outside.text("/rotated.log", json.dumps(bait) + "\n")
    node.symlink(f"{LOG}.1", str(outside.root / "rotated.log"))


def _machine_files(node: FakeHost, outside: FakeHost) -> None:
    node.symlink("/etc/cdi/x.yaml", "/etc/passwd")


def _dev_char_link(node: FakeHost, outside: FakeHost) -> None:
    outside.directory("/devchar").symlink("/devchar/195:254", "../null")
    node.symlink("/dev/char", str(outside.root / "devchar"))


def _sys_link(node: FakeHost, outside: FakeHost) -> None:
    move(node, "/sys", outside.root / "sys")
    node.symlink("/sys", str(outside.root / "sys"))
    # Where the absolute target lands inside the root: the container's cgroup is there, for the repair to act on.
    cgroup_files(under_root(node, outside.root / "sys"), CGROUP[len("/sys") :])


def _link_loops(node: FakeHost, outside: FakeHost) -> None:
    node.symlink("/etc/cdi", "cdi-loop").symlink("/etc/cdi-loop", "cdi")
    shutil.rmtree(node.root / "etc/crio/crio.conf.d")
    node.symlink("/etc/crio/crio.conf.d", "crio.conf.d")
    # 42 links between /etc/containerd and its files: more than a lookup may follow.
    move(node, "/etc/containerd", node.root / "etc/containerd-real")
    node.symlink("/etc/containerd", "/etc/chain/1")
    for step in range(1, _LINK_LIMIT + 1):
        node.symlink(f"/etc/chain/{step}", f"/etc/chain/{step + 1}")
    node.symlink(f"/etc/chain/{_LINK_LIMIT + 1}", "/etc/containerd-real")


def _runc_state_dotdot(node: FakeHost, outside: FakeHost) -> None:
    cgroup = climbing(CGROUP, "outside/cgroup")
    bundle = climbing(f"/run/containers/{CONTAINER_ID}", "outside/bundle")
    node.text(f"/run/runc/{CONTAINER_ID}/state.json", runc_state(cgroup, bundle))
    # Inside the root the paths end at /outside/...: the container and its cgroup are there.
    cgroup_files(node, "/outside/cgroup")
    node.text("/outside/bundle/config.json", json.dumps(gpu_spec()))
    cgroup_files(outside, "/cgroup")
    outside.text("/bundle/config.json", json.dumps(gpu_spec(**{"io.kubernetes.pod.name": "bait"})))


def _containerd_imports_dotdot(node: FakeHost, outside: FakeHost) -> None:
    imports = 'version = 2\nimports = ["../../../outside/imported.toml"]\n'
    node.text("/etc/containerd/config.toml", CONTAINERD.replace("version = 2\n", imports, 1))
    outside.text("/imported.toml", BAIT_CONTAINERD)


def _daemon_config_dotdot(node: FakeHost, outside: FakeHost) -> None:
    containerd = ["/usr/bin/containerd", "--config", climbing("/", "outside/containerd.toml")]
    crio = ["/usr/bin/crio", "--config", climbing("/", "outside/crio.conf"), "-d", climbing("/", "outside/crio.d")]
    node.text("/proc/4242/cmdline", "\0".join(containerd) + "\0").text("/proc/4243/cmdline", "\0".join(crio) + "\0")
    outside.text("/containerd.toml", BAIT_CONTAINERD).text("/crio.conf", BAIT_CRIO).text("/crio.d/10.conf", BAIT_CRIO)


def _cdi_hostpath_dotdot(node: FakeHost, outside: FakeHost) -> None:
    spec = f"""\
cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
  - name: "0"
    containerEdits:
      deviceNodes:
        - path: /dev/nvidia0
          hostPath: {climbing("/dev", "outside/nvidia0")}
containerEdits:
  deviceNodes:
    - path: /dev/nvidiactl
      hostPath: {climbing("/dev", "outside/nvidiactl")}
  hooks:
    - hookName: createContainer
      path: {climbing("/usr/bin", "outside/nvidia-cdi-hook")}
  mounts:
    - hostPath: {climbing("/usr/lib/x86_64-linux-gnu", "outside/libcuda.so.1")}
      containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.1
      options: [ro, nosuid, nodev, bind]
"""
    node.text("/var/run/cdi/nvidia.yaml", spec)
    outside.device("/nvidia0", "c", 195, 0).device("/nvidiactl", "c", 195, 255)
    outside.executable("/nvidia-cdi-hook").file("/libcuda.so.1")


def _hooksd_dotdot(node: FakeHost, outside: FakeHost) -> None:
    program = climbing("/", "outside/nvidia-oci-hook")
    node.text(GUARD, guard(program)).executable("/outside/nvidia-oci-hook")
    prestart = {"version": "1.0.0", "hook": {"path": climbing("/usr/bin", "outside/prestart-hook")},
                "when": {"always": True}, "stages": ["prestart"]}  # fmt: skip
    node.text("/usr/share/containers/oci/hooks.d/10-prestart.json", json.dumps(prestart))
    outside.executable("/nvidia-oci-hook").executable("/prestart-hook")


def _proc_link(node: FakeHost, outside: FakeHost) -> None:
    move(node, "/proc", outside.root / "proc")
    node.symlink("/proc", str(outside.root / "proc"))
    daemon = "/usr/bin/containerd\0--config\0/etc/containerd/config.toml\0"
    outside.text("/proc/4242/cmdline", daemon).text("/proc/driver/nvidia/params", "ModifyDeviceFiles: 1\n")
    outside.text("/proc/devices", "Character devices:\n195 nvidia-frontend\n508 nvidia-uvm\n")


def _var_run_link(node: FakeHost, outside: FakeHost) -> None:
    """The node's /var/run is a link to /run, as on every systemd node; its spec is in /run/cdi."""
    move(node, "/var/run/cdi", node.root / "run/cdi")
    shutil.rmtree(node.root / "var/run")
    node.symlink("/var/run", "/run")


NODE_SPEC = "/run/cdi/nvidia.yaml"


def _reads_the_node_spec_lint(root: Path, runs: list[Run]) -> list[str]:
    report = json.loads(runs[0].stdout)
    stale = [
        file["path"]
        for file in report["files"]
        for finding in file["findings"]
        if finding["code"] == "CDI102" and file["path"].endswith(NODE_SPEC)
    ]
    if stale:
        return []
    return [f"lint --node reports no CDI102 in the node's {NODE_SPEC} (through /var/run/cdi): it was not read"]


def _reads_the_node_spec_resolve(root: Path, runs: list[Run]) -> list[str]:
    report = json.loads(runs[0].stdout)
    found = [
        name
        for engine in report["engines"]
        for name in engine["names"]
        if name["resolved"] and str(name.get("spec", "")).endswith(NODE_SPEC)
    ]
    if found:
        return []
    return [f"cdi resolve does not resolve nvidia.com/gpu=0 from the node's {NODE_SPEC}: {runs[0].stdout[:400]}"]


def _rewrites_the_node_spec(root: Path, runs: list[Run]) -> list[str]:
    if f"{CONTAINER}/" not in (root / NODE_SPEC.lstrip("/")).read_text():
        return []
    return [f"cdi reconcile left the node's {NODE_SPEC} naming {CONTAINER}, which the node does not have"]


@dataclass(frozen=True)
class Layout:
    name: str
    build: Callable[[FakeHost, FakeHost], None]  # (node, outside), on top of working_node
    commands: tuple[str, ...]
    driver: str = "host"  # working_node's: seed 000 (stale markers) or "container", seed 003 (stray nodes)
    machine: tuple[str, ...] = ()  # this machine's own places the layout's links lead to
    expect: dict[str, Callable[[Path, list[Run]], list[str]]] = field(default_factory=dict)


DOCTOR = ("doctor-fix", "doctor-fix-dry-run", "doctor-fix-restore-device-access", "doctor-prometheus")
NODE = ("lint-node", *DOCTOR)
CDI = ("reconcile", "cdi-reconcile", "cdi-reconcile-dry-run", "cdi-resolve")
CONFIGURE = ("configure-crio", "configure-containerd", "configure-podman")
EVERY_COMMAND = (*NODE, *CDI, *CONFIGURE)

LAYOUTS = (
    # No link out: proves the harness, so every command passes it today.
    Layout("no-escape", lambda node, outside: None, EVERY_COMMAND),
    Layout("etc-link-absolute", _etc_link_absolute, EVERY_COMMAND),
    Layout("cdi-dir-link-absolute", _cdi_dir_absolute, (*NODE, *CDI)),
    Layout("cdi-dir-link-climbing", _cdi_dir_climbing, (*NODE, *CDI)),
    Layout("containerd-dir-link", _containerd_dir_link, (*NODE, "cdi-resolve", "configure-containerd"), "container"),
    Layout("last-component-links", _last_component_links, (*NODE, *CDI, "configure-crio")),
    Layout("links-to-machine-files", _machine_files, (*NODE, *CDI), machine=("/etc/passwd",)),
    Layout("dev-char-link", _dev_char_link, NODE, "container"),
    Layout("sys-link", _sys_link, DOCTOR, "container"),
    Layout("link-loops", _link_loops, (*NODE, *CDI, "configure-crio", "configure-containerd")),
    Layout("runc-state-dotdot", _runc_state_dotdot, DOCTOR),
    Layout("containerd-imports-dotdot", _containerd_imports_dotdot, (*NODE, "cdi-resolve", "configure-containerd")),
    Layout("daemon-config-dotdot", _daemon_config_dotdot, (*NODE, "cdi-resolve"), "container"),
    Layout("cdi-hostpath-dotdot", _cdi_hostpath_dotdot, (*NODE, *CDI)),
    Layout("hooksd-path-dotdot", _hooksd_dotdot, (*NODE, "configure-crio", "configure-podman"), "container"),
    Layout("proc-link", _proc_link, (*NODE, *CDI)),
    Layout(
        "var-run-link",
        _var_run_link,
        (*NODE, *CDI),
        machine=("/run",),
        expect={
            "lint-node": _reads_the_node_spec_lint,
            "cdi-resolve": _reads_the_node_spec_resolve,
            "cdi-reconcile": _rewrites_the_node_spec,
        },
    ),
)


def _configure(engine: str) -> Callable[[str, Path], list[list[str]]]:
    # --undo right after: what it removes must be where configure wrote, inside the root.
    return lambda root, config: [
        ["configure", "--runtime", engine, "--host-root", root],
        ["configure", "--runtime", engine, "--host-root", root, "--undo"],
    ]


# Each command's runs, from the node root and the config.json for `reconcile`.
COMMANDS: dict[str, Callable[[str, Path], list[list[str]]]] = {
    "lint-node": lambda root, config: [["lint", "--node", "--host-root", root, "--format", "json"]],
    "doctor-fix": lambda root, config: [["doctor", "--host-root", root, "--fix"]],
    "doctor-fix-dry-run": lambda root, config: [["doctor", "--host-root", root, "--fix", "--dry-run"]],
    "doctor-fix-restore-device-access": lambda root, config: [
        ["doctor", "--host-root", root, "--fix", "--restore-device-access"]
    ],
    "doctor-prometheus": lambda root, config: [
        ["doctor", "--host-root", root, "--format", "prometheus", "--output", root + PROMETHEUS_OUTPUT]
    ],
    "reconcile": lambda root, config: [["reconcile", str(config), "--host-root", root]],
    "cdi-reconcile": lambda root, config: [["cdi", "reconcile", "--host-root", root]],
    "cdi-reconcile-dry-run": lambda root, config: [["cdi", "reconcile", "--host-root", root, "--dry-run"]],
    "cdi-resolve": lambda root, config: [
        ["cdi", "resolve", "nvidia.com/gpu=0", "--host-root", root, "--format", "json"]
    ],
    "configure-crio": _configure("crio"),
    "configure-containerd": _configure("containerd"),
    "configure-podman": _configure("podman"),
}


@dataclass(frozen=True)
class Case:
    layout: Layout
    command: str

    @property
    def id(self) -> str:
        return f"{self.layout.name}-{self.command}"


CASES = tuple(Case(layout, command) for layout in LAYOUTS for command in layout.commands)


@dataclass
class Outcome:
    case: Case
    runs: list[Run]
    problems: list[str]
    escaped: list[str]  # where it went outside, one short line each


def run_case(case: Case, directory: Path) -> Outcome:
    """Build the case's node and outside in directory, run its command traced, and judge every run."""
    node, outside = FakeHost(directory / "node"), FakeHost(directory / "outside")
    node.root.mkdir()
    outside.root.mkdir()
    working_node(node, case.layout.driver)
    case.layout.build(node, outside)
    settings, config = given_files(directory / "given", ("nvidia.com/gpu=0",))
    allowed = interpreter_places(settings, config)
    forbidden = (str(outside.root), *case.layout.machine)

    def label(place: str) -> str:
        return "OUTSIDE" + place[len(str(outside.root)) :] if within(place, str(outside.root)) else place

    outside_before = snapshot(outside.root)
    runs: list[Run] = []
    problems: list[str] = []
    escaped: list[str] = []
    for index, argv in enumerate(COMMANDS[case.command](str(node.root), config)):
        before = snapshot(directory)
        run = run_traced(["--config", str(settings), *argv], directory / f"strace.{index}.log")
        runs.append(run)
        verdict = judge(run.accesses, node.root, forbidden, allowed, snapshot_look(directory, before))
        problems += verdict.problems(run, label)
        for title, places in (("reached", verdict.escapes), ("stray", verdict.strays)):
            if places:
                deepest = sorted(places, key=lambda place: (-place.count("/"), place))[:3]
                listed = ", ".join(f"{label(place)} ({_verbs(places[place])})" for place in deepest)
                step = "configure --undo" if "--undo" in argv else argv[0]
                escaped.append(f"{step}: {title} {listed}" + (f" +{len(places) - 3}" if len(places) > 3 else ""))
        if "internal error" in run.stderr or "Traceback" in run.stderr:
            problems.append(f"{run.shown}: ended in an internal error, not a verdict: {run.stderr.strip()[:600]}")
    changed = snapshot_changes(outside_before, snapshot(outside.root))
    if changed:
        problems.append("OUTSIDE changed:\n" + "\n".join(f"    {label(path)} {what}" for path, what in changed[:20]))
        escaped.append("OUTSIDE " + ", ".join(f"{label(path)} {what.split(':')[0]}" for path, what in changed[:3]))
    expectation = case.layout.expect.get(case.command)
    if expectation is not None:
        problems += expectation(node.root, runs)
    return Outcome(case, runs, problems, escaped)
