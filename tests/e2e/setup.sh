#!/bin/sh
# The CRI v1 client of tests/e2e: gRPC and the CRI protobuf stubs from PyPI, in every test virtualenv there is.
# pip picks per interpreter: container-runtime-interface-api 2.x needs Python 3.10 (protobuf 6), 1.0.0 still runs
# on 3.9 (protobuf 4). Both ship the same cri_api.v1 modules. Idempotent: a venv that imports them is skipped.
set -eu
cd "$(dirname "$0")/../.."

for venv in .venv .venv-py39 .venv-newest; do
    [ -x "$venv/bin/python" ] || continue
    if "$venv/bin/python" -c "import grpc, cri_api.v1.api_pb2_grpc" >/dev/null 2>&1; then
        continue
    fi
    echo "tests/e2e: installing the CRI client into $venv"
    "$venv/bin/python" -m pip install -q grpcio container-runtime-interface-api 2>&1 | grep -v WARNING || true
    "$venv/bin/python" -c "import grpc, cri_api.v1.api_pb2_grpc" ||
        echo "tests/e2e/setup.sh: the CRI client does not import in $venv; tests/e2e fails there" >&2
done
