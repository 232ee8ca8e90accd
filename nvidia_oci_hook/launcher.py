"""Launchers for the installed commands: a fixed interpreter, started with -I -S.

-I keeps the caller's environment (PYTHONPATH, the working directory) out of a program that runtimes start as
root; -S skips the site module, a few milliseconds of every container start. The package's directory is put on
sys.path explicitly instead; the commands that need site-packages (click, PyYAML) set site up themselves.

    python -m nvidia_oci_hook.launcher DIRECTORY [--interpreter PATH] [--package-parent DIR]

writes `nvidia-oci-hook` and `nvidia-oci-runtime` into DIRECTORY. --package-parent is the directory that will
hold the installed package (a distribution package's site directory, /usr/lib/python3/dist-packages on Debian);
by default the one this package is imported from.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

# command -> (module, function); the wrapper goes straight to its mode, one import less on every runtime call.
COMMANDS = {
    "nvidia-oci-hook": ("nvidia_oci_hook.entry", "run"),
    "nvidia-oci-runtime": ("nvidia_oci_hook.runtime.wrapper", "run"),
}


def launcher_text(interpreter: str, package_parent: str, module: str, function: str) -> str:
    return (
        f"#!{interpreter} -IS\n"
        "import sys\n"
        # After the standard library: a site directory must not shadow it.
        f"sys.path.append({package_parent!r})\n"
        f"from {module} import {function}\n"
        f"{function}()\n"
    )


def write_launchers(
    directory: str, interpreter: Optional[str] = None, package_parent: Optional[str] = None
) -> list[str]:
    interpreter = interpreter or sys.executable
    package_parent = package_parent or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    written = []
    os.makedirs(directory, exist_ok=True)
    for name, (module, function) in COMMANDS.items():
        path = os.path.join(directory, name)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(launcher_text(interpreter, package_parent, module, function))
        os.chmod(path, 0o755)
        written.append(path)
    return written


USAGE = "usage: python -m nvidia_oci_hook.launcher DIRECTORY [--interpreter PATH] [--package-parent DIR]\n"


def main(argv: list[str]) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        sys.stdout.write(__doc__ or "")
        return 0
    if not argv or argv[0].startswith("-") or len(argv) % 2 != 1:
        sys.stderr.write(USAGE)
        return 2
    options = dict(zip(argv[1::2], argv[2::2]))
    if set(options) - {"--interpreter", "--package-parent"}:
        sys.stderr.write(USAGE)
        return 2
    for path in write_launchers(argv[0], options.get("--interpreter"), options.get("--package-parent")):
        sys.stdout.write(path + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
