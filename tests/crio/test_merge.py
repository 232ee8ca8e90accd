"""How a cri-o configuration is read and merged: the order of files, what wins, where each value came from."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from nvidia_oci_hook.formats.tomltext import parse_toml
from nvidia_oci_hook.kinds.collection import directory_kind_for
from nvidia_oci_hook.kinds.crio.merge import Origin, merge
from nvidia_oci_hook.kinds.crio.reading import (
    CRIO_CONFIG,
    CRIO_PART,
    CrioCollection,
    effective_config,
    origin_of,
    read_crio_config,
)
from nvidia_oci_hook.kinds.crio.toml_syntax import toml_1_1_as_1_0
from nvidia_oci_hook.kinds.document import Document
from nvidia_oci_hook.lint import LintOptions, load_file
from tests.crio.support import lint_dir, write_tree


def loader(path: str, kind: str) -> Document:
    return load_file(path, kind, LintOptions())


def read(root: Path) -> CrioCollection:
    return read_crio_config(str(root / "crio.conf"), str(root / "crio.conf.d"), loader)


def runtime(value: str) -> str:
    return f'[crio.runtime]\ndefault_runtime = "{value}"\n'


def relative(collection: CrioCollection, root: Path) -> list[str]:
    return [os.path.relpath(path, root) for path in collection.order]


def test_lexical_recursive_hidden_and_any_name(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            "crio.conf": runtime("main"),
            "crio.conf.d/2-b.conf": runtime("2-b"),
            "crio.conf.d/10-a.conf": runtime("10-a"),
            "crio.conf.d/.hidden": runtime("hidden"),
            "crio.conf.d/5-dir/z.conf": runtime("5-dir/z"),
            "crio.conf.d/5-dir/a.txt": runtime("5-dir/a"),
            "crio.conf.d/README": "# not a config, read anyway\n",
            "crio.conf.d/Z-upper.conf": runtime("Z-upper"),
            "crio.conf.d/zz.conf.bak": runtime("zz.conf.bak"),
        },
    )
    collection = read(root)
    # Byte order: '.' < digits < upper case < lower case; a directory's files come at the directory's place.
    assert relative(collection, root) == [
        "crio.conf",
        "crio.conf.d/.hidden",
        "crio.conf.d/10-a.conf",
        "crio.conf.d/2-b.conf",
        "crio.conf.d/5-dir/a.txt",
        "crio.conf.d/5-dir/z.conf",
        "crio.conf.d/README",
        "crio.conf.d/Z-upper.conf",
        "crio.conf.d/zz.conf.bak",
    ]
    assert all(document.kind == CRIO_PART for document in collection.documents)
    assert effective_config(collection)["crio"]["runtime"]["default_runtime"] == "zz.conf.bak"
    origin = origin_of(collection, "/crio/runtime/default_runtime")
    assert origin == Origin(str(root / "crio.conf.d/zz.conf.bak"), "/crio/runtime/default_runtime")


def test_later_file_wins_key_by_key_and_origins_follow(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            "crio.conf": '[crio.runtime]\ndefault_runtime = "crun"\nhooks_dir = ["/a", "/b"]\nselinux = true\n',
            "crio.conf.d/10.conf": '[crio.runtime]\nhooks_dir = ["/c"]\n',
        },
    )
    collection = read(root)
    runtime_table = effective_config(collection)["crio"]["runtime"]
    assert runtime_table == {"default_runtime": "crun", "hooks_dir": ["/c"], "selinux": True}
    dropin = str(root / "crio.conf.d/10.conf")
    assert origin_of(collection, "/crio/runtime/hooks_dir") == Origin(dropin, "/crio/runtime/hooks_dir")
    assert origin_of(collection, "/crio/runtime/hooks_dir/0") == Origin(dropin, "/crio/runtime/hooks_dir/0")
    # The earlier array is replaced, not merged: its second element has no origin any more.
    assert collection.config.origins.get("/crio/runtime/hooks_dir/1") is None
    assert origin_of(collection, "/crio/runtime/selinux") == Origin(str(root / "crio.conf"), "/crio/runtime/selinux")
    document = collection.document(dropin)
    assert document is not None and document.locate("/crio/runtime/hooks_dir").line == 2


def test_runtimes_merge_by_name_and_each_table_is_replaced_whole(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            "crio.conf": '[crio.runtime.runtimes.runc]\nruntime_path = "/usr/bin/runc"\n'
            '[crio.runtime.runtimes.nvidia]\nruntime_path = "/usr/bin/nvidia-container-runtime"\n'
            'runtime_root = "/run/nvidia"\n',
            "crio.conf.d/50.conf": "[crio.runtime.runtimes.nvidia]\nprivileged_without_host_devices = true\n",
        },
    )
    collection = read(root)
    runtimes = effective_config(collection)["crio"]["runtime"]["runtimes"]
    assert runtimes == {"runc": {"runtime_path": "/usr/bin/runc"}, "nvidia": {"privileged_without_host_devices": True}}
    (replaced,) = collection.config.replacements
    assert replaced.name == "nvidia" and replaced.lost == ("runtime_path", "runtime_root")
    assert origin_of(collection, "/crio/runtime/runtimes/nvidia/runtime_path") == Origin(
        str(root / "crio.conf.d/50.conf"), "/crio/runtime/runtimes/nvidia"
    )
    assert set(collection.config.runtimes()) == {"crun", "runc", "nvidia"}


def test_storage_options_accumulate_and_empty_storage_paths_keep_the_earlier(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            "crio.conf": '[crio]\nroot = "/var/lib/containers"\nstorage_option = ["a=1", "b=2"]\n',
            "crio.conf.d/10.conf": '[crio]\nroot = ""\nstorage_option = ["a=1", "c=3"]\n',
        },
    )
    crio = effective_config(read(root))["crio"]
    assert crio["root"] == "/var/lib/containers"
    assert crio["storage_option"] == ["b=2", "a=1", "c=3"]


def test_keys_match_case_insensitively_like_go(tmp_path: Path) -> None:
    root = write_tree(tmp_path, {"crio.conf.d/10.conf": '[CRIO.Runtime]\nDefault_Runtime = "crun"\n'})
    collection = read(root)
    assert effective_config(collection) == {"crio": {"runtime": {"default_runtime": "crun"}}}
    assert origin_of(collection, "/crio/runtime/default_runtime") == Origin(
        str(root / "crio.conf.d/10.conf"), "/CRIO/Runtime/Default_Runtime"
    )
    assert not collection.config.unknown


def test_missing_main_file_and_directory_are_skipped(tmp_path: Path) -> None:
    collection = read(tmp_path)
    assert collection.order == [] and collection.unreadable == []
    assert {os.path.basename(s.path) for s in collection.skipped} == {"crio.conf", "crio.conf.d"}
    assert effective_config(collection) == {}
    assert collection.config.get("/crio/runtime/hooks_dir") == ["/usr/share/containers/oci/hooks.d"]


def test_a_main_file_linked_to_nothing_is_skipped_like_a_missing_one(tmp_path: Path) -> None:
    os.symlink(tmp_path / "nowhere", tmp_path / "crio.conf")
    collection = read(tmp_path)
    assert collection.unreadable == [] and collection.order == []
    assert any(s.path == str(tmp_path / "crio.conf") for s in collection.skipped)


def test_entries_cri_o_cannot_read(tmp_path: Path) -> None:
    root = write_tree(tmp_path, {"crio.conf.d/10.conf": runtime("crun"), "target/x.conf": runtime("x")})
    dropins = root / "crio.conf.d"
    os.symlink(root / "target", dropins / "20-directory-link")
    os.symlink(root / "nowhere", dropins / "30-broken-link")
    os.mkfifo(dropins / "40-pipe")
    os.symlink("/dev/null", dropins / "50-masked")
    os.symlink(root / "target/x.conf", dropins / "60-file-link")
    collection = read(root)
    assert [os.path.basename(u.path) for u in collection.unreadable] == [
        "20-directory-link",
        "30-broken-link",
        "40-pipe",
    ]
    assert any(s.path.endswith("50-masked") for s in collection.skipped)
    # A link to a file is read like the file, under the link's name.
    assert relative(collection, root) == ["crio.conf.d/10.conf", "crio.conf.d/60-file-link"]
    codes = [(f.code, os.path.basename(f.path)) for f in lint_dir(root, schema_only=True)]
    assert codes == [("CRO005", "20-directory-link"), ("CRO005", "30-broken-link"), ("CRO005", "40-pipe")]


def test_a_linked_dropin_directory_is_read_as_one_file(tmp_path: Path) -> None:
    root = write_tree(tmp_path, {"real.d/10.conf": runtime("crun")})
    os.symlink(root / "real.d", root / "crio.conf.d")
    collection = read(root)
    assert collection.order == []
    (entry,) = collection.unreadable
    assert entry.path == str(root / "crio.conf.d") and entry.message.endswith("is a directory")


def test_one_bad_file_stops_the_merged_checks_but_not_the_per_file_ones(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            "crio.conf.d/10.conf": '[crio.runtime]\ndefault_runtime = "nvidia"\nhook_dir = []\n',
            "crio.conf.d/20.conf": "[crio.runtime.runtimes.nvidia\n",
        },
    )
    found = {(f.code, os.path.basename(f.path), f.line) for f in lint_dir(root)}
    # The runtime table may be in the file that does not parse: no CRO002 guess.
    assert found == {("CRO101", "10.conf", 3), ("DOC001", "20.conf", 1)}


def test_byte_order_mark_and_toml_1_1_are_read_as_cri_o_reads_them(tmp_path: Path) -> None:
    root = write_tree(
        tmp_path,
        {
            "crio.conf.d/10-bom.conf": "\ufeff" + runtime("crun"),
            "crio.conf.d/20-toml11.conf": "[crio.runtime.runtimes]\nnvidia = {\n"
            '  runtime_path = "/usr/bin/nvidia-container-runtime",  # the wrapper\n'
            '  runtime_type = "oci",\n}\n[crio.runtime]\ndefault_runtime = "nvidia"\n',
        },
    )
    collection = read(root)
    assert all(document.parsed for document in collection.documents)
    assert effective_config(collection)["crio"]["runtime"]["runtimes"]["nvidia"]["runtime_type"] == "oci"
    document = collection.document(str(root / "crio.conf.d/20-toml11.conf"))
    assert document is not None and document.locate("/crio/runtime/default_runtime").line == 7
    assert lint_dir(root) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a = { b = 1,\n  c = 2, }\nd = 3\n", "a = { b = 1,   c = 2 }\n\nd = 3\n"),
        ('a = "\\e[0m\\x41"\n', 'a = "\\u001B[0m\\u0041"\n'),
        ('a = "\\\\x41"\n', 'a = "\\\\x41"\n'),
        ("t = 07:32\n", "t = 07:32:00\n"),
        ("t = 07:32:10\n", "t = 07:32:10\n"),
        ("a = { b = '''x\ny''' }\n", "a = { b = '''x\ny''' }\n"),
    ],
)
def test_toml_1_1_rewrite_keeps_lines(text: str, expected: str) -> None:
    rewritten = toml_1_1_as_1_0(text)
    assert rewritten == expected
    assert rewritten.count("\n") == text.count("\n")
    assert parse_toml(rewritten.encode()).ok


def test_directory_kind_claims_and_reads_etc_crio_and_its_dropin_directory(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "etc/crio", {"crio.conf": runtime("crun"), "crio.conf.d/10.conf": runtime("x")})
    for path in (root, root / "crio.conf.d"):
        kind = directory_kind_for(str(path), None)
        assert kind is not None and kind.name == CRIO_CONFIG
    forced = directory_kind_for(str(tmp_path), "crio")
    assert forced is not None and forced.name == CRIO_CONFIG
    whole: Any = forced.read([str(root)], loader)
    assert [os.path.basename(p) for p in whole.order] == ["crio.conf", "10.conf"]
    only_dropins: Any = forced.read([str(root / "crio.conf.d")], loader)
    assert [os.path.basename(p) for p in only_dropins.order] == ["10.conf"]


def test_merge_of_values_without_files() -> None:
    config = merge([(None, {"crio": {"runtime": {"hooks_dir": ["/x"], "hook_dir": []}}}, True)])
    assert config.get("/crio/runtime/hooks_dir") == ["/x"]
    assert [u.key for u in config.unknown] == ["hook_dir"]
    assert config.origin("/crio/runtime/hooks_dir/0") == Origin(None, "/crio/runtime/hooks_dir/0")
