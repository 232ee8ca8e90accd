#!/bin/sh
# kubernetes-validate (PyPI): the Kubernetes API's JSON schemas, v1.25 to v1.37 with their strict variants, that
# tests/kubernetes validates deploy/kubernetes against, offline.
# .venv-py39 and .venv-newest get it as usual. .venv is Debian's python3 with Debian's jsonschema 4.10, which the
# tool's own tests must keep seeing, and kubernetes-validate needs jsonschema >= 4.23 and referencing: there it
# goes into a directory of its own, .venv/kubernetes-validate, that only the validating subprocess puts on its
# path (tests/kubernetes/schemas.py).
set -eu
cd "$(dirname "$0")/../.."
version=1.37.0
check="import kubernetes_validate.utils as k; assert '1.37.0' in k.all_versions()"
for venv in .venv-py39 .venv-newest; do
    [ -x "$venv/bin/python" ] || continue
    "$venv/bin/python" -c "$check" >/dev/null 2>&1 && continue
    echo "tests/kubernetes: installing kubernetes-validate $version into $venv"
    "$venv/bin/python" -m pip install -q "kubernetes-validate==$version" 2>&1 | grep -v WARNING || true
done
if [ -x .venv/bin/python ] && ! PYTHONPATH=.venv/kubernetes-validate .venv/bin/python -c "$check" >/dev/null 2>&1; then
    echo "tests/kubernetes: installing kubernetes-validate $version into .venv/kubernetes-validate"
    rm -rf .venv/kubernetes-validate
    .venv/bin/python -m pip install -q --target .venv/kubernetes-validate "kubernetes-validate==$version" 2>&1 \
        | grep -v WARNING || true
fi
