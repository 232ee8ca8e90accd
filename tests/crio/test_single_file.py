"""A cri-o file linted on its own is read as cri-o reads it, even when Python's TOML parser refuses it."""

from __future__ import annotations

from pathlib import Path

from nvidia_oci_hook.findings import Severity
from nvidia_oci_hook.lint import LintOptions, lint_paths
from tests.helpers import codes


def test_byte_order_mark_in_crio_conf_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "crio.conf"
    path.write_bytes(b'\xef\xbb\xbf[crio.runtime]\ndefault_runtime = "crun"\n')
    run = lint_paths([str(path)], LintOptions(offline=True, schema_only=True))
    (result,) = run.files
    assert result.kind == "crio"
    assert codes(result.findings) == []


def test_a_misspelt_runtimes_table_is_named_as_cri_o_reads_it(tmp_path: Path) -> None:
    # On its own, with no runtime table cri-o reads: still refused, since the table meant is there, misspelt.
    path = tmp_path / "crio.conf"
    path.write_text(
        '[crio.runtime]\ndefault_runtime = "nvidia"\n\n'
        '[crio.runtime.runtime.nvidia]\nruntime_path = "/usr/bin/nvidia-oci-runtime"\n'
    )
    (result,) = lint_paths([str(path)], LintOptions(offline=True)).files
    by_code = {finding.code: finding for finding in result.findings}
    assert sorted(by_code) == ["CRO002", "CRO101"]
    refused = by_code["CRO002"]
    assert refused.severity is Severity.ERROR and refused.line == 2
    assert 'default_runtime set to "nvidia", but no runtime entry table [crio.runtime.runtimes.nvidia]' in (
        refused.message
    )
    assert refused.hint == "[crio.runtime.runtime.nvidia] is not read: write it as [crio.runtime.runtimes.nvidia]"
    ignored = by_code["CRO101"]
    assert ignored.line == 4 and "did you mean [crio.runtime.runtimes]?" in ignored.message
    assert ignored.hint == "write [crio.runtime.runtime.nvidia] as [crio.runtime.runtimes.nvidia]"
    # Without the misspelt table, a file on its own relies on another for its runtimes: nothing to say.
    path.write_text('[crio.runtime]\ndefault_runtime = "nvidia"\n')
    (result,) = lint_paths([str(path)], LintOptions(offline=True)).files
    assert codes(result.findings) == []


def test_cro102_names_the_hooks_file_the_packages_install(tmp_path: Path) -> None:
    from nvidia_oci_hook.rules.crio.hooks_and_cdi_dirs import PROJECT_HOOK_FILE

    assert (Path(__file__).resolve().parents[2] / "hooks" / PROJECT_HOOK_FILE).is_file()
    path = tmp_path / "crio.conf"
    path.write_text('[crio.runtime]\nhooks_dir = ["/etc/containers/oci/hooks.d"]\n')
    (result,) = lint_paths([str(path)], LintOptions(offline=True)).files
    (finding,) = [finding for finding in result.findings if finding.code == "CRO102"]
    assert "where nvidia-oci-hook-guard.json is installed" in finding.message
