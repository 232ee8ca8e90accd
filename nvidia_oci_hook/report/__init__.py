"""Reporters: findings in, text out. Chosen by name from REPORTERS."""

from __future__ import annotations

from typing import Callable

from nvidia_oci_hook.report.json import render_json
from nvidia_oci_hook.report.sarif import render_sarif
from nvidia_oci_hook.report.text import render_text

__all__ = ["REPORTERS", "render_json", "render_sarif", "render_text"]

REPORTERS: dict[str, Callable[..., str]] = {
    "text": render_text,
    "json": render_json,
    "sarif": render_sarif,
}
