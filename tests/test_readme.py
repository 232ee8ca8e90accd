from __future__ import annotations

from pathlib import Path

from nvidia_oci_hook.report.catalogue import replace_catalogue

README = Path(__file__).parents[1] / "README.md"


def test_readme_rule_catalogue_is_current() -> None:
    text = README.read_text(encoding="utf-8")
    assert text == replace_catalogue(text), "run: python -m nvidia_oci_hook.report.catalogue README.md"


def test_readme_quick_start_is_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    block = text.split("## Quick start", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert commands == ["sh scripts/demo", "sh scripts/test"]
    root = README.parent
    assert all((root / command.split()[1]).is_file() for command in commands)
