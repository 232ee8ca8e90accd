"""What the sh fronts (`nvidia_oci_hook.launcher`) read instead of the configuration: the record in the state
directory.

The dispatcher in front of the wrapper and the front of the guard hook decide in sh whether Python must start,
from the settings Python last read, kept here with the configuration file's modification time. Python rewrites
the record whenever it reads a configuration that differs from it, and writes nothing it cannot vouch for: a
file with problems, settings from the environment, a file modified too recently to compare. When Python does
start, it takes its settings from the record too, where the file's identity is still the one recorded, instead
of parsing the file again.
"""

from __future__ import annotations

import time

from nvidia_oci_hook import leanos
from nvidia_oci_hook.engine import jsoncodec
from nvidia_oci_hook.runtime.codecache import own_directory

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

    from nvidia_oci_hook.config import Settings

# Where the record is kept: root's tmpfs, gone at boot like every container.
DEFAULT_STATE_DIR = "/run/nvidia-oci-hook"
RECORD_FILE = "settings"
# The record's lines: "present" or "absent" (the configuration file); the low-level runtime names; the driver
# roots other than "/"; the CDI annotation prefixes; "env" when NVIDIA_VISIBLE_DEVICES may name CDI devices,
# else "-"; "fail-closed" or "fail-open" (policy.fail_closed); the configuration file's path. Lists are joined
# with the separator. An eighth line, which the fronts do not read, holds every setting and the file's identity
# (mode, device, inode, size, modification time in ns) as JSON, for Python.
RECORD_SEPARATOR = ":"
# What a recorded root or prefix may hold: characters that no JSON escape the fronts let through can stand for,
# so that a config names one only by writing it out.
_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._/-")
# A configuration file modified this recently is not recorded: the fronts compare whole seconds, so an edit
# within the second the record was taken at would go unseen.
_SETTLED_SECONDS = 2.0
# A record is a few hundred bytes: anything much larger was not written by remember.
_RECORD_LIMIT = 1 << 16


def file_identity(path: str) -> Optional[tuple[int, int, int, int, int]]:
    try:
        info = leanos.stat(path)
    except OSError:
        return None
    return (info.st_mode, info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


def _plain(text: str) -> bool:
    return bool(text) and all(char in _PLAIN for char in text)


def record_lines(settings: Settings) -> Optional[str]:
    """What the fronts need from settings, or None when it cannot be written down for them."""
    names = settings.runtime_low_level
    if not names or any(not name or "\n" in name or RECORD_SEPARATOR in name for name in names):
        return None
    # Without a trailing slash: the root itself, as a path a config names, contains it too.
    roots = [root.rstrip("/") for root in settings.driver_roots if root.rstrip("/")]
    prefixes = settings.cdi_annotation_prefixes
    if not all(_plain(root) for root in roots) or not all(_plain(prefix) for prefix in prefixes):
        return None
    lines = (
        RECORD_SEPARATOR.join(names),
        RECORD_SEPARATOR.join(roots),
        RECORD_SEPARATOR.join(prefixes),
        "env" if settings.cdi_visible_devices_env else "-",
        "fail-closed" if settings.policy_fail_closed else "fail-open",
    )
    return "".join(line + "\n" for line in lines)


def remember(
    state_dir: str,
    config_file: str,
    before: Optional[tuple[int, int, int, int, int]],
    settings: Settings,
    problems: list[str],
    environ: dict[str, str],
) -> None:
    """Record what the sh fronts read, when it follows from the configuration file alone.

    config_file is the file the settings were read from, and before its identity taken before they were read: a
    file that changed while it was read, or too recently for the fronts' whole-second comparison, is not
    recorded; nor is one with problems, which only Python reports. Failing to record only means that the next
    call starts Python again.
    """
    from nvidia_oci_hook.config import SETTINGS

    if problems or any(key.env in environ for key in SETTINGS) or not config_file.isprintable():
        return
    recorded = record_lines(settings)
    if recorded is None or file_identity(config_file) != before:
        return
    present = before is not None
    if present:
        assert before is not None
        if before[0] & 0o170000 != 0o100000 or time.time() - before[4] / 1e9 < _SETTLED_SECONDS:
            return
    everything = {"identity": list(before) if before else None, "settings": _values(settings)}
    record = ("present\n" if present else "absent\n") + recorded + config_file + "\n"
    record += jsoncodec.dumps(everything) + "\n"
    path = leanos.join(state_dir, RECORD_FILE)
    try:
        with open(path, encoding="utf-8") as handle:
            unchanged = handle.read() == record
        if unchanged and (not present or leanos.stat(path).st_mtime_ns == before[4]):  # type: ignore[index]
            return
    except (OSError, UnicodeDecodeError):
        pass
    temporary = f"{path}.{leanos.getpid()}"
    try:
        leanos.makedirs(state_dir, mode=0o700, exist_ok=True)
        if not own_directory(state_dir):
            return  # the fronts trust only their own user's directory: not one others could write into
        flags = leanos.O_WRONLY | leanos.O_CREAT | leanos.O_EXCL | leanos.O_NOFOLLOW | leanos.O_CLOEXEC
        fd = leanos.open(temporary, flags, 0o644)
        try:
            leanos.write(fd, record.encode("utf-8"))
        finally:
            leanos.close(fd)
        if present:
            assert before is not None
            leanos.utime(temporary, ns=(before[4], before[4]))
        leanos.rename(temporary, path)
    except OSError:
        try:  # noqa: SIM105 - contextlib would be one more import on every container start
            leanos.unlink(temporary)
        except OSError:
            pass


def _values(settings: Settings) -> dict[str, object]:
    from nvidia_oci_hook.config import SETTINGS

    return {key.attribute: getattr(settings, key.attribute) for key in SETTINGS}


def recorded_settings(state_dir: str, config_file: str, named: bool, environ: dict[str, str]) -> Optional[Settings]:
    """The settings the record holds for config_file, where they are what reading it would give: the record is
    this user's own, in this user's own directory, the file's identity is the one recorded (a named file must
    exist), and no setting comes from the environment."""
    from nvidia_oci_hook.config import SETTINGS, Settings

    if any(key.env in environ for key in SETTINGS):
        return None
    try:
        if not own_directory(state_dir):
            return None
        fd = leanos.open(leanos.join(state_dir, RECORD_FILE), leanos.O_RDONLY | leanos.O_NOFOLLOW | leanos.O_CLOEXEC)
        try:
            info = leanos.fstat(fd)
            if info.st_uid != leanos.geteuid() or info.st_mode & 0o170000 != 0o100000 or info.st_size > _RECORD_LIMIT:
                return None
            data = leanos.read(fd, _RECORD_LIMIT + 1)
        finally:
            leanos.close(fd)
    except OSError:
        return None
    lines = data.decode("utf-8", "replace").split("\n")
    if len(lines) != 9 or lines[6] != config_file or lines[8]:
        return None
    identity = file_identity(config_file)
    if identity is None and named:
        return None
    try:
        everything = jsoncodec.loads(lines[7])
        if everything["identity"] != (list(identity) if identity else None):
            return None
        values = {
            name: tuple(value) if isinstance(value, list) else value for name, value in everything["settings"].items()
        }
        return Settings(**values)
    except (jsoncodec.JSONDecodeError, KeyError, TypeError, AttributeError):
        return None


def load(config_path: Optional[str], state_dir: Optional[str]) -> tuple[Settings, list[str]]:
    """The settings in force and the problems with them: from the record where it holds them unchanged, else
    read from the configuration (leniently, as the runtime path must) and recorded for the next call.

    state_dir is given by the sh fronts, which read the record there; without it, the file is simply read.
    """
    from nvidia_oci_hook.config import config_file, config_file_named, load_settings_leniently

    if state_dir is None:
        return load_settings_leniently(config_path)
    environ = dict(leanos.environ())
    settings_file = config_file(config_path, environ)
    recorded = recorded_settings(state_dir, settings_file, config_file_named(config_path, environ), environ)
    if recorded is not None:
        return recorded, []
    before = file_identity(settings_file)
    settings, problems = load_settings_leniently(config_path)
    remember(state_dir, settings_file, before, settings, problems, environ)
    return settings, problems
