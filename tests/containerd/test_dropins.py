"""Drop-ins (imports): the reading, the merged view, and CTD117-CTD119, each held to real containerd 1.7 and 2.1.

Every case is a root file and one drop-in under conf.d/, linted as `lint ROOT` lints them; each trigger's
verdict is checked with `containerd --config ROOT config dump` on the releases the message names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import pytest

from nvidia_oci_hook.cli import main
from nvidia_oci_hook.kinds.containerd.config import ContainerdConfig
from nvidia_oci_hook.kinds.containerd.reading import effective_config, read_containerd_config
from nvidia_oci_hook.lint import LintOptions, lint_paths, load_file
from tests.containerd.real import Binary, Dump, binaries, describe, dump

CRI = 'plugins."io.containerd.grpc.v1.cri"'
RUNTIME = 'plugins."io.containerd.cri.v1.runtime"'
NVIDIA_V2 = (
    f'[{CRI}.containerd]\n  default_runtime_name = "runc"\n'
    f'[{CRI}.containerd.runtimes.runc]\n  runtime_type = "io.containerd.runc.v2"\n'
    f'[{CRI}.containerd.runtimes.nvidia]\n  runtime_type = "io.containerd.runc.v2"\n'
    f'[{CRI}.containerd.runtimes.nvidia.options]\n  BinaryName = "/usr/bin/nvidia-container-runtime"\n'
)
NVIDIA_V3 = NVIDIA_V2.replace(CRI, RUNTIME)


def write(tmp_path: Path, root_version: int, root_body: str, dropin: str, name: str = "99-nvidia.toml") -> Path:
    conf = tmp_path / "conf.d"
    conf.mkdir(exist_ok=True)
    (conf / name).write_text(dropin)
    root = tmp_path / "config.toml"
    root.write_text(f'version = {root_version}\nimports = ["{conf}/*.toml"]\n{root_body}')
    return root


def findings(root: Path, code: str) -> list[tuple[str, Optional[int], str]]:
    run = lint_paths([str(root)], LintOptions(offline=True))
    return [(Path(f.path).name, f.line, f.message) for r in run.files for f in r.findings if f.code == code]


@pytest.fixture(scope="module")
def releases() -> dict[str, Binary]:
    return {b.series: b for b in binaries()}


def config_dump(binary: Binary, root: Path) -> Dump:
    return dump(binary, root, root.parent)


def runtime_section(stdout: str, name: str) -> str:
    """The dumped lines of runtime `name` and its sub-tables (options)."""
    lines: list[str] = []
    inside = False
    for line in stdout.splitlines():
        if line.lstrip().startswith("["):
            inside = f"runtimes.{name}]" in line or f"runtimes.{name}." in line
        elif inside:
            lines.append(line.strip())
    return "\n".join(lines)


# --- reading -------------------------------------------------------------------------------------------------


def test_imports_are_read_breadth_first_relative_to_the_file_and_once(tmp_path: Path) -> None:
    (tmp_path / "conf.d").mkdir()
    (tmp_path / "conf.d" / "b.toml").write_text('imports = ["../more.toml", "a.toml"]\n')
    (tmp_path / "conf.d" / "a.toml").write_text("version = 2\n")
    (tmp_path / "conf.d" / ".hidden.toml").write_text("")
    (tmp_path / "more.toml").write_text('imports = ["config.toml"]\n')
    root = tmp_path / "config.toml"
    root.write_text('version = 2\nimports = ["conf.d/*.toml", "./more.toml", "missing.toml"]\n')
    collection = read_containerd_config(str(root), lambda p, k: load_file(p, k, LintOptions()))
    names = [Path(p).relative_to(tmp_path).as_posix() for p in collection.order]
    assert names == ["config.toml", "conf.d/.hidden.toml", "conf.d/a.toml", "conf.d/b.toml", "more.toml"]
    assert [Path(p).name for p, _i, _w in collection.unreadable] == ["config.toml"]
    assert "missing.toml: no such file" in collection.unreadable[0][2]


def test_effective_config_merges_as_each_release_does(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        2,
        NVIDIA_V2 + f'[{CRI}]\n  cdi_spec_dirs = ["/a"]\n',
        f"[{CRI}]\n  enable_cdi = true\n[{CRI}.containerd.runtimes.nvidia.options]\n  SystemdCgroup = true\n",
    )
    collection = read_containerd_config(str(root), lambda p, k: load_file(p, k, LintOptions()))
    old = ContainerdConfig(effective_config(collection, "1.7"))
    new = ContainerdConfig(effective_config(collection, "2.1"))
    assert old.version == 2 and new.version == 3
    # 1.x: the drop-in's CRI section replaces the root's; 2.x: merged key by key, then migrated to version 3.
    assert [r.name for r in old.runtimes()] == ["nvidia"] and old.runtimes()[0].type is None
    assert old.cri is not None and "cdi_spec_dirs" not in old.cri
    assert {r.name: r.type for r in new.runtimes()}["nvidia"] == "io.containerd.runc.v2"
    assert new.cri is not None and new.cri["enable_cdi"] is True and new.cri["cdi_spec_dirs"] == ["/a"]


# --- the rules: trigger, clean twin, and what the real releases do with the trigger ---------------------------


def test_ctd117_higher_version(tmp_path: Path, releases: dict[str, Binary]) -> None:
    root = write(tmp_path, 2, NVIDIA_V2, f"version = 3\n[{RUNTIME}]\n  enable_cdi = true\n")
    found = findings(root, "CTD117")
    assert [(name, line) for name, line, _m in found] == [("99-nvidia.toml", 1)]
    message = found[0][2]
    assert "unsupported config version `3`" in message and "higher than root config version 2" in message
    refused = config_dump(releases["1.7"], root)
    assert refused.refused, describe(releases["1.7"], root, refused)
    assert (
        f"failed to load TOML from {tmp_path}/conf.d/99-nvidia.toml: unsupported config version `3`" in refused.stderr
    )
    assert f"failed to load TOML from {tmp_path}/conf.d/99-nvidia.toml" in message
    loaded = config_dump(releases["2.1"], root)
    assert not loaded.refused, describe(releases["2.1"], root, loaded)
    # 2.1 reads the whole configuration as version 3: the root's nvidia runtime is gone, with a warning.
    assert "runtimes.nvidia]" not in loaded.stdout
    assert ("io.containerd.grpc.v1.cri", "containerd runtimes nvidia") in loaded.unknown_keys()


def test_ctd117_version_1_under_version_2(tmp_path: Path, releases: dict[str, Binary]) -> None:
    root = write(tmp_path, 2, NVIDIA_V2, "version = 1\n[plugins.cri]\n  enable_selinux = true\n")
    assert [(n, line) for n, line, _m in findings(root, "CTD117")] == [("99-nvidia.toml", 1)]
    old = config_dump(releases["1.7"], root)
    assert not old.refused and "has been deprecated" in old.stderr
    assert "runtimes.nvidia]" not in old.stdout  # read as version 1: the root's URI sections are ignored
    new = config_dump(releases["2.1"], root)
    assert not new.refused and "runtimes.nvidia]" in new.stdout


def test_ctd117_clean_twin(tmp_path: Path, releases: dict[str, Binary]) -> None:
    root = write(tmp_path, 2, NVIDIA_V2, f"[{CRI}]\n  enable_selinux = true\n")
    assert findings(root, "CTD117") == []
    for series in ("1.7", "2.1"):
        result = config_dump(releases[series], root)
        assert not result.refused, describe(releases[series], root, result)


def test_ctd118_runtime_without_type(tmp_path: Path, releases: dict[str, Binary]) -> None:
    dropin = f"version = 2\n[{CRI}.containerd.runtimes.nvidia.options]\n  SystemdCgroup = true\n"
    root = write(tmp_path, 2, NVIDIA_V2, dropin)
    found = findings(root, "CTD118")
    assert [(n, line) for n, line, _m in found] == [("99-nvidia.toml", 2)]
    assert "containerd 1.6 and 1.7 replace" in found[0][2] and "2.0" not in found[0][2]
    old = config_dump(releases["1.7"], root)
    assert not old.refused
    assert 'runtime_type = ""' in runtime_section(old.stdout, "nvidia").splitlines()
    new = config_dump(releases["2.1"], root)
    assert "runtime_type = 'io.containerd.runc.v2'" in runtime_section(new.stdout, "nvidia").splitlines()


def test_ctd118_runtime_only_the_dropin_names(tmp_path: Path, releases: dict[str, Binary]) -> None:
    root = write(
        tmp_path, 3, NVIDIA_V3, f'version = 3\n[{RUNTIME}.containerd.runtimes.gpu.options]\n  BinaryName = "x"\n'
    )
    found = findings(root, "CTD118")
    assert [(n, line) for n, line, _m in found] == [("99-nvidia.toml", 2)]
    new = config_dump(releases["2.1"], root)
    assert "runtime_type = ''" in runtime_section(new.stdout, "gpu").splitlines()


def test_ctd118_clean_twin(tmp_path: Path, releases: dict[str, Binary]) -> None:
    # containerd 2.x merges the options into the root's table, which keeps its type.
    root = write(
        tmp_path, 3, NVIDIA_V3, f"version = 3\n[{RUNTIME}.containerd.runtimes.nvidia.options]\n  SystemdCgroup = true\n"
    )
    assert findings(root, "CTD118") == []
    new = config_dump(releases["2.1"], root)
    section = runtime_section(new.stdout, "nvidia").splitlines()
    assert "runtime_type = 'io.containerd.runc.v2'" in section and "SystemdCgroup = true" in section


def test_ctd119_version_2_name_in_a_dropin_read_at_version_3(tmp_path: Path, releases: dict[str, Binary]) -> None:
    root = write(tmp_path, 3, NVIDIA_V3, f'[{CRI}]\n  cdi_spec_dirs = ["/marker"]\n')
    found = findings(root, "CTD119")
    assert [(n, line) for n, line, _m in found] == [("99-nvidia.toml", 2)]
    assert "the root file's: this file has no version line" in found[0][2]
    assert findings(root, "CTD101") == []
    new = config_dump(releases["2.1"], root)
    assert not new.refused and "/marker" not in new.stdout
    assert ("io.containerd.grpc.v1.cri", "cdi_spec_dirs") in new.unknown_keys()


def test_ctd119_version_3_name_in_a_dropin_read_at_version_2(tmp_path: Path, releases: dict[str, Binary]) -> None:
    root = write(tmp_path, 2, NVIDIA_V2, f'[{RUNTIME}]\n  cdi_spec_dirs = ["/marker"]\n')
    found = findings(root, "CTD119")
    assert [(n, line) for n, line, _m in found] == [("99-nvidia.toml", 2)]
    assert 'only 2.x reads it there, as cdi_spec_dirs = ["/marker"]' in found[0][2]
    old = config_dump(releases["1.7"], root)
    assert not old.refused and "/marker" not in old.stdout
    new = config_dump(releases["2.1"], root)
    assert "/marker" in new.stdout


def test_ctd119_clean_twin_a_dropin_without_version_is_read_at_the_root_s(
    tmp_path: Path, releases: dict[str, Binary]
) -> None:
    root = write(tmp_path, 2, NVIDIA_V2, f'[{CRI}]\n  cdi_spec_dirs = ["/marker"]\n')
    codes = {code for code in ("CTD119", "CTD101", "CTD104", "CTD117") if findings(root, code)}
    assert codes == set()
    for series in ("1.7", "2.1"):
        result = config_dump(releases[series], root)
        assert not result.refused and "/marker" in result.stdout, describe(releases[series], root, result)


def test_lint_of_the_root_reports_the_dropin_s_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write(tmp_path, 2, NVIDIA_V2, f"version = 3\n[{RUNTIME}]\n  enable_cdi = true\n")
    assert main(["lint", "--offline", str(root)]) == 1
    out = capsys.readouterr().out
    assert f"{tmp_path}/conf.d/99-nvidia.toml:1:1: error CTD117 dropin-version-mismatch" in out
    assert main(["lint", "--offline", "--kind", "containerd", str(tmp_path)]) == 1
    assert "CTD117" in capsys.readouterr().out
