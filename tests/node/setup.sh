#!/bin/sh
# pynvml (PyPI's nvidia-ml-py) for tests/node/test_nvml.py, in every test virtualenv there is: .venv-py39 and .venv-newest get
# it from the dev extra, but .venv is built on Debian's python3 without extras.
set -eu
sh "$(dirname "$0")/../../scripts/pip-test-venvs" tests/node "import pynvml" nvidia-ml-py
