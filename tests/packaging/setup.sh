#!/bin/sh
# Builds what the package and image suites share, before the suite runs: the Debian 12 root the .deb is installed
# into (mmdebstrap, .tools/deb-chroot), and the DaemonSet's image built on it (.tools/deploy-image), which
# tests/kubernetes/test_image.py and tests/kubelet load. Built here, beside the other areas' setup, they no longer
# take a minute of CPU in the middle of the suite's busiest minutes. Idempotent: each is built again only when what
# it is made from changes (tests/packaging/test_deb.py and tests/deploy_image.py key them), and the tests build
# them themselves where this did not run. Needs root, mmdebstrap and podman, and the Debian archive that apt's own
# sources name.
set -eu
cd "$(dirname "$0")/../.."
export PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

if [ "$(id -u)" != 0 ] || ! command -v mmdebstrap >/dev/null || ! command -v podman >/dev/null; then
    echo "tests/packaging: not root, or no mmdebstrap or podman: the suites build the root and the image themselves"
    exit 0
fi
/usr/bin/python3 -c '
import sys
from tests.deploy_image import ImageUnavailable, image_archive
try:
    archive = image_archive()
except ImageUnavailable as error:
    sys.exit(f"tests/packaging/setup.sh: the image cannot be built: {error}")
print(f"tests/packaging: the Debian 12 root and the DaemonSet image in {archive.parent}")
'
