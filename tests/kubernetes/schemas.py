"""The Kubernetes API's schemas, as kubernetes-validate ships them, applied in a subprocess.

A subprocess because .venv keeps Debian's jsonschema 4.10 for the tool's own tests, and kubernetes-validate needs a
newer one: there it sits in .venv/kubernetes-validate (tests/kubernetes/setup.sh), which only this subprocess puts
first on its path. The other test environments have it installed; the subprocess then finds it as it is.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

# Reads [[document, version], ...] on stdin; prints, for each, null or the error the strict schema gives.
PROGRAM = """
import json, sys
from kubernetes_validate import utils
answers = []
for document, version in json.load(sys.stdin):
    try:
        utils.validate(document, version, strict=True)
        answers.append(None)
    except utils.ValidationError as exc:
        path = "/".join(str(part) for part in exc.path)
        answers.append(f"{utils.major_minor(exc.version)}: {path}: {exc.message}")
    except utils.SchemaNotFoundError as exc:
        answers.append(exc.message)
print(json.dumps(answers))
"""

SETUP_HINT = "kubernetes-validate is missing: run tests/kubernetes/setup.sh (scripts/setup test runs it)"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    own = Path(sys.prefix) / "kubernetes-validate"
    if own.is_dir():
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(own), env.get("PYTHONPATH")]))
    return env


def _python(program: str, stdin: str, timeout: float) -> str:
    """program's standard output, run where kubernetes-validate is importable (setup.sh put it there)."""
    result = subprocess.run(
        [sys.executable, "-c", program],
        input=stdin,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, f"{SETUP_HINT}\n{result.stderr}"
    return result.stdout


def shipped_versions() -> list[str]:
    return _python("from kubernetes_validate import utils; print(' '.join(utils.all_versions()))", "", 60).split()


def validate(pairs: list[tuple[dict[str, Any], str]]) -> list[Optional[str]]:
    """For each (document, Kubernetes version): None when the version's strict schema accepts it, else why not."""
    answers: list[Optional[str]] = json.loads(_python(PROGRAM, json.dumps(pairs), 300))
    assert len(answers) == len(pairs)
    return answers
