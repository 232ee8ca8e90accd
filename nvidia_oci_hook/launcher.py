"""Launchers for the installed commands: a fixed interpreter, started with -I -S, and a POSIX-sh dispatcher.

-I keeps the caller's environment (PYTHONPATH, the working directory) out of a program that runtimes start as
root; -S skips the site module, a few milliseconds of every container start. The package's directory is put on
sys.path explicitly instead; the commands that need site-packages (click, PyYAML) set site up themselves.

`nvidia-oci-runtime` is a POSIX-sh dispatcher: the engines call the runtime several times per container
(`create`, then `state`, `start`, `kill`, `delete`), and only a `create` may need Python. The dispatcher scans
the arguments as the Python wrapper does (`runtime.wrapper.parse_invocation`) and execs the low-level runtime for
every other call, and for a `create` whose config it proves the plan would leave as it is, found as the wrapper
finds it (`runtime.wrapper.find_runtime`) from what the wrapper last read in the configuration; it hands the
call to Python whenever it cannot be sure of the same answer.

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

from nvidia_oci_hook.config import DEFAULT_CONFIG_PATH, SETTINGS
from nvidia_oci_hook.runtime.wrapper import (
    CREATE_VALUE_OPTIONS,
    DEFAULT_STATE_DIR,
    GLOBAL_VALUE_OPTIONS,
    RECORD_FILE,
    RECORD_SEPARATOR,
)

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
# Python reconciles the bundle's config.json on `create`. Every other call, and a `create` whose config the plan
# would leave as it is, is exec'd from here to the runtime the Python wrapper would run: what the wrapper last
# read in the configuration is kept in the state directory, valid while the file keeps the modification time it
# was read at. Whenever this script cannot be sure of the same answer, Python decides.
config=@CONFIG@
state=@STATE@

python() {
    exec @INTERPRETER@ -IS -c @CODE@ "$0" "$@"
}

# The arguments as the wrapper scans them: one leading "--" dropped, then runc's global options (Go's flag
# syntax: -x, --x, -x=v, --x v) up to the subcommand, then for create its own options up to the bundle.
subcommand= take_value= after_separator= first=1 position=0
for arg do
    position=$((position + 1))
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

# What the wrapper last read. Settings from the environment or another configuration file are Python's to
# read; only root's own record is trusted, as the runtime runs as root.
[ -z "${NVIDIA_OCI_HOOK_CONFIG-}" ] && [ -z "@SETTINGS_SET@" ] || python "$@"
record=$state/@RECORD_FILE@
[ -O "$state" ] && [ -O "$record" ] || python "$@"
{ IFS= read -r recorded && IFS= read -r names && IFS= read -r roots && IFS= read -r prefixes &&
    IFS= read -r visible; } <"$record" || python "$@"
case $recorded in
present)
    # The wrapper gave the record the file's modification time: neither may be newer than the other.
    [ -f "$config" ] && ! [ "$config" -nt "$record" ] && ! [ "$config" -ot "$record" ] || python "$@"
    ;;
absent) ! [ -e "$config" ] || python "$@" ;;
*) python "$@" ;;
esac
[ -n "$names" ] || python "$@"

if [ "$subcommand" = create ]; then
    bundle= positional= take_value= index=0
    for arg do
        index=$((index + 1))
        [ "$index" -gt "$position" ] || continue
        if [ -n "$take_value" ]; then
            [ "$take_value" = bundle ] && bundle=$arg
            take_value=
        elif [ -z "$positional" ]; then
            case $arg in
            --) positional=1 ;;
            -) ;;
            -*)
                option=${arg#"${arg%%[!-]*}"}
                case $option in
                bundle=* | b=*) bundle=${option#*=} ;;
                bundle | b) take_value=bundle ;;
                @CREATE_VALUE_OPTIONS@) take_value=other ;;
                esac
                ;;
            esac
        fi
    done
    # The plan changes nothing and finds nothing in a config that requests no CDI device, lists no device node
    # and names no path under a driver root other than "/", on a node where no such root exists (no bind
    # mount or hook can then move, or be missing under one). The config's text shows all of that only where
    # no JSON escape could spell out what it hides: an escape other than those of quotes, backslashes, control
    # characters, <, >, & and line separators sends the config to Python, as does one too large to read here.
    # A driver root other than "/" on the node: Python, before anything is read.
    rest=$roots
    while [ -n "$rest" ]; do
        root=${rest%%@SEP@*}
        case $rest in *@SEP@*) rest=${rest#*@SEP@} ;; *) rest= ;; esac
        ! [ -e "$root" ] || python "$@"
    done
    [ -f "${bundle:-.}/config.json" ] || python "$@"
    text=$(head -c 1048577 -- "${bundle:-.}/config.json" 2>/dev/null) || python "$@"
    [ "${#text}" -le 1048576 ] || python "$@"
    # Glob patterns only: dash's ${x#*y} is quadratic in the text's length. A pattern may also match what is
    # harmless (a backslash escaped before a "u"): that only sends the config to Python.
    case $text in
    *\\[!\"\\bfnrtu]* | *\\u[!02]* | *\\u0[!0]* | *\\u00[!0123]* | *\\u002[!6]* | *\\u003[!cCeE]* | \
        *\\u2[!0]* | *\\u20[!2]* | *\\u202[!89]*)
        python "$@"
        ;;
    esac
    case $visible$text in env*NVIDIA_VISIBLE_DEVICES*) python "$@" ;; esac
    # A CDI annotation prefix or a driver root anywhere in the text.
    needles=$prefixes@SEP@$roots
    while [ -n "$needles" ]; do
        needle=${needles%%@SEP@*}
        case $needles in *@SEP@*) needles=${needles#*@SEP@} ;; *) needles= ;; esac
        [ -z "$needle" ] || case $text in *"$needle"*) python "$@" ;; esac
    done
    # Every key "devices" must be the one of linux.resources (the cgroup's rules), never linux.devices: each
    # pattern is a "devices" preceded by anything but the whole of "resources":{.
    case $text in
    '"devices"'* | *[!{]'"devices"'* | *[!:]'{"devices"'* | *[!\"]':{"devices"'* | *[!s]'":{"devices"'* | \
        *[!e]'s":{"devices"'* | *[!c]'es":{"devices"'* | *[!r]'ces":{"devices"'* | *[!u]'rces":{"devices"'* | \
        *[!o]'urces":{"devices"'* | *[!s]'ources":{"devices"'* | *[!e]'sources":{"devices"'* | \
        *[!r]'esources":{"devices"'* | *[!\"]'resources":{"devices"'* | '{"devices"'* | ':{"devices"'* | \
        '":{"devices"'* | 's":{"devices"'* | 'es":{"devices"'* | 'ces":{"devices"'* | 'rces":{"devices"'* | \
        'urces":{"devices"'* | 'ources":{"devices"'* | 'sources":{"devices"'* | 'esources":{"devices"'* | \
        'resources":{"devices"'*)
        python "$@"
        ;;
    esac
fi

# The first name that is an executable file, in PATH unless it holds a slash; never this script itself.
names=$names@SEP@
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
        "@CREATE_VALUE_OPTIONS@": " | ".join(sorted(CREATE_VALUE_OPTIONS - {"bundle", "b"})),
        "@SETTINGS_SET@": "".join("${" + key.env + "+set}" for key in SETTINGS),
        "@RECORD_FILE@": RECORD_FILE,
        "@SEP@": RECORD_SEPARATOR,
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
