"""blockyaml reads only what leanyaml reads the same way: on every text it accepts, its value is leanyaml's, and a
text leanyaml refuses it never accepts."""

from __future__ import annotations

import math
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from nvidia_oci_hook.formats import blockyaml, leanyaml

REPOSITORY = Path(__file__).resolve().parents[2]


def _same(left: Any, right: Any) -> bool:
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return list(left) == list(right) and all(_same(left[key], right[key]) for key in left)
    if isinstance(left, list):
        return len(left) == len(right) and all(_same(a, b) for a, b in zip(left, right))
    if isinstance(left, float) and math.isnan(left):
        return math.isnan(right)
    return bool(left == right)


def _agree(text: str) -> bool:
    """Whether blockyaml read text (True) or passed it on (False); fails where the two readers differ."""
    try:
        expected: Any = leanyaml.loads(text)
    except (leanyaml.YAMLSubsetError, RecursionError) as exc:
        expected = exc
    try:
        value = blockyaml.loads(text)
    except blockyaml.Unsupported:
        return False
    assert not isinstance(expected, Exception), f"blockyaml read what leanyaml refuses ({expected}):\n{text}"
    assert _same(value, expected), f"{value!r} != {expected!r}\n{text}"
    return True


SCALARS = [
    "plain", "with space", "y", "Yes", "off", "NULL", "~", "true", "0", "-1", "007", "0x1F", "0o17", "1e3", "1.5",
    ".5", "-.inf", ".NaN", "1_000", "+12", "9223372036854775808", "a:b", "a#b", "k:{\"name\":\"x\"}", "--flag",
    "-x", "$(POD_NAMESPACE).svc", "nvidia.com/gpu", "2026-11-01T10:00:00Z", "", "'quoted'", "a'b", "x\"y",
    "50%", "@at", "`tick", "!tag", "&anchor", "*alias", "- dash", "? q", ": c", "a: b", "a #b", "{}", "[]",
]  # fmt: skip


def _random_value(rng: random.Random, depth: int) -> Any:
    roll = rng.random()
    if depth > 4 or roll < 0.45:
        kind = rng.random()
        if kind < 0.1:
            return rng.randint(-5, 10**6)
        if kind < 0.15:
            return rng.choice([True, False, None, 1.5])
        return rng.choice(SCALARS)
    if roll < 0.75:
        return {
            rng.choice(SCALARS[:25]) + str(index % 3): _random_value(rng, depth + 1)
            for index in range(rng.randint(0, 4))
        }
    return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]


@pytest.mark.parametrize("seed", range(4))
def test_agrees_with_leanyaml_on_generated_block_yaml(seed: int) -> None:
    rng = random.Random(seed)
    read = 0
    for _ in range(400):
        value = {"apiVersion": "v1", "kind": "Pod", "spec": _random_value(rng, 0), "items": [_random_value(rng, 1)]}
        for indent in (2, 4):
            text = yaml.safe_dump(value, default_flow_style=False, indent=indent, sort_keys=bool(rng.random() < 0.5))
            read += _agree(text)
    assert read > 200, "the generated texts were hardly ever read: the comparison proves little"


def test_agrees_with_leanyaml_on_mutated_lines() -> None:
    rng = random.Random(7)
    base = yaml.safe_dump(
        {
            "metadata": {"name": "x", "labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "env": [{"name": "A", "value": "1"}]}]},
        },
        default_flow_style=False,
    ).splitlines()
    edits = [" ", "  ", "- ", "#", "key: ", ": ", "'", '"', "\t", "---", "...", "a", "-"]
    accepted = 0
    for _ in range(3000):
        lines = list(base)
        row = rng.randrange(len(lines))
        edit = rng.choice(edits)
        if rng.random() < 0.5:
            lines[row] = edit + lines[row]
        else:
            column = rng.randrange(len(lines[row]) + 1)
            lines[row] = lines[row][:column] + edit + lines[row][column:]
        accepted += _agree("\n".join(lines) + "\n")
    assert accepted > 300


def test_agrees_with_leanyaml_on_the_repositorys_yaml() -> None:
    names = subprocess.run(
        ["git", "ls-files", "*.yaml", "*.yml"], cwd=REPOSITORY, capture_output=True, text=True, check=False
    ).stdout.split()
    if not names:
        pytest.skip("not a git checkout: the repository's YAML files are not listed")
    read = 0
    for name in names:
        text = (REPOSITORY / name).read_text(errors="replace")
        for document in text.split("\n---"):
            read += _agree(document)
    assert read > 10


LITERALS = [
    "a: |\n  one\n  two\nb: 1\n",
    "a: |-\n  one\n\n  two\n\n\nb: 1\n",
    "a: |+\n  one\n   \n\nb: 1\n",
    "a: |\n\n    deeper first\n  shallower ends it\n",
    "a: |\nb: 1\n",
    "a: |-\n\n\nb: 1\n",
    "a: |+\n\n\nb: 1\n",
    "- |\n  in a sequence\n    indented more\n- |-\n  x\n",
    "- a: |\n    set -e\n    if [ -f x ]; then\n      echo 'y: z' # not a comment\n    fi\n  b: 2\n",
    "a:\n  b: |\n      six\n     \n      spaces\n  c: 1\n",
    "a: |\n  x\n      \n  y\n",
    "a: |\n   x\n  y\n",
]


def test_literal_block_scalars_as_leanyaml_reads_them() -> None:
    read = [text for text in LITERALS if _agree(text)]
    # Two are not YAML at all (a line less indented than the scalar's first, where a key was due).
    assert len(read) == len(LITERALS) - 2


def test_kubectl_shape_is_read_without_falling_back() -> None:
    text = """apiVersion: v1
items:
- apiVersion: v1
  kind: Pod
  metadata:
    annotations:
      kubectl.kubernetes.io/restartedAt: '2026-11-01T09:00:00Z'
    labels:
      app: trainer
    name: trainer-0
  spec:
    containers:
    - args:
      - --epochs=10
      env:
      - name: NVIDIA_VISIBLE_DEVICES
        value: "all"
      image: nvcr.io/nvidia/pytorch:24.01-py3
      resources:
        limits:
          nvidia.com/gpu: "1"
      securityContext: {}
      volumeMounts: []
  status:
    phase: Running
kind: List
metadata:
  resourceVersion: ""
"""
    assert _agree(text)
    value = blockyaml.loads(text)
    container = value["items"][0]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert container["env"][0] == {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}
    assert value["kind"] == "List" and value["metadata"] == {"resourceVersion": ""}


@pytest.mark.parametrize(
    "text",
    [
        "a: >\n  folded\n",  # a folded block scalar
        "a: |2\n  literal\n",  # an indentation indicator
        "a: |\n  literal",  # no line break after its last line
        "a: [1, 2]\n",  # flow with content
        "a: &x 1\nb: *x\n",  # anchors
        "a: b # comment\n",  # a comment after a value
        "a: 1\na: 2\n",  # a repeated key: leanyaml says what goyaml does
        "a: plain\n  continued\n",  # a plain scalar on two lines
        "a:\n\tb: 1\n",  # a tab
        "--- x\n",  # content on the marker line
    ],
)
def test_what_it_passes_on(text: str) -> None:
    with pytest.raises(blockyaml.Unsupported):
        blockyaml.loads(text)


def test_prune_passes_over_an_objects_status_and_nothing_else() -> None:
    text = (
        "apiVersion: v1\nitems:\n- apiVersion: v1\n  kind: Pod\n  spec:\n    status: kept\n  status:\n"
        "    conditions:\n    - type: Ready\n\n    # a comment\n    phase: Running\n- kind: Pod\n  status:\n"
        "    phase: Pending\nkind: List\nstatus:\n  x: 1\n"
    )
    value = blockyaml.loads(text, prune=frozenset({"status"}))
    assert value["items"][0] == {"apiVersion": "v1", "kind": "Pod", "spec": {"status": "kept"}}
    # Without an apiVersion before it, a mapping is no object: its status is read.
    assert value["items"][1] == {"kind": "Pod", "status": {"phase": "Pending"}}
    assert "status" not in value and value["kind"] == "List"
    unpruned = blockyaml.loads(text)
    assert unpruned["items"][0]["status"]["phase"] == "Running"
