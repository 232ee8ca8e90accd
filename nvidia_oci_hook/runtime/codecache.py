"""The compiled code of the runtime-facing modes, kept in the state directory as one file.

Python's import system costs about a tenth of a millisecond per module beyond running the module's code (the
path finder's lookups, then opening, reading and checking the module's cached bytecode), and the guard of a GPU
container imports sixteen of this package's modules. The fronts' Python programs `install` a finder for the
package's modules that serves them from this one file, read at once; `keep`, at the end of a runtime-facing mode,
writes the file again when the run imported any package module from its own file, with the code of every package
module the runs have imported.

What is used and when: an entry only while its source file keeps the size and modification time (in
nanoseconds) it was compiled from, a stricter check than Python's own cache makes; the file only where it is
this user's own, in this user's own directory that no one else can write into (the code runs as root), and
written by this interpreter (its bytecode magic number and cache tag) for this package directory. Anything else
about the file, a read error or a damaged file included, means the modules are imported as usual: the cache can
make a run faster, never different.
"""

from __future__ import annotations

import marshal
import sys

from nvidia_oci_hook import leanos

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any, Optional

PACKAGE = __name__.split(".", 1)[0]
# One file per interpreter: bytecode is the interpreter's own.
CACHE_FILE = f"code.{sys.implementation.cache_tag}"
# Far above what the package's modules compile to (about 0.5 MB); a larger file was not written here.
_CACHE_LIMIT = 8 << 20
_bootstrap: Any = sys.modules["_frozen_importlib"]
_external: Any = sys.modules["_frozen_importlib_external"]

# An entry, by module name: the source file's path, whether the module is a package, the source's size and
# modification time in ns, and the module's code as marshal wrote it.
_ENTRY_TYPES = (str, bool, int, int, bytes)


def own_directory(path: str) -> bool:
    """This user's own directory, which no one else can write into."""
    info = leanos.lstat(path)
    return info.st_uid == leanos.geteuid() and not info.st_mode & 0o022 and info.st_mode & 0o170000 == 0o040000


def _package_directory() -> str:
    return leanos.dirname(leanos.dirname(leanos.abspath(__file__)))


def _unchanged(entry: tuple[str, bool, int, int, bytes]) -> bool:
    try:
        info = leanos.stat(entry[0])
    except OSError:
        return False
    return info.st_size == entry[2] and info.st_mtime_ns == entry[3]


class CodeCache:
    """A meta path finder and loader for the package's modules whose code the cache file holds."""

    def __init__(self, state_dir: str, entries: dict[str, tuple[str, bool, int, int, bytes]]) -> None:
        self.state_dir = state_dir
        self.entries = entries
        self.served: set[str] = set()
        # Imported before the finder was in place: never the cache's to serve, nor to keep.
        self.imported_before = set(sys.modules)

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        entry = self.entries.get(name)
        if entry is None or not _unchanged(entry):
            return None
        spec = _bootstrap.ModuleSpec(name, self, origin=entry[0], is_package=entry[1])
        spec.has_location = True  # __file__ names the source, as for a module imported from it
        if entry[1]:
            spec.submodule_search_locations = [leanos.dirname(entry[0])]
        return spec

    def create_module(self, spec: Any) -> None:
        return None  # the import system's own module object

    def exec_module(self, module: ModuleType) -> None:
        origin, _is_package, _size, _mtime, data = self.entries[module.__name__]
        try:
            code = marshal.loads(data)
        except (ValueError, EOFError, TypeError):
            code = None
        if type(code) is not type(_unchanged.__code__):
            with open(origin, "rb") as handle:
                code = compile(handle.read(), origin, "exec", dont_inherit=True)
        exec(code, module.__dict__)
        self.served.add(module.__name__)

    def invalidate_caches(self) -> None:
        pass


installed: Optional[CodeCache] = None


def _read(state_dir: str, package_dir: str) -> dict[str, tuple[str, bool, int, int, bytes]]:
    if not own_directory(state_dir):
        return {}
    fd = leanos.open(leanos.join(state_dir, CACHE_FILE), leanos.O_RDONLY | leanos.O_NOFOLLOW | leanos.O_CLOEXEC)
    try:
        info = leanos.fstat(fd)
        if (
            info.st_uid != leanos.geteuid()
            or info.st_mode & 0o170000 != 0o100000
            or info.st_mode & 0o022
            or info.st_size > _CACHE_LIMIT
        ):
            return {}
        data = leanos.read(fd, _CACHE_LIMIT + 1)
    finally:
        leanos.close(fd)
    magic, directory, entries = marshal.loads(data)
    if magic != _external.MAGIC_NUMBER or directory != package_dir or not isinstance(entries, dict):
        return {}
    for name, entry in entries.items():
        if not (
            isinstance(name, str)
            and type(entry) is tuple
            and len(entry) == len(_ENTRY_TYPES)
            and all(type(field) is kind for field, kind in zip(entry, _ENTRY_TYPES))
        ):
            return {}
    return entries


def install(state_dir: str) -> Optional[CodeCache]:
    """Serve the package's modules from the cache file in state_dir, from now on in this process."""
    global installed
    if installed is not None:
        return installed
    try:
        entries = _read(state_dir, _package_directory())
    except Exception:  # whatever is wrong with the file, the modules' own files still serve
        entries = {}
    installed = CodeCache(state_dir, entries)
    sys.meta_path.insert(0, installed)
    return installed


def _compiled(module: ModuleType) -> Optional[tuple[str, bool, int, int, bytes]]:
    """The module's entry, from the bytecode Python cached for its source where that matches it, else compiled."""
    origin = getattr(module.__spec__, "origin", None)
    if not isinstance(origin, str) or not origin.endswith(".py"):
        return None
    info = leanos.stat(origin)
    is_package = leanos.basename(origin) == "__init__.py"
    with open(origin, "rb") as handle:
        source = handle.read()
    if len(source) != info.st_size:
        return None  # changed while read: the next run keeps it
    cached = getattr(module.__spec__, "cached", None)
    code = None
    if isinstance(cached, str):
        try:
            with open(cached, "rb") as handle:
                header, body = handle.read(16), handle.read()
        except OSError:
            header = body = b""
        expected = (
            _external.MAGIC_NUMBER
            + b"\0\0\0\0"
            + (int(info.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
            + (info.st_size & 0xFFFFFFFF).to_bytes(4, "little")
        )
        if header == expected:
            code = body
    if code is None:
        code = marshal.dumps(compile(source, origin, "exec", dont_inherit=True))
    return (origin, is_package, info.st_size, info.st_mtime_ns, code)


def keep() -> None:
    """Write the cache file again when this run imported a package module from its own file."""
    cache = installed
    if cache is None or sys.dont_write_bytecode:
        return
    try:  # noqa: SIM105 - contextlib would be one more import on every container start
        _keep(cache)
    except Exception:  # the cache only ever saves time: the next run tries again
        pass


def _keep(cache: CodeCache) -> None:
    prefix = PACKAGE + "."
    imported = [
        (name, module)
        for name, module in list(sys.modules.items())
        if (name == PACKAGE or name.startswith(prefix)) and name not in cache.imported_before
    ]
    fresh = [(name, module) for name, module in imported if name not in cache.served]
    if not fresh:
        return
    entries = {name: entry for name, entry in cache.entries.items() if _unchanged(entry)}
    for name, module in fresh:
        entry = _compiled(module)
        if entry is not None:
            entries[name] = entry
    package_dir = _package_directory()
    data = marshal.dumps((_external.MAGIC_NUMBER, package_dir, entries))
    if len(data) > _CACHE_LIMIT or not own_directory(cache.state_dir):
        return
    path = leanos.join(cache.state_dir, CACHE_FILE)
    temporary = f"{path}.{leanos.getpid()}"
    try:
        fd = leanos.open(
            temporary, leanos.O_WRONLY | leanos.O_CREAT | leanos.O_EXCL | leanos.O_NOFOLLOW | leanos.O_CLOEXEC, 0o600
        )
        try:
            view = memoryview(data)
            while view:
                view = view[leanos.write(fd, view) :]
        finally:
            leanos.close(fd)
        leanos.rename(temporary, path)
    except OSError:
        try:  # noqa: SIM105 - contextlib would be one more import on every container start
            leanos.unlink(temporary)
        except OSError:
            pass
