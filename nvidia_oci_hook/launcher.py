"""Launchers for the installed commands: a fixed interpreter, started with -I -S, and a POSIX-sh dispatcher.

-I keeps the caller's environment (PYTHONPATH, the working directory) out of a program that runtimes start as
root; -S skips the site module, a few milliseconds of every container start. The package's directory is put on
sys.path explicitly instead; the commands that need site-packages (click, PyYAML) set site up themselves.

`nvidia-oci-runtime` is a POSIX-sh dispatcher: the engines call the runtime several times per container
(`create`, then `state`, `start`, `kill`, `delete`), and only `create` needs Python. The dispatcher scans the
arguments as the Python wrapper does (`runtime.wrapper.parse_invocation`) and execs the low-level runtime for
every other call, found as the wrapper finds it (`runtime.wrapper.find_runtime`) from the names the wrapper last
read in the configuration; it hands the call to Python whenever it cannot be sure of the same answer.

    python -m nvidia_oci_hook.launcher DIRECTORY [--interpreter PATH] [--package-parent DIR]...
                                                 [--config FILE] [--state-dir DIR]

writes `nvidia-oci-hook` and `nvidia-oci-runtime` into DIRECTORY. --package-parent is a directory that will hold
the installed package or its bundled dependencies, put on sys.path in the order given (a distribution package's
site directory, /usr/lib/python3/dist-packages on Debian); by default the one this package is imported from.
--config is the configuration file the installed wrapper reads (default /etc/nvidia-oci-hook/config.yaml, and
NVIDIA_OCI_HOOK_CONFIG still wins); --state-dir is where the wrapper keeps what the dispatcher reads
(default /run/nvidia-oci-hook, root's tmpfs).
"""

from __future__ import annotations

import os
import sys

from nvidia_oci_hook.config import DEFAULT_CONFIG_PATH
from nvidia_oci_hook.runtime.wrapper import DEFAULT_STATE_DIR, GLOBAL_VALUE_OPTIONS, LOW_LEVEL_FILE, LOW_LEVEL_SEPARATOR

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Callable, Optional

HOOK_COMMAND = "nvidia-oci-hook"
RUNTIME_COMMAND = "nvidia-oci-runtime"


def _python_literal(text: str) -> str:
    """A Python string literal for text, in double quotes, so that it can stand inside sh's single quotes."""
    escaped = "".join(
        "\\" + char if char in '\\"' else (char if " " <= char < "\x7f" else f"\\U{ord(char):08x}") for char in text
    )
    return f'"{escaped}"'


def _sh_literal(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _package_path(package_parents: Sequence[str], literal: Callable[[str], str] = repr) -> str:
    # After the standard library: a site directory must not shadow it.
    return "".join(f"sys.path.append({literal(parent)})\n" for parent in package_parents)


def launcher_text(interpreter: str, package_parents: Sequence[str], module: str, function: str) -> str:
    path = _package_path(package_parents)
    return f"#!{interpreter} -IS\nimport sys\n{path}from {module} import {function}\n{function}()\n"


DISPATCHER = r"""#!/bin/sh
# nvidia-oci-runtime, in front of runc or crun; written by nvidia_oci_hook.launcher.
# Only `create` needs Python: it reconciles the bundle's config.json. Every other call is exec'd from here to the
# runtime the Python wrapper would run: the names it last read in the configuration (kept in the state directory,
# valid while the file keeps the modification time they were read at) looked up in PATH as it looks them up.
# Whenever this script cannot be sure of the same answer, Python decides.
config=@CONFIG@
state=@STATE@

python() {
    exec @INTERPRETER@ -IS -c @CODE@ "$0" "$@"
}

# The arguments as the wrapper scans them: one leading "--" dropped, then runc's global options (Go's flag
# syntax: -x, --x, -x=v, --x v), up to the subcommand.
subcommand= take_value= after_separator= first=1
for arg do
    if [ -n "$first" ]; then
        first=
        [ "$arg" = -- ] && continue
    fi
    if [ -n "$take_value" ]; then
        take_value=
    elif [ -n "$after_separator" ]; then
        subcommand=$arg
        break
    else
        case $arg in
        --) after_separator=1 ;;
        -) subcommand=$arg && break ;;
        -*)
            case ${arg#"${arg%%[!-]*}"} in
            @VALUE_OPTIONS@) take_value=1 ;;
            esac
            ;;
        *) subcommand=$arg && break ;;
        esac
    fi
done
[ "$subcommand" != create ] || python "$@"

# What the wrapper last read; another configuration file or a low-level runtime named in the environment is
# Python's to read. Only root's own files are trusted: the runtime runs as root.
[ -z "${NVIDIA_OCI_HOOK_CONFIG-}" ] && [ -z "${NVIDIA_OCI_HOOK_RUNTIME_LOW_LEVEL+set}" ] || python "$@"
record=$state/@LOW_LEVEL_FILE@
[ -O "$state" ] && [ -O "$record" ] && IFS= read -r recorded <"$record" || python "$@"
case $recorded in
present@SEP@?*)
    # The wrapper gave the record the file's modification time: neither may be newer than the other.
    [ -f "$config" ] && ! [ "$config" -nt "$record" ] && ! [ "$config" -ot "$record" ] || python "$@"
    ;;
absent@SEP@?*) ! [ -e "$config" ] || python "$@" ;;
*) python "$@" ;;
esac

# The first name that is an executable file, in PATH unless it holds a slash; never this script itself.
names=${recorded#*@SEP@}@SEP@
search=${PATH:-/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin}
while [ -n "$names" ]; do
    name=${names%%@SEP@*}
    names=${names#*@SEP@}
    case $name in
    */*) directories= ;;
    *) directories=$search: ;;
    esac
    while :; do
        if [ -z "$directories" ]; then
            candidate=$name
        else
            directory=${directories%%:*}
            directories=${directories#*:}
            case $directory in
            '') candidate=./$name ;;
            */) candidate=$directory$name ;;
            *) candidate=$directory/$name ;;
            esac
        fi
        if [ -f "$candidate" ] && [ -x "$candidate" ] && ! [ "$candidate" -ef "$0" ]; then
            [ "${1-}" != -- ] || shift
            exec "$candidate" "$@"
        fi
        [ -n "$directories" ] || break
    done
done
python "$@"
"""


def dispatcher_text(interpreter: str, package_parents: Sequence[str], config_path: str, state_dir: str) -> str:
    explicit_config = "None" if config_path == DEFAULT_CONFIG_PATH else _python_literal(config_path)
    code = (
        "import sys\n"
        "del sys.argv[0]\n"  # python -c leaves "-c" there: the dispatcher's own path comes next
        + _package_path(package_parents, _python_literal)
        + "from nvidia_oci_hook.runtime.wrapper import run\n"
        + f"run({explicit_config}, {_python_literal(state_dir)})\n"
    )
    replacements = {
        "@CONFIG@": _sh_literal(config_path),
        "@STATE@": _sh_literal(state_dir),
        "@INTERPRETER@": _sh_literal(interpreter),
        "@CODE@": _sh_literal(code),
        "@VALUE_OPTIONS@": " | ".join(sorted(GLOBAL_VALUE_OPTIONS)),
        "@LOW_LEVEL_FILE@": LOW_LEVEL_FILE,
        "@SEP@": LOW_LEVEL_SEPARATOR,
    }
    text = DISPATCHER
    for placeholder, value in replacements.items():
        text = text.replace(placeholder, value)
    return text


def write_launchers(
    directory: str,
    interpreter: Optional[str] = None,
    package_parents: Optional[Sequence[str]] = None,
    config_path: Optional[str] = None,
    state_dir: Optional[str] = None,
) -> list[str]:
    """Writes nvidia-oci-hook and nvidia-oci-runtime into directory; returns their paths, in that order."""
    interpreter = interpreter or sys.executable
    parents = list(package_parents or [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))])
    texts = {
        HOOK_COMMAND: launcher_text(interpreter, parents, "nvidia_oci_hook.entry", "run"),
        RUNTIME_COMMAND: dispatcher_text(
            interpreter, parents, config_path or DEFAULT_CONFIG_PATH, state_dir or DEFAULT_STATE_DIR
        ),
    }
    written = []
    os.makedirs(directory, exist_ok=True)
    for name, text in texts.items():
        path = os.path.join(directory, name)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(path, 0o755)
        written.append(path)
    return written


USAGE = (
    "usage: python -m nvidia_oci_hook.launcher DIRECTORY [--interpreter PATH] [--package-parent DIR]... "
    "[--config FILE] [--state-dir DIR]\n"
)
_SINGLE_OPTIONS = ("--interpreter", "--config", "--state-dir")


def main(argv: list[str]) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        sys.stdout.write(__doc__ or "")
        return 0
    if not argv or argv[0].startswith("-") or len(argv) % 2 != 1:
        sys.stderr.write(USAGE)
        return 2
    single: dict[str, str] = {}
    parents: list[str] = []
    for option, value in zip(argv[1::2], argv[2::2]):
        if option == "--package-parent":
            parents.append(value)
        elif option in _SINGLE_OPTIONS and option not in single:
            single[option] = value
        else:
            sys.stderr.write(USAGE)
            return 2
    written = write_launchers(
        argv[0], single.get("--interpreter"), parents, single.get("--config"), single.get("--state-dir")
    )
    for path in written:
        sys.stdout.write(path + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
