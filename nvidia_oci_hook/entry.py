"""The `nvidia-oci-hook` command: the runtime-facing modes without the command-line library, the rest with it.

`runtime` and `hook` run on every container start, so they are dispatched here before click, PyYAML or
jsonschema is imported. The installed launchers run Python with -I -S (no site module: a few milliseconds
less); the other commands need site-packages, so site is set up for them here.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

FAST_COMMANDS = ("runtime", "hook")


def _split_global_options(args: list[str]) -> tuple[Optional[str], Optional[str], list[str]]:
    """(command, --config value, the command's arguments) when only --config and --debug precede a command."""
    config_path = None
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--debug":
            index += 1
        elif arg == "--config" and index + 1 < len(args):
            config_path = args[index + 1]
            index += 2
        elif arg.startswith("--config="):
            config_path = arg[len("--config=") :]
            index += 1
        else:
            return arg, config_path, args[index + 1 :]
    return None, config_path, []


def main(argv: Optional[list[str]] = None, state_dir: Optional[str] = None) -> int:
    """state_dir, given by the installed launcher, is where the hook keeps the record its sh front reads."""
    args = sys.argv[1:] if argv is None else argv
    command, config_path, rest = _split_global_options(args)
    if command in FAST_COMMANDS and state_dir is not None:
        from nvidia_oci_hook.runtime import codecache

        codecache.install(state_dir)
    if command == "runtime":
        from nvidia_oci_hook.runtime import wrapper

        return wrapper.main(rest, config_path)
    if command == "hook":
        from nvidia_oci_hook.runtime import hooks

        return hooks.main(rest, config_path, state_dir)
    if sys.flags.no_site:
        import site

        site.main()
    from nvidia_oci_hook.cli import main as cli_main

    return cli_main(args)


def run(state_dir: Optional[str] = None) -> None:
    sys.exit(main(None, state_dir))
