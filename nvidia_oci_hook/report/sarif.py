"""SARIF 2.1.0: one rule per code with its full explanation inline (no helpUri)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import quote

from nvidia_oci_hook import __version__
from nvidia_oci_hook.findings import Severity
from nvidia_oci_hook.lint import FileResult
from nvidia_oci_hook.rules.base import Rule, all_rules

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
SOURCE_ROOT = "%SRCROOT%"


def artifact_location(path: str) -> dict[str, str]:
    """Absolute paths as file:// URIs; relative ones relative to %SRCROOT%, the working directory."""
    if path.startswith("/"):
        return {"uri": PurePosixPath(path).as_uri()}
    return {"uri": quote(path), "uriBaseId": SOURCE_ROOT}


def _rule_descriptor(rule: Rule) -> dict[str, Any]:
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.sections["What it checks"]},
        "help": {"text": rule.explanation, "markdown": rule.explanation},
        "defaultConfiguration": {"level": _LEVELS[rule.severity]},
    }


def render_sarif(
    results: Sequence[FileResult], color: bool = False, looked_at: Sequence[tuple[str, str]] = (), node_root: str = ""
) -> str:
    rules = all_rules()
    index = {rule.code: position for position, rule in enumerate(rules)}
    sarif_results = []
    for result in results:
        for finding in result.findings:
            region: dict[str, Any] = {}
            if finding.line is not None:
                region = {"startLine": finding.line, "startColumn": finding.column or 1}
            location: dict[str, Any] = {"artifactLocation": artifact_location(finding.path)}
            if region:
                location["region"] = region
            message = finding.message + (f" Fix: {finding.hint}" if finding.hint else "")
            sarif_results.append(
                {
                    "ruleId": finding.code,
                    "ruleIndex": index[finding.code],
                    "level": _LEVELS[finding.severity],
                    "message": {"text": message},
                    "locations": [
                        {
                            "physicalLocation": location,
                            "logicalLocations": [{"fullyQualifiedName": finding.pointer, "kind": "member"}],
                        }
                    ],
                    "properties": {"jsonPointer": finding.pointer},
                }
            )
    document = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "nvidia-oci-hook",
                        "version": __version__,
                        "rules": [_rule_descriptor(rule) for rule in rules],
                    }
                },
                "results": sarif_results,
                "columnKind": "unicodeCodePoints",
                "originalUriBaseIds": {SOURCE_ROOT: {"uri": PurePosixPath(os.getcwd()).as_uri() + "/"}},
            }
        ],
    }
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
