"""The installed commands: two POSIX-sh fronts that start Python, with -I -S, only when they must.

-I keeps the caller's environment (PYTHONPATH, the working directory) out of a program that runtimes start as
root; -S skips the site module, a few milliseconds of every container start. The package's directory is put on
sys.path explicitly instead; the commands that need site-packages (click, PyYAML) set site up themselves.

`nvidia-oci-runtime` is a dispatcher: the engines call the runtime several times per container (`create`, then
`state`, `start`, `kill`, `delete`), and only a `create` may need Python. The dispatcher scans the arguments as
the Python wrapper does (`runtime.wrapper.parse_invocation`) and execs the low-level runtime for every other
call, and for a `create` whose config it proves the plan would leave as it is, found as the wrapper finds it
(`runtime.wrapper.find_runtime`) from what Python last read in the configuration (`runtime.dispatch`).

`nvidia-oci-hook` starts Python for every command but the guard (`hook prestart`, `hook createRuntime`) of a
container whose config it proves the same way has nothing to guard: that one exits 0 from sh, as Python would,
having found nothing.

Both hand the call to Python whenever they cannot be sure of the same answer.

    python -m nvidia_oci_hook.launcher DIRECTORY [--interpreter PATH] [--package-parent DIR]...
                                                 [--config FILE] [--state-dir DIR]

writes `nvidia-oci-hook` and `nvidia-oci-runtime` into DIRECTORY. --package-parent is a directory that will hold
the installed package or its bundled dependencies, put on sys.path in the order given (a distribution package's
site directory, /usr/lib/python3/dist-packages on Debian); by default the one this package is imported from.
--config is the configuration file the installed wrapper reads (default /etc/nvidia-oci-hook/config.yaml, where
NVIDIA_OCI_HOOK_CONFIG wins; the hook reads the one its hooks.d file's env names, or the default); --state-dir
is where Python keeps the record both fronts read (default /run/nvidia-oci-hook, root's tmpfs).
"""

from __future__ import annotations

import os
import sys

from nvidia_oci_hook.config import DEFAULT_CONFIG_PATH, SETTINGS
from nvidia_oci_hook.runtime.dispatch import DEFAULT_STATE_DIR, RECORD_FILE, RECORD_SEPARATOR
from nvidia_oci_hook.runtime.wrapper import CREATE_VALUE_OPTIONS, GLOBAL_VALUE_OPTIONS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Optional

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


def _package_path(package_parents: Sequence[str]) -> str:
    # After the standard library: a site directory must not shadow it.
    return "".join(f"sys.path.append({_python_literal(parent)})\n" for parent in package_parents)


# What both fronts read before they trust the record: the settings Python last read, and only root's own.
RECORD_CHECK = r"""
# What Python last read, valid while the configuration file keeps the modification time it was read at. Settings
# from the environment are Python's to read; only this user's own record is trusted (the runtime runs as root).
[ -z "@SETTINGS_SET@" ] || python "$@"
record=$state/@RECORD_FILE@
[ -O "$state" ] && [ -O "$record" ] || python "$@"
{ IFS= read -r recorded && IFS= read -r names && IFS= read -r roots && IFS= read -r prefixes &&
    IFS= read -r visible && IFS= read -r policy && IFS= read -r recorded_config; } <"$record" || python "$@"
[ "$recorded_config" = "$config" ] || python "$@"
case $recorded in
present)
    # Python gave the record the file's modification time: neither may be newer than the other.
    [ -f "$config" ] && ! [ "$config" -nt "$record" ] && ! [ "$config" -ot "$record" ] || python "$@"
    ;;
absent) ! [ -e "$config" ] || python "$@" ;;
*) python "$@" ;;
esac
[ -n "$names" ] || python "$@"
"""

# Whether the plan would leave the config at $config_json alone: Python whenever it cannot be sure.
CONFIG_PRECHECK = r"""
    # The plan changes nothing and finds nothing in a config that requests no CDI device, lists no device node
    # and names no path under a driver root other than "/", where no bind mount or hook can move to another
    # root: none exists on the node, or every absolute mount source and hook path exists. The config's text
    # shows all of that only where no JSON escape could spell out what it hides: an escape other than those of
    # quotes, backslashes, control characters, <, >, & and line separators sends the config to Python, as does
    # one too large to read here.
    rest=$roots root_present=
    while [ -n "$rest" ]; do
        root=${rest%%@SEP@*}
        case $rest in *@SEP@*) rest=${rest#*@SEP@} ;; *) rest= ;; esac
        ! [ -e "$root" ] || root_present=1
    done
    [ -f "$config_json" ] || python "$@"
    # One process reads the text, at most 1 MiB of it, and makes it compact where cri-o wrote it as Go's
    # MarshalIndent does (tabs, line breaks, a space after each key's colon): without them it is the compact
    # text the checks below read, with the same values, since JSON escapes a tab or a line break inside a string
    # and a quote inside one has a backslash before it. A space is kept wherever a backslash, or a line break,
    # stands before the quote: a space left where the checks expect none only sends the config to Python, and
    # so does a carriage return between tokens, which stays. Line by line: joining first would copy the text
    # once per line. awk would take an operand NAME=VALUE for an assignment; the path begins with / or ./.
    case $config_json in /*) ;; *) config_json=./$config_json ;; esac
    text=$(LC_ALL=C awk '
        { read += length($0) + 1; if (read > 1048577) exit 3; gsub(/	/, ""); count = split($0, part, /": /)
          line = part[1]
          for (i = 2; i <= count; i++) line = line (part[i - 1] ~ /(^|\\)$/ ? "\": " : "\":") part[i]
          printf "%s", line }' "$config_json" 2>/dev/null) || python "$@"
    [ "${#text}" -le 1048576 ] || python "$@"
    # An object must come out of it, or Python reads the file.
    case $text in '{'*'}') ;; *) python "$@" ;; esac
    # First what sends a GPU container to Python: each check only ever does, so their order changes no answer, and
    # the ones a GPU container fails come before those it would pass.
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
    # Then what a GPU container passes as well. Glob patterns only: dash's ${x#*y} is quadratic in the text's
    # length. A pattern may also match what is harmless (a backslash escaped before a "u"): that only sends the
    # config to Python.
    case $text in
    *\\[!\"\\bfnrtu]* | *\\u[!02]* | *\\u0[!0]* | *\\u00[!0123]* | *\\u002[!6]* | *\\u003[!cCeE]* | \
        *\\u2[!0]* | *\\u20[!2]* | *\\u202[!89]*)
        python "$@"
        ;;
    esac
    # With a driver root on the node, every value of a key "source" or "path" (mount sources, hook paths, and
    # more: checking those only costs time) must be written plainly and, if absolute, exist.
    if [ -n "$root_present" ]; then
        case $text in *'"source"'[!:]* | *'"source":'[!\"]* | *'"path"'[!:]* | *'"path":'[!\"]*) python "$@" ;; esac
        for key in '"source":"' '"path":"'; do
            rest=$text
            while :; do
                case $rest in *"$key"*) ;; *) break ;; esac
                rest=${rest#"${rest%%"$key"*}$key"}
                value=${rest%%\"*}
                case $value in /*) [ -e "$value" ] || python "$@" ;; esac
            done
        done
    fi
"""

DISPATCHER = r"""#!/bin/sh
# nvidia-oci-runtime, in front of runc or crun; written by nvidia_oci_hook.launcher.
# Python reconciles the bundle's config.json on `create`. Every other call, and a `create` whose config the plan
# would leave as it is, is exec'd from here to the runtime the Python wrapper would run. Whenever this script
# cannot be sure of the same answer, Python decides.
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

# Another configuration file named in the environment is Python's to read.
[ -z "${NVIDIA_OCI_HOOK_CONFIG-}" ] || python "$@"
@RECORD_CHECK@
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
    config_json=${bundle:-.}/config.json
@CONFIG_PRECHECK@
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

HOOK_FRONT = r"""#!/bin/sh
# nvidia-oci-hook; written by nvidia_oci_hook.launcher. Every command is Python's, but for the guard
# (`hook prestart`, `hook createRuntime`) of a container whose config the plan would leave as it is: that one
# ends here, as Python would end it, having found nothing. Whenever this script cannot be sure of the same
# answer, Python decides, and gets what was read of stdin.
state=@STATE@

python() {
    exec @INTERPRETER@ -IS -c @CODE@ "$0" "$@"
}

[ "$#" -eq 2 ] && [ "$1" = hook ] || python "$@"
case $2 in prestart | createRuntime) ;; *) python "$@" ;; esac
config=${NVIDIA_OCI_HOOK_CONFIG:-@DEFAULT_CONFIG@}
# A file named in the environment must exist; Python says so when it does not.
[ -z "${NVIDIA_OCI_HOOK_CONFIG-}" ] || [ -e "$config" ] || python "$@"
@RECORD_CHECK@
# policy.fail_closed refuses a state Python cannot read: only Python tells that from one it can.
[ "$policy" = fail-open ] || python "$@"

# The state, as runc and crun write it: one line of JSON. From here on, Python gets what was read: as an
# argument when it is all of stdin (the shell has dropped NUL bytes, which JSON does not allow anyway), else
# followed by the rest.
consumed= pending=
if IFS= read -r line; then
    consumed="$line
"
    if IFS= read -r more; then
        consumed="$consumed$more
" pending=1
    elif [ -n "$more" ]; then
        consumed=$consumed$more pending=1
    fi
else
    consumed=$line
fi
python() {
    if [ -z "$pending" ] && [ "${#consumed}" -le 65536 ]; then
        exec @INTERPRETER@ -IS -c @CODE_READ@ "$0" "$consumed" "$@"
    fi
    { printf '%s' "$consumed" && { [ -z "$pending" ] || exec cat; }; } | @INTERPRETER@ -IS -c @CODE@ "$0" "$@"
    exit
}
[ -z "$pending" ] || python "$@"
# The bundle must be the state's own. runc and crun write the state's fields in the runtime-spec's order, the
# annotations last; an engine's annotations hold escapes (cri-o's are JSON: \"). So, before the first
# ,"annotations":{ (outside any string, since a bare quote cannot be inside one), no escape at all and "bundle"
# once, as a key with an absolute path for its value; after it, no "bundle", and no escape that could spell one
# (letters), as the config's text is held below. A state that is not JSON after all is one Python would not check.
case $line in '{'*'}') ;; *) python "$@" ;; esac
head=${line%%',"annotations":{'*}
tail=${line#"$head"}
case $head in *\\*) python "$@" ;; esac
case $tail in
*'"bundle"'* | *\\[!\"\\bfnrtu]* | *\\u[!02]* | *\\u0[!0]* | *\\u00[!0123]* | *\\u002[!6]* | *\\u003[!cCeE]* | \
    *\\u2[!0]* | *\\u20[!2]* | *\\u202[!89]*)
    python "$@"
    ;;
esac
case $head in *'"bundle"'*'"bundle"'*) python "$@" ;; *'"bundle":"/'*) ;; *) python "$@" ;; esac
key='"bundle":"'
bundle=${head#"${head%%"$key"*}$key"}
case $bundle in *'"'*) bundle=${bundle%%'"'*} ;; *) python "$@" ;; esac
config_json=$bundle/config.json
@CONFIG_PRECHECK@
exit 0
"""


def _front(template: str, interpreter: str, replacements: dict[str, str]) -> str:
    text = template.replace("@RECORD_CHECK@", RECORD_CHECK.strip("\n")).replace(
        "@CONFIG_PRECHECK@", CONFIG_PRECHECK.strip("\n")
    )
    common = {
        "@INTERPRETER@": _sh_literal(interpreter),
        "@SETTINGS_SET@": "".join("${" + key.env + "+set}" for key in SETTINGS),
        "@RECORD_FILE@": RECORD_FILE,
        "@SEP@": RECORD_SEPARATOR,
    }
    for placeholder, value in {**replacements, **common}.items():
        text = text.replace(placeholder, value)
    return text


def _code(package_parents: Sequence[str], *lines: str) -> str:
    # python -c leaves "-c" in argv[0]: the front's own path comes next, and stands in for the program's.
    return "import sys\ndel sys.argv[0]\n" + _package_path(package_parents) + "".join(line + "\n" for line in lines)


def _cached_code(state: str) -> tuple[str, str]:
    # Before the mode is imported: from here on the package's modules come from the state directory's code cache.
    return "from nvidia_oci_hook.runtime import codecache", f"codecache.install({state})"


def dispatcher_text(interpreter: str, package_parents: Sequence[str], config_path: str, state_dir: str) -> str:
    explicit_config = "None" if config_path == DEFAULT_CONFIG_PATH else _python_literal(config_path)
    code = _code(
        package_parents,
        *_cached_code(_python_literal(state_dir)),
        "from nvidia_oci_hook.runtime.wrapper import run",
        f"run({explicit_config}, {_python_literal(state_dir)})",
    )
    return _front(
        DISPATCHER,
        interpreter,
        {
            "@CONFIG@": _sh_literal(config_path),
            "@STATE@": _sh_literal(state_dir),
            "@CODE@": _sh_literal(code),
            "@VALUE_OPTIONS@": " | ".join(sorted(GLOBAL_VALUE_OPTIONS)),
            "@CREATE_VALUE_OPTIONS@": " | ".join(sorted(CREATE_VALUE_OPTIONS - {"bundle", "b"})),
        },
    )


def hook_front_text(interpreter: str, package_parents: Sequence[str], state_dir: str) -> str:
    state = _python_literal(state_dir)
    code = _code(package_parents, "from nvidia_oci_hook.entry import run", f"run({state})")
    # What the front read comes first among the arguments: `hook` and the stage follow it.
    code_read = _code(
        package_parents,
        "read = sys.argv.pop(1)",
        *_cached_code(state),
        "from nvidia_oci_hook.runtime.hooks import main",
        f"sys.exit(main(sys.argv[2:], None, {state}, read))",
    )
    return _front(
        HOOK_FRONT,
        interpreter,
        {
            "@STATE@": _sh_literal(state_dir),
            "@CODE@": _sh_literal(code),
            "@CODE_READ@": _sh_literal(code_read),
            "@DEFAULT_CONFIG@": _sh_literal(DEFAULT_CONFIG_PATH),
        },
    )


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
        HOOK_COMMAND: hook_front_text(interpreter, parents, state_dir or DEFAULT_STATE_DIR),
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
