"""Container environments and nodes with NVIDIA's recorded verdicts on their NVIDIA_REQUIRE_* requirements, to hold
nvidia_oci_hook.nvidia.requirements to NVIDIA's own code.

The cases are hand-written probes (every operator, each property and unknown ones, versions of one to four numbers
and of unequal length, non-numeric and empty values, stray spaces and tabs, missing and doubled operators,
NVIDIA_DISABLE_REQUIRE, the CUDA_VERSION legacy rule, several variables at once) and seeded random expressions
built from the same pieces, each put to a few nodes. data/requirement_verdicts.jsonl holds, a line each, the case
and the verdict of requirements_oracle.go: nvidia-container-toolkit's GetRequirements and internal/requirements
("toolkit", the runtime's csv mode) and libnvidia-container's dsl.c ("cli", what the legacy hook's
nvidia-container-cli does). Refresh it after changing the cases (how to build the oracle: its header):

    python3 -m tests.node.requirement_corpus /tmp/requirements-oracle

The tests read only the recorded file, so the suite needs neither Go nor NVIDIA's sources.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

VERDICTS = Path(__file__).with_name("data") / "requirement_verdicts.jsonl"
SEED = 20261202

Node = dict[str, Optional[str]]

# Realistic nodes, and one per corner: the brand as libnvidia-container names it ("Tesla"), csv mode's empty
# driver and brand (Jetson), versions with leading zeros and prereleases.
NODES: dict[str, Node] = {
    "h100-550": {"cuda": "12.4", "driver": "550.54.15", "arch": "9.0", "brand": "tesla"},
    "a100-535": {"cuda": "12.2", "driver": "535.104.05", "arch": "8.0", "brand": "nvidia"},
    "t4-470": {"cuda": "11.4", "driver": "470.82.01", "arch": "7.5", "brand": "geforce"},
    "l40s-cli": {"cuda": "12.8", "driver": "570.124.06", "arch": "8.9", "brand": "Tesla"},
    "rtx-geforce": {"cuda": "13.0", "driver": "580.65.06", "arch": "12.0", "brand": "GeForce"},
    "jetson-csv": {"cuda": "12.6", "driver": "", "arch": "8.7", "brand": ""},
    "odd-versions": {"cuda": "12.10", "driver": "560.28.03", "arch": "10.0", "brand": "Quadro"},
    "prerelease": {"cuda": "12.4.0-rc.2", "driver": "550.54.15-1", "arch": "9.0", "brand": "Tesla"},
}
REALISTIC = ["h100-550", "a100-535", "t4-470"]

# Modelled on the NVIDIA_REQUIRE_CUDA of NVIDIA's CUDA images.
CUDA_IMAGE_REQUIRES = [
    "cuda>=12.4 brand=tesla,driver>=470,driver<471 brand=unknown,driver>=470,driver<471 "
    "brand=nvidia,driver>=470,driver<471 brand=nvidiartx,driver>=470,driver<471 brand=geforce,driver>=470,driver<471 "
    "brand=tesla,driver>=525,driver<526 brand=geforce,driver>=525,driver<526 brand=tesla,driver>=535,driver<536 "
    "brand=nvidia,driver>=535,driver<536 brand=geforce,driver>=535,driver<536",
    "cuda>=12.8 brand=unknown,driver>=470,driver<471 brand=grid,driver>=470,driver<471 "
    "brand=tesla,driver>=470,driver<471 brand=nvidia,driver>=470,driver<471 brand=quadro,driver>=470,driver<471 "
    "brand=quadrortx,driver>=470,driver<471 brand=nvidiartx,driver>=470,driver<471 brand=vapps,driver>=470,driver<471 "
    "brand=tesla,driver>=535,driver<536 brand=tesla,driver>=550,driver<551",
    "cuda>=11.4 brand=tesla,driver>=418,driver<419 brand=tesla,driver>=450,driver<451",
    "cuda>=12.2 brand=tesla,driver>=470,driver<471",
    "cuda>=13.0",
    "cuda>=12.9 brand=unknown,driver>=535,driver<536 brand=tesla,driver>=535,driver<536",
]

OPERATORS = ["=", "!=", "<", "<=", ">", ">="]
BAD_OPERATORS = ["==", "=>", "=<", "!", "<>", "!==", ">>", "~=", ""]
VERSIONS = [
    "12", "12.4", "12.4.0", "12.4.1", "12.2", "11", "11.4", "13.0", "12.10", "12.8.0.1", "550", "550.54", "550.54.15",
    "550.54.15.1", "535.104.05", "535.104.5", "470.82.01", "470", "471", "8", "8.0", "8.9", "9.0", "7.5", "10",
    "12.04", "0", "0.0.0",
]  # fmt: skip
ODD_VERSIONS = [
    "", "v12.4", "V12.4", "12.4-rc1", "12.4.0-rc.1", "12.4+meta", "12.4.0-01", "12..4", ".12", "12.", "x", "12.4a",
    "12,4", "-1", "+12", "12 ", "\t12", "18446744073709551616", "18446744073709551615", "99999999999999999999.1",
    "１２", "12.4.0-alpha.beta", "1.2.3-0a",
]  # fmt: skip
BRANDS = ["tesla", "Tesla", "TESLA", "nvidia", "geforce", "GeForce", "quadro", "unknown", "", "tes la", "nvidiartx"]


def _factor(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.07:
        return rng.choice(["foo>=1", "CUDA>=12.4", "Driver<600", "cuda12.4", "brand", "arch>=", ">=12", "=tesla"])
    prop = rng.choice(["cuda", "cuda", "driver", "driver", "arch", "brand", "brand"])
    if roll < 0.12:
        operator = rng.choice(BAD_OPERATORS)
    else:
        operator = rng.choice(OPERATORS if prop != "brand" or rng.random() < 0.3 else ["=", "!="])
    if prop == "brand":
        value = rng.choice(BRANDS) if rng.random() < 0.9 else rng.choice(VERSIONS)
    else:
        value = rng.choice(VERSIONS) if rng.random() < 0.85 else rng.choice(ODD_VERSIONS)
    return f"{prop}{operator}{value}"


def _expression(rng: random.Random) -> str:
    terms = []
    for _ in range(rng.choice([1, 1, 1, 2, 2, 3, 4])):
        factors = [_factor(rng) for _ in range(rng.choice([1, 1, 2, 2, 3]))]
        if rng.random() < 0.05:
            factors.insert(rng.randrange(len(factors) + 1), "")
        terms.append(",".join(factors))
    separator = " " if rng.random() < 0.92 else rng.choice(["  ", "\t", " \t"])
    text = separator.join(terms)
    if rng.random() < 0.05:
        text = rng.choice([" ", "  ", "\t"]) + text
    if rng.random() < 0.05:
        text += rng.choice([" ", ",", "\t"])
    return text


HANDWRITTEN_EXPRESSIONS = [
    # each operator on each version property, versions of unequal length
    *(f"{prop}{op}{value}" for prop in ("cuda", "driver", "arch") for op in OPERATORS for value in ("12.4", "12.4.0")),
    "cuda=12.4.0", "cuda=12", "cuda<12", "cuda>12", "cuda>=12.4.0.0", "cuda<=12.4.0.0.0", "cuda!=12.4.0",
    "driver>=550.54.15.0", "driver=550.054.15", "driver>=535.104.5", "driver=535.104.05", "driver<535.104.10",
    "arch>=8", "arch=9", "arch>=9.0.0", "arch<9.1",
    # brand: case, operators other than = and !=
    "brand=tesla", "brand=Tesla", "brand=TESLA", "brand!=tesla", "brand<tesla", "brand>=tesla", "brand>tesla",
    "brand=", "brand!tesla", "brand==tesla", "brand=te sla", "brand=tesla ", "brand=geforce,brand!=tesla",
    # operators: doubled, reversed, lone
    "cuda==12.4", "cuda=>12.4", "cuda=<12.4", "cuda!12.4", "cuda!12.2", "cuda<>12.4", "cuda>>12", "cuda!==12.4",
    # properties: unknown, cased, empty, with spaces
    "foo>=1", "foo>=1 cuda>=99", "cuda>=99 foo>=1", "foo", "CUDA>=12.4", "Cuda>=99", "BRAND=tesla", "cuda>=12.4,foo=1",
    ">=12", "=tesla", "cuda", "cuda>=", "cuda12.4", "cuda >= 12.4", "cuda>= 12.4", "cuda >=12.4",
    # values that are not plain numbers
    "cuda>=v12.4", "cuda>=12.4-rc1", "cuda>=12.4+build", "cuda>=12..4", "cuda>=.12", "cuda>=12.", "cuda>=x",
    "cuda>=12.4a", "cuda>=18446744073709551615", "cuda>=18446744073709551616", "cuda<99999999999999999999.1",
    "driver>=550.54.15.1", "cuda>=12.4.0-01", "cuda>=-1",
    # whitespace and empty pieces
    "", " ", "  ", "\t", ",", ",,", "cuda>=12.4 ", " cuda>=12.4", "cuda>=12.4  brand=tesla", "cuda>=12.4\tbrand=tesla",
    "\tcuda>=12.4", "cuda>=99\t", "cuda>=12.4,", ",cuda>=12.4", "cuda>=12.4,,driver>=1", "cuda>=99 ,", ", cuda>=99",
    "cuda>=99 , cuda>=1", "\x1c", "\xa0", "\u2003", "\u2003cuda>=1", "cuda>=1\xa0",
    # OR, AND, laziness: an invalid factor after a term that holds, or after a factor that fails
    "cuda>=99 cuda>=1", "cuda>=1 cuda>=99", "cuda>=1 foo", "cuda>=99 foo", "cuda>=99,foo cuda>=1", "foo,cuda>=1",
    "cuda>=1,brand=nope driver>=1", "brand=tesla,driver>=470,driver<471 cuda>=12", "cuda>=12.4,driver>=550,arch>=9.0",
    "cuda>=12.4,driver>=550,arch>=9.1", "driver>=470,driver<471 brand=tesla,driver>=535,driver<536",
    "brand=tesla,cuda>=99 brand=nvidia,cuda>=12", "cuda>=99 cuda>=x", "cuda>=1 cuda>=x", "cuda>=x cuda>=1",
    "brand<tesla cuda>=1", "cuda>=1 brand<tesla", "brand!tesla cuda>=1", "cuda>=99 brand!tesla",
]  # fmt: skip

# Semantic-version prereleases, for the toolkit's ordering of them (the cli refuses the "-").
PRERELEASE_EXPRESSIONS = [
    "cuda>=12.4.0-rc.1", "cuda>=12.4.0-rc.10", "cuda>=12.4.0-rc.2", "cuda=12.4.0-rc.2+build", "cuda<12.4.0-rc.2a",
    "cuda>=12.4.0-beta", "cuda>12.4.0-rc", "cuda>=12.4.0-rc.2.1", "cuda<12.4.0-rc.2.1", "cuda>=12.4.0-RC.2",
    "cuda>12.4.0-rc.-1", "cuda>=12.4.0-rc.18446744073709551616", "cuda<12.4.0", "cuda>=12.4-rc.3", "cuda!=12.4.0-rc.2",
    "driver>=550.54.15-0", "driver>550.54.15-a", "driver<550.54.15", "driver=550.54.15-01", "cuda>=12.4.0-0",
]  # fmt: skip

DISABLE_VALUES = ["true", "TRUE", "True", "t", "T", "1", "false", "0", "f", "no", "yes", "on", " true", "", "garbage"]
CUDA_VERSIONS = ["12.4.1", "12.4", "12", "11.4.3", "13.0.0", "v12.4", "12.4.1.1", "abc", "", "12.4-rc1", "012.04"]


def cases() -> list[dict[str, Any]]:
    rng = random.Random(SEED)
    names = list(NODES)
    found: list[dict[str, Any]] = []

    def add(env: list[str], node_names: list[str]) -> None:
        for name in node_names:
            found.append({"env": env, "node": NODES[name]})

    for text in CUDA_IMAGE_REQUIRES:
        add([f"NVIDIA_REQUIRE_CUDA={text}"], names)
    for text in HANDWRITTEN_EXPRESSIONS:
        add([f"NVIDIA_REQUIRE_CUDA={text}"], [REALISTIC[len(found) % 3], rng.choice(names[3:])])
    for text in PRERELEASE_EXPRESSIONS:
        add([f"NVIDIA_REQUIRE_CUDA={text}"], ["prerelease", "h100-550"])
    # several variables, ANDed; a JETPACK one is not a requirement
    several = [
        ["NVIDIA_REQUIRE_CUDA=cuda>=12.0", "NVIDIA_REQUIRE_DRIVER=driver>=535"],
        ["NVIDIA_REQUIRE_CUDA=cuda>=12.0", "NVIDIA_REQUIRE_DRIVER=driver>=560"],
        ["NVIDIA_REQUIRE_CUDA=cuda>=13.0", "NVIDIA_REQUIRE_ARCH=arch>=9.0"],
        ["NVIDIA_REQUIRE_CUDA=cuda>=99", "NVIDIA_REQUIRE_X=foo", "NVIDIA_REQUIRE_BRAND=brand=nope"],
        ["NVIDIA_REQUIRE_JETPACK=csv-mounts=all", "NVIDIA_REQUIRE_CUDA=cuda>=11"],
        ["NVIDIA_REQUIRE_JETPACK_HOST_MOUNTS=foo", "NVIDIA_REQUIRE_L4T=l4t>=35"],
        ["NVIDIA_REQUIRE_=cuda>=99"],
        ["NVIDIA_REQUIRE_CUDA=", "NVIDIA_REQUIRE_OTHER=cuda>=12"],
        ["NVIDIA_REQUIRE_CUDA=cuda>=12.0", "NVIDIA_REQUIRE_CUDA=cuda>=99"],  # the last one wins
        ["nvidia_require_cuda=cuda>=99"],
        ["NVIDIA_REQUIRE_A=brand!tesla", "NVIDIA_REQUIRE_B=cuda>=99", "NVIDIA_REQUIRE_C=cuda>=x"],
    ]
    for env in several:
        add(env, names)
    # NVIDIA_DISABLE_REQUIRE
    for value in DISABLE_VALUES:
        add([f"NVIDIA_DISABLE_REQUIRE={value}", "NVIDIA_REQUIRE_CUDA=cuda>=99"], [rng.choice(names)])
        add([f"NVIDIA_DISABLE_REQUIRE={value}", "CUDA_VERSION=99.0"], [rng.choice(names)])
    # CUDA_VERSION, the legacy rule
    for version in CUDA_VERSIONS:
        add([f"CUDA_VERSION={version}"], [rng.choice(REALISTIC)])
        add([f"CUDA_VERSION={version}", "NVIDIA_REQUIRE_CUDA="], [rng.choice(REALISTIC)])
        add([f"CUDA_VERSION={version}", "NVIDIA_REQUIRE_CUDA=cuda>=11.0"], [rng.choice(REALISTIC)])
        add([f"CUDA_VERSION={version}", "NVIDIA_REQUIRE_DRIVER=driver>=1"], [rng.choice(REALISTIC)])
    add(["CUDA_VERSION=12.4.1", "NVIDIA_DISABLE_REQUIRE=1"], ["t4-470"])
    add(["CUDA_VERSION=4294967296.1"], ["h100-550"])
    add(["CUDA_VERSION=1.4294967296"], ["h100-550"])
    add([], ["h100-550"])
    add(["PATH=/usr/bin"], ["t4-470"])
    # seeded random expressions, one to three variables
    for _ in range(420):
        env = [
            f"NVIDIA_REQUIRE_{name}={_expression(rng)}"
            for name in rng.sample(["CUDA", "A", "B"], rng.choice([1, 1, 2, 3]))
        ]
        if rng.random() < 0.1:
            env.append(f"CUDA_VERSION={rng.choice(CUDA_VERSIONS)}")
        add(env, [rng.choice(names)])
    return found


def recorded() -> list[dict[str, Any]]:
    return [json.loads(line) for line in VERDICTS.read_text("utf-8").splitlines() if line]


def refresh(oracle: str) -> None:
    corpus = cases()
    result = subprocess.run([oracle], input=json.dumps(corpus), capture_output=True, text=True, check=True)
    verdicts = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(verdicts) == len(corpus), (len(verdicts), len(corpus))
    VERDICTS.parent.mkdir(exist_ok=True)
    with VERDICTS.open("w", encoding="utf-8") as out:
        for case, verdict in zip(corpus, verdicts):
            out.write(json.dumps({**case, "nvidia": verdict}, ensure_ascii=True) + "\n")
    print(f"{len(corpus)} cases with NVIDIA's verdicts written to {VERDICTS}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} ORACLE_BINARY")
    refresh(sys.argv[1])
