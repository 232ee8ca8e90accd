"""The documentation: the generated pages current, every page in the site's navigation, the README short and its
quick start the two commands that exist."""

from __future__ import annotations

import difflib
import importlib.util
import re
import sys
from pathlib import Path

import yaml

from nvidia_oci_hook.rules.base import FAMILIES, all_rules

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def _docs_script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("docs_script", ROOT / "scripts" / "docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["docs_script"] = module
    spec.loader.exec_module(module)
    return module


def _squeezed(text: str) -> str:
    # A newer click may wrap a help text at another column: the words, not the wrapping, must be current.
    return re.sub(r"\s+", " ", text)


def test_generated_pages_are_current() -> None:
    docs = _docs_script()
    stale = []
    for page, text in docs.expected_pages().items():
        if not page.exists():
            stale.append(f"{page} is missing")
            continue
        current = page.read_text(encoding="utf-8")
        if current != text and _squeezed(current) != _squeezed(text):
            difference = difflib.unified_diff(current.splitlines(), text.splitlines(), lineterm="", n=1)
            stale.append(f"{page.relative_to(ROOT)}:\n" + "\n".join(list(difference)[2:12]))
    assert not stale, "out of date (run: python3 scripts/docs.py):\n" + "\n".join(stale)


def test_every_rule_has_its_section_on_its_family_page() -> None:
    for rule in all_rules():
        page = (DOCS / "rules" / f"{rule.family.lower()}.md").read_text(encoding="utf-8")
        assert f"## {rule.code} `{rule.name}` {{ #{rule.code.lower()} }}" in page
        for title in ("What it checks", "Why it matters", "Example", "Fix"):
            assert rule.sections[title].splitlines()[0] in page, (rule.code, title)


def test_a_changed_docstring_makes_the_page_stale(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    docs = _docs_script()
    rule = all_rules()[0]
    page = DOCS / "rules" / f"{rule.family.lower()}.md"
    before = docs.expected_pages()[page]
    monkeypatch.setitem(rule.sections, "Fix", "something else entirely")
    assert docs.expected_pages()[page] != before


def _nav_pages(entries: list) -> list[str]:  # type: ignore[type-arg]
    pages: list[str] = []
    for entry in entries:
        values = entry.values() if isinstance(entry, dict) else [entry]
        for value in values:
            pages.extend(_nav_pages(value) if isinstance(value, list) else [value])
    return pages


def test_every_page_is_in_the_navigation_and_every_family_has_a_page() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    nav = _nav_pages(config["nav"])
    on_disk = sorted(str(page.relative_to(DOCS)) for page in DOCS.rglob("*.md"))
    assert sorted(nav) == on_disk
    families = {rule.family for rule in all_rules()}
    assert {f"rules/{family.lower()}.md" for family in families} <= set(nav)
    assert families <= set(FAMILIES)


def test_readme_is_short_and_links_into_the_docs() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) < 250
    for link in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (ROOT / link).is_file(), link


def test_readme_quick_start_is_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    block = text.split("## Quick start", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert commands == ["sh scripts/demo", "sh scripts/test"]
    assert all((ROOT / command.split()[1]).is_file() for command in commands)
