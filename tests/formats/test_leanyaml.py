"""leanyaml reads its YAML subset as goyaml.v2 does (go_yaml_load is the reference), or says it cannot."""

from __future__ import annotations

import ast
import json
import math
import random
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from nvidia_oci_hook.formats.leanyaml import YAMLSubsetError, _is_plain_float, go_resolve_plain, loads
from nvidia_oci_hook.kinds.cdi.goyaml import go_yaml_load

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
# The reference is libyaml's reading, as goyaml.v2 ports libyaml: PyYAML's own scanner refuses tabs that both
# take as separation. Debian's python3-yaml and PyPI's wheels have it; without it these tests fail, never skip.


@pytest.fixture
def libyaml() -> None:
    assert getattr(yaml, "__with_libyaml__", False), "PyYAML without libyaml: the reference reading is missing"


needs_libyaml = pytest.mark.usefixtures("libyaml")


def same(left: Any, right: Any) -> bool:
    """Equal, with the same types all the way down (1, 1.0 and True differ), NaN equal to NaN, -0.0 not equal
    to 0.0, and mapping keys in the same order."""
    if type(left) is not type(right):
        return False
    if isinstance(left, float):
        if math.isnan(left) or math.isnan(right):
            return math.isnan(left) and math.isnan(right)
        return left == right and math.copysign(1.0, left) == math.copysign(1.0, right)
    if isinstance(left, list):
        return len(left) == len(right) and all(same(a, b) for a, b in zip(left, right))
    if isinstance(left, dict):
        return len(left) == len(right) and all(
            same(key, other) and same(left[key], right[other]) for key, other in zip(left, right)
        )
    return bool(left == right)


def oracle(text: str) -> tuple[bool, Any]:
    try:
        return True, go_yaml_load(text)
    except Exception as error:  # PyYAML's constructors fail in more ways than YAMLError, all of them refusals
        return False, error


def agreement(text: str) -> str:
    """Whether loads reads text ("equal"), says it cannot ("unsupported") or refuses it ("refused"); fails where
    loads and the reference disagree."""
    accepted, expected = oracle(text)
    try:
        value = loads(text)
    except YAMLSubsetError as error:
        assert "\n" not in str(error) and str(error) == f"line {error.line}: {error.reason}"
        if error.unsupported:
            return "unsupported"
        # goyaml.v2 refuses a repeated key, where PyYAML keeps the last value.
        assert not accepted or error.reason.startswith("duplicate key"), f"{error} for {text!r}, read as {expected!r}"
        return "refused"
    assert accepted, f"loads read {value!r} from {text!r}, which the reference refuses: {expected}"
    assert same(value, expected), f"{text!r}: loads read {value!r}, the reference {expected!r}"
    return "equal"


def unsupported_reason(text: str) -> str | None:
    try:
        loads(text)
    except YAMLSubsetError as error:
        return error.reason if error.unsupported else None
    return None


# ---------------------------------------------------------------------------------------------------------------
# The module's import budget


def test_importing_it_loads_nothing_but_math() -> None:
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); before = set(sys.modules); "
        "import nvidia_oci_hook.formats.leanyaml; print(sorted(set(sys.modules) - before))"
    )
    output = subprocess.run(
        [sys.executable, "-I", "-c", script, str(ROOT)], check=True, capture_output=True, text=True
    ).stdout
    loaded = set(ast.literal_eval(output))
    assert "nvidia_oci_hook.formats.leanyaml" in loaded
    # __future__ comes with `from __future__ import annotations` where the interpreter has not loaded it yet.
    assert loaded <= {
        "nvidia_oci_hook",
        "nvidia_oci_hook.formats",
        "nvidia_oci_hook.formats.leanyaml",
        "math",
        "__future__",
    }


# ---------------------------------------------------------------------------------------------------------------
# Plain scalars


_FLOAT_PATTERN = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")


def test_float_syntax_check_matches_the_regular_expression() -> None:
    rng = random.Random(5)
    alphabet = "0123456789..eE+-_ x\n٣"
    texts = ["", ".", "1.", ".5", "1e5", "1e", "e5", "+.5e-3", "1.5\n", "1.5\n\n", "\n", "-", "+1", "1_0", "٣"]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 7))) for _ in range(20000)]
    for text in texts:
        assert _is_plain_float(text) == bool(_FLOAT_PATTERN.match(text)), repr(text)


@pytest.mark.parametrize(
    ("plain", "value"),
    [("0755", 493), ("1e3", 1000.0), ("yes", True), ("Off", False), ("~", None), ("", None), (".5", 0.5),
     ("-.inf", -math.inf), ("0x1F", 31), ("0b101", 5), ("0o17", 15), ("1_000", 1000), ("08", 8.0),
     ("9223372036854775808", 9223372036854775808), ("18446744073709551616", 1.8446744073709552e19),
     ("1e400", "1e400"), ("0.5.0", "0.5.0"), ("2024-01-01", "2024-01-01"), ("1.5\n", 1.5)],
)  # fmt: skip
def test_plain_scalars_are_typed_as_goyaml_v2_types_them(plain: str, value: Any) -> None:
    assert same(go_resolve_plain(plain), value)


# ---------------------------------------------------------------------------------------------------------------
# Constructs of the subset


NVIDIA_CTK_SPEC = """\
---
cdiVersion: 0.5.0
containerEdits:
  deviceNodes:
  - path: /dev/nvidia-modeset
  - path: /dev/nvidia-uvm
  - path: /dev/nvidia-uvm-tools
  - path: /dev/nvidiactl
  env:
  - NVIDIA_VISIBLE_DEVICES=void
  - NVIDIA_CTK_LIBCUDA_DIR=/usr/lib/x86_64-linux-gnu
  hooks:
  - args:
    - nvidia-cdi-hook
    - create-symlinks
    - --link
    - libglxserver_nvidia.so.550.54.15::/usr/lib/x86_64-linux-gnu/nvidia/xorg/libglxserver_nvidia.so
    hookName: createContainer
    path: /usr/bin/nvidia-cdi-hook
  - args:
    - nvidia-cdi-hook
    - update-ldcache
    - --folder
    - /usr/lib/x86_64-linux-gnu
    hookName: createContainer
    path: /usr/bin/nvidia-cdi-hook
  mounts:
  - containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15
    hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15
    options:
    - ro
    - nosuid
    - nodev
    - bind
  - containerPath: /usr/bin/nvidia-smi
    hostPath: /usr/bin/nvidia-smi
    options:
    - ro
    - nosuid
    - nodev
    - bind
  - containerPath: /lib/firmware/nvidia/550.54.15/gsp_ga10x.bin
    hostPath: /lib/firmware/nvidia/550.54.15/gsp_ga10x.bin
    options:
    - ro
    - nosuid
    - nodev
    - bind
devices:
- containerEdits:
    deviceNodes:
    - hostPath: /dev/nvidia0
      path: /dev/nvidia0
    - hostPath: /dev/dri/card1
      path: /dev/dri/card1
    - hostPath: /dev/dri/renderD128
      path: /dev/dri/renderD128
    hooks:
    - args:
      - nvidia-cdi-hook
      - create-symlinks
      - --link
      - ../card1::/dev/dri/by-path/pci-0000:3b:00.0-card
      - --link
      - ../renderD128::/dev/dri/by-path/pci-0000:3b:00.0-render
      hookName: createContainer
      path: /usr/bin/nvidia-cdi-hook
    - args:
      - nvidia-cdi-hook
      - chmod
      - --mode
      - "755"
      - --path
      - /dev/dri
      hookName: createContainer
      path: /usr/bin/nvidia-cdi-hook
  name: "0"
- containerEdits:
    deviceNodes:
    - hostPath: /dev/nvidia1
      path: /dev/nvidia1
    - hostPath: /dev/dri/card2
      path: /dev/dri/card2
  name: "1"
- containerEdits:
    deviceNodes:
    - hostPath: /dev/nvidia0
      path: /dev/nvidia0
    - hostPath: /dev/nvidia1
      path: /dev/nvidia1
    - hostPath: /dev/dri/card1
      path: /dev/dri/card1
    - hostPath: /dev/dri/card2
      path: /dev/dri/card2
  name: all
kind: nvidia.com/gpu
"""


@needs_libyaml
def test_an_nvidia_ctk_spec_reads_as_the_reference_reads_it() -> None:
    assert agreement(NVIDIA_CTK_SPEC) == "equal"
    spec = loads(NVIDIA_CTK_SPEC)
    assert spec["cdiVersion"] == "0.5.0" and [device["name"] for device in spec["devices"]] == ["0", "1", "all"]
    assert spec["devices"][0]["containerEdits"]["hooks"][1]["args"][3] == "755"
    # The same spec as PyYAML writes it in block, flow and double-quoted styles, and as JSON.
    assert agreement(yaml.safe_dump(spec)) == "equal"
    assert agreement(yaml.safe_dump(spec, default_flow_style=True, width=100)) == "equal"
    assert agreement(yaml.safe_dump(spec, default_style='"')) == "equal"
    assert agreement(json.dumps(spec, indent=2)) == "equal"


CONSTRUCTS = [
        ("", None),
        ("# nothing but a comment\n\n", None),
        ("---\n", None),
        ("---\n...\n", None),
        ("\ufeffa: 1\n", {"a": 1}),
        ("---\na: 1\n...\n# after the end\n", {"a": 1}),
        ("--- plain\n...\n", "plain"),
        ("# top\na: 1 # trailing\n\n    # indented comment\nb: x#y\nc: '#'\n", {"a": 1, "b": "x#y", "c": "#"}),
        ("a:\n  b:\n    c: d\n  e: f\ng: h\n", {"a": {"b": {"c": "d"}, "e": "f"}, "g": "h"}),
        ("- name: a\n  value: 1\n- name: b\n-   deep: 1\n    deeper: 2\n",
         [{"name": "a", "value": 1}, {"name": "b"}, {"deep": 1, "deeper": 2}]),
        ("key:\n- a\n- b\nother:\n  - c\n", {"key": ["a", "b"], "other": ["c"]}),
        ("- k:\n  - a\n  j: 1\n", [{"k": ["a"], "j": 1}]),
        ("- - a\n  - b\n- c\n-\n  - d\n", [["a", "b"], "c", ["d"]]),
        ("a:\nb:\n  -\n  - ~\nc: # comment\n", {"a": None, "b": [None, None], "c": None}),
        ("key:\n  value on its own line\n", {"key": "value on its own line"}),
        ("2: a\nno: b\n~: c\n'2': d\n1.5: e\n", {2: "a", False: "b", None: "c", "2": "d", 1.5: "e"}),
        ("a: 0755\nb: 1e3\nc: yes\nd: 0.5.0\ne: -0x1F\nf: 2024-01-01\n",
         {"a": 493, "b": 1000.0, "c": True, "d": "0.5.0", "e": -31, "f": "2024-01-01"}),
        ("path: /dev/dri/by-path/pci-0000:3b:00.0-card\nurl: http://x/y?a=b#c\n",
         {"path": "/dev/dri/by-path/pci-0000:3b:00.0-card", "url": "http://x/y?a=b#c"}),
        ("a: 'it''s # not a comment'\nb: ''\nc: \"\"\n", {"a": "it's # not a comment", "b": "", "c": ""}),
        (r'a: "\\ \" \/ \0 \a \b \t \n \v \f \r \e \  \N \_ \L \P \x41 \u00e9 \U0001F600"' "\n",
         {"a": '\\ " / \0 \a \b \t \n \v \f \r \x1b   \x85 \xa0 \u2028 \u2029 A \u00e9 \U0001f600'}),
        ('a: "one\n  two\n\n  three \\\n  four"\n', {"a": "one two\nthree four"}),
        ("a: 'x  \n\n\n   y'\nb: 'p\n  q'\n", {"a": "x\n\ny", "b": "p q"}),
        ("- \"a\\\n\n  b\"\n", ["a\nb"]),
        ("a: [1, 'b', \"c\", {d: e, f: [g]}, [], {}]\n",
         {"a": [1, "b", "c", {"d": "e", "f": ["g"]}, [], {}]}),
        ("a: [\n  1,\n  2, # comment\n\n]\nb: {p: 1,\n  q: 2}\n", {"a": [1, 2], "b": {"p": 1, "q": 2}}),
        ('{"a": {"b": [1, 2.5, true, null, "x"]}, "c": "\\u00e9"}', {"a": {"b": [1, 2.5, True, None, "x"]}, "c": "é"}),
        ("{a: , b: 1}\n", {"a": None, "b": 1}),
        ("a: |\n  line 1\n    indented\n\n  line 3\nb: 1\n", {"a": "line 1\n  indented\n\nline 3\n", "b": 1}),
        ("a: |-\n  x\n\n\nb: |+\n  y\n\n\nc: >\n  folded\n  text\n\n  para\n   more\n  end\n",
         {"a": "x", "b": "y\n\n\n", "c": "folded text\npara\n more\nend\n"}),
        ("a: >-\n  x\n  y\n", {"a": "x y"}),
        ("- |2\n   two spaces kept\n  none\n", [" two spaces kept\nnone\n"]),
        ("a: |  # comment\n  x\n", {"a": "x\n"}),
        ("a: |\nb: 1\n", {"a": "", "b": 1}),
        ("a:\tb\t# comment\nc :\t'd'\n", {"a": "b", "c": "d"}),
        ("a: 1\r\nb: 'x\r\n  y'\r\n", {"a": 1, "b": "x y"}),
        ("  a: 1\n  b: 2\n", {"a": 1, "b": 2}),
]  # fmt: skip


@needs_libyaml
@pytest.mark.parametrize(("text", "value"), CONSTRUCTS)
def test_constructs_of_the_subset(text: str, value: Any) -> None:
    assert same(loads(text), value)
    assert agreement(text) == "equal"


@needs_libyaml
@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("a:\n  b: 1\n c: 2\n", 3),  # bad indentation
        ("a:\n    b: 1\n  c: 2\n", 3),
        ("- a:\n    b: 1\n c: 2\n", 3),
        ("a: 1\n  b: 2\n", 2),  # a deeper key continues the plain scalar: "mapping values are not allowed"
        ("a: 'x'\n  b\n", 2),
        ('a: "x\nb: 1\n', 1),  # unclosed quotes
        ("a: 1\nb: 'x\n", 2),
        ("a: [1, 2\n", 1),  # unclosed flow
        ("a: {b: 1,\n  c: [2]\n", 1),
        ("a:\n  b: 1\n  c\n", 3),  # a key without its ':'
        ("a: 1\nb\nc: 2\n", 2),
        ("a:\n\tb: 1\n", 2),  # tabs in indentation
        ("a: 'x'\n\t\nb: 1\n", 2),
        ("- \ta\n", 1),
        ("a: 1\nb:\n  c: 1\n  c: 2\n", 4),  # duplicate keys
        ("{a: 1, b: 2, a: 3}\n", 1),
        ("a: 1\nyes: 2\ntrue: 3\n", 3),
        ("a: 1\n- b\n", 2),
        ("a: - b\n", 1),
        ("a: b: c\n", 1),
        ('"multi\n  line": 1\n', 2),
        ('a: "\\q"\n', 1),
        ('a: "\\ud800"\n', 1),
        ('a: "\\x4g"\n', 1),
        ("a: x\nb: \x01\n", 2),
        ("a: [x, , y]\n", 1),
        ('a: ["x" "y"]\n', 1),
        ("a: |0\n  x\n", 1),
        ("a: | x\n", 1),
        ("a: @x\n", 1),
        ("a: [x] y\n", 1),
    ],
)
def test_invalid_texts_are_refused_at_their_line(text: str, line: int) -> None:
    with pytest.raises(YAMLSubsetError) as caught:
        loads(text)
    assert not caught.value.unsupported and caught.value.line == line
    assert agreement(text) == "refused"


def test_a_duplicate_key_is_named() -> None:
    with pytest.raises(YAMLSubsetError, match=r'^line 3: duplicate key "name"$'):
        loads("- name: a\n  path: /x\n  name: b\n")


@needs_libyaml
@pytest.mark.parametrize(
    "text",
    [
        "a: &anchor 1\nb: *anchor\n",
        "a: !!str 1\n",
        "? a\n: b\n",
        "base: {x: 1}\nderived:\n  <<: {y: 2}\n",
        "%YAML 1.1\n---\na: 1\n",
        "a: 1\n---\nb: 2\n",
        "a: a plain scalar\n  on two lines\n",
        "a: [a plain\n  scalar]\n",
        "{a, b: 1}\n",
        "[a: 1]\n",
        "{a:b: 1}\n",
        "1: a\n1.0: b\n",
        "1: a\ntrue: b\n",
        "k" * 1100 + ": v\n",
        "[" * 150 + "]" * 150,
        "a: 'x\x85y'\n",
        "a: 1\n\ufeffb: 2\n",
        "a: x\n\t\n",
        "[1]\nb\n",
        "a: |\n  x\n \ty\n",
        "...\n",
        "- a\n|\n x\n",
    ],
)
def test_what_lies_outside_the_subset_is_unsupported(text: str) -> None:
    with pytest.raises(YAMLSubsetError) as caught:
        loads(text)
    assert caught.value.unsupported
    assert agreement(text) == "unsupported"


# ---------------------------------------------------------------------------------------------------------------
# Corpora: every YAML and JSON file under tests/


def _corpus() -> dict[str, str]:
    """The text of each YAML and JSON file under tests/ (by its path there), but those that are not UTF-8."""
    texts = {}
    for path in sorted(TESTS.rglob("*")):
        if path.suffix in (".yaml", ".yml", ".json") and path.is_file():
            try:
                texts[path.relative_to(TESTS).as_posix()] = path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue
    return texts


CORPUS = _corpus()
# Checked by hand: each is outside the subset (two-documents.yaml holds two documents).
KNOWN_UNSUPPORTED = {"cdi/corpus/bad/two-documents.yaml"}


@needs_libyaml
@pytest.mark.parametrize("name", sorted(CORPUS))
def test_corpus_files_read_as_the_reference_reads_them(name: str) -> None:
    if agreement(CORPUS[name]) == "unsupported":
        assert name in KNOWN_UNSUPPORTED, unsupported_reason(CORPUS[name])


@needs_libyaml
def test_the_corpora_are_read() -> None:
    results = Counter(agreement(text) for text in CORPUS.values())
    assert results["equal"] >= 100 and results["unsupported"] <= len(KNOWN_UNSUPPORTED)


# ---------------------------------------------------------------------------------------------------------------
# Generated documents, as PyYAML writes them


_PIECES = [
    "a", "name", "gpu 0", "key: value", "a:b", "#", " #x", "x#y", "'", '"', "it's", 'say "hi"', "é", "日本",
    "\U0001f600", "-", "- x", "--", "---", "...", "0755", "1e3", "yes", "no", "null", "~", "", " ", "  lead",
    "trail ", "true", "1.5", ".inf", "0x10", "+1", "-2", "1_000", "[x]", "{y}", ",", "?", "!", "&a", "*b", "|",
    ">", "%", "@", "`", "\\", "\t", "\n", "a\nb", "\x85", "\u2028", "\xa0", "/dev/nvidia0", "nvidia.com/gpu",
    "NVIDIA_VISIBLE_DEVICES=void", "--flag=1", "2024-01-01", "<<", "=", "0o17", "0b101", ":", "x:", ": y",
]  # fmt: skip
_NUMBERS = [0, 1, -1, 7, 2**63 - 1, -(2**63), 2**64 - 1, 2**70, 0.5, -1.25, 1e20, 1e-7, math.inf, -math.inf, 3.0, -0.0]


def _scalar(rng: random.Random) -> Any:
    pick = rng.random()
    if pick < 0.5:
        return "".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 3)))
    if pick < 0.7:
        return rng.choice(_NUMBERS)
    if pick < 0.8:
        return rng.choice([True, False, None])
    if pick < 0.9:  # long enough to wrap at 80 columns
        return "x" * rng.randint(30, 120) + " " + "y" * rng.randint(1, 50) + " z"
    return rng.choice(_PIECES)


def _key(rng: random.Random) -> Any:
    if rng.random() < 0.85:
        return "".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 2)))
    return rng.choice([1, 2, True, None, 1.5, "1", "true"])


def _value(rng: random.Random, depth: int = 0) -> Any:
    pick = rng.random()
    if depth > 3 or pick < 0.35:
        return _scalar(rng)
    if pick < 0.7:
        return {_key(rng): _value(rng, depth + 1) for _ in range(rng.randint(0, 4))}
    return [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]


STYLES = [
    {"default_flow_style": flow, "sort_keys": sort, "allow_unicode": unicode, "width": width,
     "default_style": quote, "explicit_start": start}
    for flow in (False, True, None) for sort in (True, False) for unicode in (True, False)
    for width in (20, 80, 4096) for quote in (None, '"', "'") for start in (False, True)
]  # fmt: skip


def _generated(seed: int, count: int) -> list[tuple[str, dict[str, Any]]]:
    rng = random.Random(seed)
    documents = []
    for index in range(count):
        value = _value(rng)
        if not isinstance(value, (dict, list)) and rng.random() < 0.8:
            value = {"k": value}
        documents.append((yaml.safe_dump(value, **STYLES[index % len(STYLES)]), STYLES[index % len(STYLES)]))
    return documents


# What PyYAML writes outside the subset: keys that are empty, multi-line or long as `? key`, strings wrapped
# into plain scalars on several lines, the line breaks NEL, LS and PS raw inside quoted scalars, and tags on
# non-strings where default_style forces quotes.
EXPLICIT_KEY = "'?' indicator"
WRAPPED = "plain scalar on several lines"
LINE_BREAKS = {"character U+0085", "character U+2028", "character U+2029"}
TAG = "tag"


@needs_libyaml
def test_documents_pyyaml_writes_read_as_the_reference_reads_them() -> None:
    results: Counter[str] = Counter()
    reasons: dict[tuple[bool | None, int, str | None], Counter[str]] = {}
    for text, style in _generated(seed=1, count=4000):
        result = agreement(text)
        results[result] += 1
        if result == "unsupported":
            where = (style["default_flow_style"], style["width"], style["default_style"])
            reasons.setdefault(where, Counter())[str(unsupported_reason(text))] += 1
    assert results["equal"] > 2000 and results["refused"] == 0
    for (flow, width, quote), counts in reasons.items():
        if flow is False:
            allowed = {EXPLICIT_KEY, *LINE_BREAKS}
            if width < 4096:
                allowed.add(WRAPPED)
            if quote is not None:
                allowed.add(TAG)
            assert set(counts) <= allowed, (flow, width, quote, counts)


@needs_libyaml
def test_block_documents_of_simple_values_are_all_read() -> None:
    rng = random.Random(3)
    simple = [piece for piece in _PIECES if piece and "\n" not in piece and piece not in ("\x85", "\u2028")]
    for _ in range(500):
        value = {
            "".join(rng.choice(simple) for _ in range(2)): [
                {rng.choice(simple): rng.choice([*simple, *_NUMBERS])} for _ in range(rng.randint(0, 3))
            ]
            for _ in range(rng.randint(1, 4))
        }
        for style in ({}, {"sort_keys": False, "allow_unicode": True}, {"explicit_start": True, "indent": 4}):
            assert agreement(yaml.safe_dump(value, **style)) == "equal"


# ---------------------------------------------------------------------------------------------------------------
# Mutated documents: loads may say unsupported, but never disagrees with the reference


_MUTATIONS = [
    " ", "  ", "\t", "\n", "\n  ", ":", ": ", "- ", "-", "#", " #", "'", '"', "[", "]", "{", "}", ",", "|", ">",
    "|-", ">+", "|2", "\\", "\\n", "\\x4", "---", "...", "? ", "&a ", "*a", "!!str ", "%", "\r", "\r\n", "\ufeff",
    "0", "1e3", "~", "a", "é", "\x01", "<<",
]  # fmt: skip


def _mutate(rng: random.Random, text: str) -> str:
    for _ in range(rng.randint(1, 3)):
        index = rng.randrange(len(text) + 1)
        pick = rng.random()
        if pick < 0.45:
            text = text[:index] + rng.choice(_MUTATIONS) + text[index:]
        elif pick < 0.75:
            text = text[:index] + text[index + rng.randint(1, 3) :]
        elif pick < 0.9:
            text = text[:index] + rng.choice(_MUTATIONS) + text[index + 1 :]
        else:
            lines = text.split("\n")
            row = rng.randrange(len(lines))
            lines[row] = " " * rng.randint(0, 4) + lines[row].lstrip(" ")
            text = "\n".join(lines)
    return text


@needs_libyaml
def test_mutated_documents_never_disagree() -> None:
    rng = random.Random(9)
    seeds = [NVIDIA_CTK_SPEC] + [text for text, _ in _generated(seed=2, count=300) if len(text) < 600]
    seeds += [text for text, _ in CONSTRUCTS if text]
    results: Counter[str] = Counter()
    for _ in range(4000):
        results[agreement(_mutate(rng, rng.choice(seeds)))] += 1
    assert results["equal"] > 1000 and results["refused"] > 100
