#!/bin/sh
# pynvml (PyPI's nvidia-ml-py) for tests/nvml, in every test virtualenv there is: .venv-py39 and .venv-newest get
# it from the dev extra, but .venv is built on Debian's python3 without extras. Idempotent: a venv that imports
# pynvml is skipped.
set -eu
cd "$(dirname "$0")/../.."

for venv in .venv .venv-py39 .venv-newest; do
    [ -x "$venv/bin/python" ] || continue
    if "$venv/bin/python" -c "import pynvml" >/dev/null 2>&1; then
        continue
    fi
    echo "tests/nvml: installing nvidia-ml-py into $venv"
    "$venv/bin/python" -m pip install -q nvidia-ml-py 2>&1 | grep -v WARNING || true
    "$venv/bin/python" -c "import pynvml" ||
        echo "tests/nvml/setup.sh: pynvml does not import in $venv; tests/nvml fails there" >&2
done
