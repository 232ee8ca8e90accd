"""deploy/kubernetes/Containerfile's image, built with podman (the package tests' Debian 12 root imported as the
base, podman storage of its own) once for a given content, kept as a docker-archive under .tools/deploy-image keyed
by what the build copies in, and loaded from there into each storage that runs it: podman's in
tests/kubernetes/test_image.py, an engine's containers/storage in tests/kubelet (an engine here can pull nothing).

`image_archive()` builds on the first call for a given content and returns the archive at once afterwards;
`load_into(root, runroot)` puts the image into the containers/storage that cri-o's `[crio] root`/`runroot` name.
Both raise ImageUnavailable, saying why, where podman, mmdebstrap or the build's network is missing.
"""

from __future__ import annotations

import hashlib
import subprocess
import tempfile
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
DEPLOY = REPOSITORY / "deploy/kubernetes"
CACHE = REPOSITORY / ".tools" / "deploy-image"
TAG = "localhost/nvidia-oci-hook:test"
BASE = "localhost/nvidia-oci-hook-test-base:bookworm"


class ImageUnavailable(RuntimeError):
    """The image could not be built or loaded; the message says why."""


def _inputs() -> list[Path]:
    """Every file the Containerfile copies in, and the Containerfile itself."""
    files = [DEPLOY / "Containerfile", *(REPOSITORY / name for name in ("pyproject.toml", "README.md", "LICENSE"))]
    package = REPOSITORY / "nvidia_oci_hook"
    files += sorted(path for path in package.rglob("*") if path.is_file() and "__pycache__" not in path.parts)
    return files


def _key(base_tarball: Path) -> str:
    digest = hashlib.sha256(base_tarball.name.encode())
    for path in _inputs():
        digest.update(str(path.relative_to(REPOSITORY)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _base_tarball() -> Path:
    import pytest

    from tests.packaging.test_deb import _chroot_tarball

    try:
        return _chroot_tarball({})
    # pytest.fail where mmdebstrap is missing, an AssertionError where its run failed.
    except (Exception, pytest.fail.Exception) as error:
        raise ImageUnavailable(f"no Debian 12 base root: {error}") from error


def image_archive() -> Path:
    """The image as a docker-archive (tagged TAG), built now unless this content's archive is there already."""
    from tests.podman_env import PodmanEnv, PodmanUnavailable

    base_tarball = _base_tarball()
    archive = CACHE / f"nvidia-oci-hook-{_key(base_tarball)}.tar"
    if archive.exists():
        return archive
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="deploy-image-") as directory:
        try:
            env = PodmanEnv(Path(directory))
        except PodmanUnavailable as error:
            raise ImageUnavailable(str(error)) from error
        try:
            imported = env.run("import", str(base_tarball), BASE, timeout=300)
            if imported.returncode != 0:
                raise ImageUnavailable(f"podman import of the base failed: {imported.stderr[-2000:]}")
            built = env.run(
                "build", "--network", "host", "--build-arg", f"BASE={BASE}", "-t", TAG,
                "-f", str(DEPLOY / "Containerfile"), str(REPOSITORY), timeout=600,
            )  # fmt: skip
            if built.returncode != 0:
                raise ImageUnavailable(f"the image did not build:\n{(built.stdout + built.stderr)[-3000:]}")
            partial = archive.with_suffix(".partial")
            partial.unlink(missing_ok=True)
            saved = env.run("save", "--format", "docker-archive", "-o", str(partial), TAG, timeout=300)
            if saved.returncode != 0:
                raise ImageUnavailable(f"podman save failed: {saved.stderr[-2000:]}")
            # Older archives are other contents' builds: only the newest is kept.
            for stale in CACHE.glob("nvidia-oci-hook-*.tar"):
                stale.unlink()
            partial.rename(archive)
        finally:
            env.close()
    return archive


def load_into(root: Path, runroot: Path, archive: Path) -> None:
    """Load the archive into the containers/storage at root/runroot (overlay), as TAG."""
    with tempfile.TemporaryDirectory(prefix="deploy-load-") as directory:
        storage = ["--root", str(root), "--runroot", str(runroot), "--storage-driver", "overlay"]
        options = ["--events-backend", "none", "--tmpdir", directory]
        loaded = subprocess.run(
            ["podman", *storage, *options, "load", "--input", str(archive)],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    if loaded.returncode != 0 or TAG not in loaded.stdout:
        raise ImageUnavailable(f"podman load failed: {loaded.stdout}{loaded.stderr}")
