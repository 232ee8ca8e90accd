#!/bin/sh
# The CRI v1 client of tests/e2e: gRPC and the CRI protobuf stubs from PyPI, in every test virtualenv there is.
# pip picks per interpreter: container-runtime-interface-api 2.x needs Python 3.10 (protobuf 6), 1.0.0 still runs
# on 3.9 (protobuf 4). Both ship the same cri_api.v1 modules.
set -eu
sh "$(dirname "$0")/../../scripts/pip-test-venvs" tests/e2e "import grpc, cri_api.v1.api_pb2_grpc" \
    grpcio container-runtime-interface-api
