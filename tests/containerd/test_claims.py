"""What the CTD1xx rules say containerd does with a file, checked in the configuration containerd really uses.

`containerd config dump` prints the configuration after decoding, defaults and (2.x) migration: a setting that
a rule says containerd ignores must not be there, and a built-in runtime that a rule says is replaced must be
gone. Each claim also requires lint to report its rule on the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nvidia_oci_hook.formats.tomltext import parse_toml
from tests.containerd.corpus import CORPUS, lint_file
from tests.containerd.real import Binary, binaries, describe, dump

pytestmark = pytest.mark.runtime

V2 = ("plugins", "io.containerd.grpc.v1.cri")
V3 = ("plugins", "io.containerd.cri.v1.runtime")
RUNTIMES_V2 = (*V2, "containerd", "runtimes")


class _Absent:
    """What a path holds where the release's config dump has no key there (its name is part of the test ids, which
    must be the same in every process of a distributed run)."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT = _Absent()

# (corpus file, rule, series prefix, path in the dumped configuration, value containerd uses)
CLAIMS: list[tuple[str, str, str, tuple[str, ...], Any]] = [
    # A version 1 file: 1.x reads plugins.cri, 2.0-2.2 lose its runtime settings.
    ("bad/v1-short-names.toml", "CTD105", "1.", (*V2, "containerd", "default_runtime_name"), "nvidia"),
    ("bad/v1-short-names.toml", "CTD105", "2.1", (*V3, "containerd", "default_runtime_name"), "runc"),
    # No version line, plugins named by URI: ignored by every release.
    ("bad/v1-uri-names.toml", "CTD104", "1.", (*V2, "containerd", "default_runtime_name"), "runc"),
    ("bad/v1-uri-names.toml", "CTD104", "2.1", (*V3, "containerd", "default_runtime_name"), "runc"),
    # CDI settings where the version does not read them.
    ("bad/v3-cdi-in-grpc-plugin.toml", "CTD101", "2.", (*V3, "cdi_spec_dirs"), ["/etc/cdi", "/var/run/cdi"]),
    ("bad/v2-cdi-under-containerd.toml", "CTD101", "1.7", (*V2, "enable_cdi"), False),
    ("bad/v2-cdi-in-v3-plugin.toml", "CTD101", "1.7", (*V2, "enable_cdi"), False),
    ("bad/v2-cdi-at-top-level.toml", "CTD101", "1.7", (*V2, "enable_cdi"), False),
    ("bad/v3-short-plugin-name.toml", "CTD101", "2.", (*V3, "enable_cdi"), True),  # the default, not the file's
    # containerd 1.6 has no CDI: enable_cdi is not even a setting there.
    ("good/v2-nvidia-cdi.toml", "CTD103", "1.6", (*V2, "enable_cdi"), ABSENT),
    ("good/v2-nvidia-cdi.toml", "CTD103", "1.7", (*V2, "enable_cdi"), True),
    ("good/v2-nvidia-cdi.toml", "CTD103", "2.", (*V3, "enable_cdi"), True),
    # A spelling only go-toml v2 (containerd 2.x) matches.
    ("good/v2-version-1-spellings.toml", "CTD103", "1.", (*V2, "disable_apparmor"), False),
    ("good/v2-version-1-spellings.toml", "CTD103", "2.", (*V3, "disable_apparmor"), True),
    # A runc option in the runtime's own table is dropped.
    ("bad/v2-binaryname-misplaced.toml", "CTD102", "1.", (*RUNTIMES_V2, "nvidia", "BinaryName"), ABSENT),
    # 1.x replaces the built-in runtimes with the file's; 2.x adds to them.
    ("bad/v2-only-nvidia-runtime.toml", "CTD110", "1.", (*V2, "containerd", "runtimes"), ["nvidia"]),
    ("bad/v2-only-nvidia-runtime.toml", "CTD110", "2.", (*V3, "containerd", "runtimes"), ["nvidia", "runc"]),
    ("bad/v2-runtime-type-missing.toml", "CTD116", "1.", (*V2, "containerd", "runtimes", "runc", "runtime_type"), ""),
    (
        "bad/v2-runtime-type-missing.toml",
        "CTD116",
        "2.",
        (*V3, "containerd", "runtimes", "runc", "runtime_type"),
        "io.containerd.runc.v2",
    ),
    # containerd 2.x's built-in runc stays the default runtime, with the cgroupfs driver.
    (
        "bad/v3-systemd-builtin-runc.toml",
        "CTD113",
        "2.",
        (*V3, "containerd", "runtimes", "runc", "options", "SystemdCgroup"),
        False,
    ),
    # A version 3 file on containerd 1.6: its CRI sections are ignored.
    ("good/v3-nvidia.toml", "CTD106", "1.6", (*V2, "containerd", "default_runtime_name"), "runc"),
    ("good/v3-nvidia.toml", "CTD106", "2.", (*V3, "containerd", "default_runtime_name"), "nvidia"),
]


@pytest.fixture(scope="module")
def releases() -> list[Binary]:
    return binaries()


def _dig(value: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return ABSENT
        value = value[key]
    return sorted(value) if isinstance(value, dict) else value


@pytest.mark.parametrize(("name", "code", "series", "path", "expected"), CLAIMS, ids=lambda v: str(v)[:40])
def test_containerd_uses_what_the_rule_says(
    name: str, code: str, series: str, path: tuple[str, ...], expected: Any, releases: list[Binary], tmp_path: Path
) -> None:
    config = CORPUS / name
    assert code in {f.code for f in lint_file(config)}, f"lint does not report {code} on {name}"
    chosen = [b for b in releases if b.version.startswith(series)]
    assert chosen, f"no containerd {series}* among {releases}"
    for binary in chosen:
        result = dump(binary, config, tmp_path)
        assert not result.refused, describe(binary, config, result)
        parsed = parse_toml(result.stdout.encode())
        assert parsed.ok, f"containerd {binary.version} printed something that is not TOML"
        actual = _dig(parsed.value, path)
        assert actual == expected, f"containerd {binary.version} uses {actual!r} at {'.'.join(path)} for {name}"
