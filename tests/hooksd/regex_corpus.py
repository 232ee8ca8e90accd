"""Regular expressions with Go's recorded verdicts, to hold nvidia_oci_hook.formats.re2 to Go's regexp.Compile.

The patterns are hand-written probes of every construct of Go's syntax (and of the Perl and Python syntax it
refuses), plus seeded random strings built from the fragments that parsers disagree on. The verdicts in
data/re2_verdicts.jsonl were produced by re2_oracle.go built with two toolchains: Go 1.19 (Debian 12's
golang-1.19, the one Debian's podman 4.3 is built with) and a newer Go (Debian trixie's golang-1.24, near what
current cri-o releases are built with). After changing the patterns, refresh them:

    apt-get install golang-1.19-go
    # golang-1.24-go and golang-1.24-src from trixie: `apt-get download` with a private apt state, then
    # `dpkg -x` (the recipe FACTS.md gives for containerd 1.7)
    python3 -m tests.hooksd.regex_corpus refresh /usr/lib/go-1.19 /tmp/trixie/usr/lib/go-1.24

The tests read only the recorded file, so the suite needs no Go toolchain.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

VERDICTS = Path(__file__).with_name("data") / "re2_verdicts.jsonl"

HANDWRITTEN = [
    # accepted by both Python and Go
    "",
    "a",
    ".*",
    "^/usr/bin/(bash|sh)$",
    r"^com\.example\.department$",
    ".*fluid-dynamics$",
    r"nvidia\.com/gpu(\..+)?",
    "[[:alpha:]][[:^digit:]]",
    r"\pL\p{Greek}\PN\p{^Han}\P{^Lu}",
    r"\d\D\s\S\w\W",
    r"[\d\s-]",
    r"\Qa.b*c\E+",
    r"\Q*** unterminated",
    r"\x41\x{263a}\x{10FFFF}",
    r"\0\01\012\0123",
    r"\a\f\n\r\t\v",
    r"\_\-\.\*\!\@\#\%\&\~\`\'\"\,\<\>\/\;\:\=",
    r"\A\b\B\z",
    "(?i)abc",
    "(?i:abc)d",
    "(?im-sU:x)",
    "(?-i)x",
    "(?)",
    "(?P<name>x)(?P<name>y)",
    "(?P<n_1>x)",
    "a{0}",
    "a{0,}",
    "a{2,5}?",
    "a{1000}",
    "(a{10}){100}",
    "(?:a{2}){500}",
    "a{01}",
    "a{,5}",
    "a{1,2,3}",
    "a{",
    "a{1",
    "a{1,",
    "}",
    "]",
    "[]a]",
    "[^]a]",
    "[a-]",
    "[-a]",
    "[a-b-c]",
    "[\\]]",
    "[[:foo]",
    "^*",
    "$+",
    "\\b?",
    "a(?i)*",
    "a*(?i)*",
    "a*\\Q\\E*",
    "(|a)",
    "(a|)",
    "()",
    "x**?",
    "[\\x{0}-\\x{10FFFF}]",
    "\u00e9+",
    "\u4e2d\u6587",
    "\ufffd",
    # refused by Go, most of them compiled by Python's re
    "(?=x)",
    "(?!x)",
    "(?<=x)",
    "(?<!x)",
    "(?<name>x)",
    "(?<name",
    "(?<1a>x)",
    "(?P=name)",
    "(?P<name",
    "(?P<>x)",
    "(?P<na-me>x)",
    "(?P<",
    "(?#comment)",
    "(?x)a b",
    "(?i-)",
    "(?i--s)",
    "(?-)",
    "(?(1)a|b)",
    "(?>a)",
    "(?|a)",
    "(?",
    "(?i",
    "a++",
    "a*+",
    "a?+",
    "a{2}+",
    "a{2}{3}",
    "a**",
    "a*?*",
    "*",
    "+a",
    "?",
    "{1}",
    "(*)",
    "(?:*)",
    "a|*",
    "(?i)*",
    "\\1",
    "(a)\\1",
    "\\8",
    "\\9",
    "\\Z",
    "\\z\\Z",
    "\\G",
    "\\K",
    "\\R",
    "\\X",
    "\\e",
    "\\h",
    "\\k<name>",
    "\\g1",
    "\\N",
    "\\C",
    "\\",
    "a\\",
    "\\x",
    "\\xZ",
    "\\xZZ",
    "\\xA",
    "\\x{}",
    "\\x{110000}",
    "\\x{12",
    "\\x{12G}",
    "\\u0041",
    "\\U00000041",
    "\\é",
    "\\p",
    "\\p{",
    "\\p{Foo}",
    "\\pX",
    "\\p^",
    "\\p{^}",
    "\\p{IsGreek}",
    "\\p{greek}",
    "\\p{Kawi}",
    "\\p{Vithkuqi}",
    "\\p{Cn}",
    "\\p{LC}",
    "\\p{L&}",
    "[a",
    "[",
    "[^",
    "[]",
    "[^]",
    "[z-a]",
    "[a-\\d]",
    "[\\b]",
    "[\\Q]",
    "[\\z]",
    "[[:word:]",
    "[[:foo:]]",
    "[[:alpha:]-z]",
    "[\\p{Foo}]",
    "[\\x{41}-\\x{40}]",
    "a)",
    "(a))",
    ")",
    "(a",
    "((a)",
    "a{1001}",
    "a{1000,1001}",
    "a{5,4}",
    "a{100000000}",
    "a{99999999}",
    "a{2,1000000000}",
    "(a{100}){100}",
    "(a{2}){501}",
    "((a{2}){2}){251}",
    "(a{0}){1000}{1}",
    "(?:a{10}b){101}",
    "(?:(?:a{3}){3}){112}",
    "(?:(?:a{3}){3}){111}",
    "(" * 1001 + ")" * 1001,
    "(" * 999 + ")" * 999,
    "(?:" * 2000 + "a" + ")" * 2000,
    "(?:a" * 1500 + ")" * 1500,
    "(a" * 1200 + ")" * 1200,
    "(?:" + "a" * 4000 + "){1000}",
    "(?:" + "a" * 3000 + "){1000}",
    "\ud800",
]

_FRAGMENTS = [
    "a", "b", "Z", "0", "1", "7", "9", "_", "-", ",", ".", "^", "$", "|", "(", ")", "(?:", "(?i)", "(?i:",
    "(?-i:", "(?P<x>", "(?<x>", "(?=", "(?!", "(?<=", "[", "]", "[^", "[:alpha:]", "[:bad:]", "{", "}", "{2}",
    "{2,}", "{,2}", "{1,3}", "{3,1}", "{0}", "{1001}", "*", "+", "?", "*?", "+?", "??", "\\", "\\d", "\\w",
    "\\s", "\\b", "\\B", "\\A", "\\z", "\\Z", "\\Q", "\\E", "\\x", "\\x4", "\\x41", "\\x{", "\\x{41}", "\\p",
    "\\pL", "\\p{", "\\p{Greek}", "\\p{Bad}", "\\P{^Lu}", "\\1", "\\0", "\\07", "\\n", "\\t", "\\-", "\\]",
    "\\e", "é", "中", "(?<", "(?<n>", "(?<a_1>", ">", "\\p{Kawi}", "\\p{Toto}",
]  # fmt: skip


def generated(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(_FRAGMENTS) for _ in range(rng.randint(1, 8))) for _ in range(count)]


def patterns() -> list[str]:
    seen: dict[str, None] = {}
    for pattern in HANDWRITTEN + generated(20261130, 3000):
        seen.setdefault(pattern, None)
    return list(seen)


def recorded() -> list[tuple[str, Optional[str], Optional[str]]]:
    """(pattern, Go 1.19's error, the newer Go's error) for every pattern; None where Go compiles it."""
    lines = VERDICTS.read_text("utf-8").splitlines()
    verdicts = []
    for line in lines[1:]:
        entry = json.loads(line)
        verdicts.append((entry[0], entry[1], entry[2] if len(entry) > 2 else entry[1]))
    return verdicts


def _verdicts(goroot: str, corpus: list[str]) -> tuple[str, list[Optional[str]]]:
    go = str(Path(goroot) / "bin" / "go")
    env = {"GOROOT": goroot, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod", "PATH": "/usr/bin:/bin", "HOME": "/tmp"}
    with tempfile.TemporaryDirectory(prefix="re2-oracle-") as directory:
        shutil.copyfile(Path(__file__).with_name("re2_oracle.go"), Path(directory) / "main.go")
        (Path(directory) / "go.mod").write_text("module oracle\n\ngo 1.19\n")
        subprocess.run([go, "build", "-o", "oracle", "."], cwd=directory, env=env, check=True)
        # Go reads the patterns as JSON, so an unpaired surrogate reaches it as U+FFFD, as it reaches the loader.
        result = subprocess.run(
            [str(Path(directory) / "oracle")], input=json.dumps(corpus), capture_output=True, text=True, check=True
        )
        version = subprocess.run([go, "version"], env=env, capture_output=True, text=True, check=True).stdout
    return version.split()[2], json.loads(result.stdout)


def refresh(old_goroot: str, new_goroot: str) -> None:
    corpus = patterns()
    old_version, old = _verdicts(old_goroot, corpus)
    new_version, new = _verdicts(new_goroot, corpus)
    # One JSON array a line: [pattern, Go 1.19's error or null], plus the newer Go's where it differs.
    lines = [json.dumps({"go1.19": old_version, "newer": new_version})]
    for pattern, old_error, new_error in zip(corpus, old, new):
        entry = [pattern, old_error] + ([new_error] if new_error != old_error else [])
        lines.append(json.dumps(entry, ensure_ascii=True))
    VERDICTS.parent.mkdir(exist_ok=True)
    VERDICTS.write_text("\n".join(lines) + "\n", "utf-8")
    print(f"{len(corpus)} verdicts from {old_version} and {new_version} written to {VERDICTS}")


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "refresh":
        sys.exit(f"usage: {sys.argv[0]} refresh GOROOT_1_19 GOROOT_NEWER")
    refresh(sys.argv[2], sys.argv[3])
