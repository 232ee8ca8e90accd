"""Command line: parse arguments into options, call the library, print, exit 0 / 1 / 2."""

from __future__ import annotations

import json
import os
import re
import sys
import traceback
from typing import Any, Optional

import click

from nvidia_oci_hook import __version__, io
from nvidia_oci_hook.config import ConfigError, Settings, load_settings
from nvidia_oci_hook.findings import Severity
from nvidia_oci_hook.kinds.document import AUTO, kind_names
from nvidia_oci_hook.rules.base import all_rules, get_rule, matches_any

EXIT_CLEAN = 0
EXIT_FINDINGS = 1
EXIT_ERROR = 2
EXIT_UNRECOGNISED = 3  # why: nothing in the text is an error this tool knows


class Fatal(Exception):
    """A problem with the invocation or the environment: one line, exit status 2."""


def _split_codes(values: tuple[str, ...]) -> tuple[str, ...]:
    codes = tuple(part.strip().upper() for value in values for part in value.split(",") if part.strip())
    known = [rule.code for rule in all_rules()]
    for code in codes:
        if not any(matches_any(rule_code, [code]) for rule_code in known):
            raise click.BadParameter(f"{code!r} is no rule code or prefix (see 'nvidia-oci-hook rules')")
    return codes


def _settings(ctx: click.Context) -> Settings:
    settings: Settings = ctx.obj["settings"]
    return settings


def _node_settings(ctx: click.Context, host_root: str, driver_roots: tuple[str, ...]) -> Settings:
    """The settings for a command that looks at the node under --host-root, with --driver-root applied."""
    if not _is_directory(host_root):
        raise Fatal(f"--host-root {host_root}: not a directory")
    settings = _settings(ctx)
    return settings.replace(driver_roots=driver_roots) if driver_roots else settings


def _absolute_paths(_ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    for value in values:
        if not value.startswith("/"):
            raise click.BadParameter(f"{value!r} is not an absolute path", param=param)
    return values


_host_root_option = click.option(
    "--host-root", default="/", show_default=True, metavar="DIR", help="Where the node's / is."
)
_driver_roots_option = click.option(
    "--driver-root",
    "driver_roots",
    multiple=True,
    metavar="DIR",
    callback=_absolute_paths,
    help="A driver-root candidate (repeatable) [default: driver_roots in the configuration, / and /run/nvidia/driver].",
)


def _engine_config_options(command: Any) -> Any:
    """The engine configuration named by hand: read where it is, while every host check stays on --host-root."""
    for option in reversed(
        (
            click.option(
                "--containerd-config",
                metavar="FILE",
                type=click.Path(exists=True, dir_okay=False),
                help="containerd's configuration file (default: the running daemon's --config, the distribution's, "
                "/etc/containerd/config.toml).",
            ),
            click.option(
                "--crio-config",
                metavar="FILE",
                type=click.Path(exists=True, dir_okay=False),
                help="cri-o's main configuration file (default: the running daemon's --config, /etc/crio/crio.conf).",
            ),
            click.option(
                "--crio-config-dir",
                metavar="DIR",
                type=click.Path(exists=True, file_okay=False),
                help="cri-o's drop-in directory (default: the running daemon's --config-dir, /etc/crio/crio.conf.d).",
            ),
        )
    ):
        command = option(command)
    return command


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="nvidia-oci-hook")
@click.option(
    "--config",
    "config_path",
    metavar="FILE",
    help="Configuration file [default: /etc/nvidia-oci-hook/config.yaml; env NVIDIA_OCI_HOOK_CONFIG].",
)
@click.option("--debug", is_flag=True, help="Show the traceback of an internal error.")
@click.pass_context
def cli(ctx: click.Context, config_path: Optional[str], debug: bool) -> None:
    """Check GPU containers' OCI specs against the node, and explain what is wrong."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug
    try:
        ctx.obj["settings"] = load_settings(config_path)
    except ConfigError as exc:
        raise Fatal(str(exc)) from None


@cli.command()
@click.argument("paths", nargs=-1, metavar="[PATH|-]...")
@click.option(
    "--kind",
    type=click.Choice((AUTO, *kind_names())),
    default=AUTO,
    show_default=True,
    help="Document kind; auto detects it from the content.",
)
@_host_root_option
@_driver_roots_option
@click.option(
    "--node",
    is_flag=True,
    help="Find and lint the node's engine configs, hooks directories and CDI spec directories under --host-root.",
)
@click.option("--offline", is_flag=True, help="Skip every check that looks at the host.")
@click.option("--schema-only", is_flag=True, help="Only what the format's own reference checks.")
@click.option("--select", multiple=True, metavar="CODE", help="Only these codes or prefixes (repeatable).")
@click.option("--ignore", multiple=True, metavar="CODE", help="Not these codes or prefixes (repeatable).")
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json", "sarif"]),
    default="text",
    show_default=True,
)
@click.option(
    "--fail-on",
    type=click.Choice(["error", "warning"]),
    default=None,
    help="Lowest severity that makes the exit status 1 [default: error].",
)
@click.option(
    "--cdi-library",
    metavar="VERSION",
    help="Judge CDI specs as this release of the CDI library reads them (0.5.2 to 1.1.0; 1.0 is 1.0.1).",
)
@click.option(
    "--engine",
    "engines",
    multiple=True,
    metavar="NAME=VERSION",
    help="Judge CDI specs with the CDI library this engine release vendors: crio, containerd or podman (repeatable); "
    "containerd=VERSION also judges containerd configurations as that release reads them; crio or containerd "
    "(VERSION optional) judges CRI container configs for that engine; nvidia-container-toolkit=VERSION (1.14 to 1.20) "
    "judges the toolkit's config.toml as that release reads it.",
)
@click.option(
    "--kubernetes-version",
    metavar="VERSION",
    help="The cluster's Kubernetes release (1.32): Kubernetes manifests are judged by the APIs it serves.",
)
@click.option(
    "--runtime-handler",
    metavar="NAME",
    help="With --node: the runtime handler the pods' sandboxes are asked of [default: their RuntimeClass's].",
)
@click.option(
    "--gpu-operator-version",
    metavar="VERSION",
    help="The GPU Operator release (24.3 to 26.7) a ClusterPolicy is rendered as [default: the one the input's "
    "operator image or chart labels name, else the newest].",
)
@_engine_config_options
@click.pass_context
def lint(
    ctx: click.Context,
    paths: tuple[str, ...],
    kind: str,
    host_root: str,
    driver_roots: tuple[str, ...],
    node: bool,
    offline: bool,
    schema_only: bool,
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    output_format: str,
    fail_on: Optional[str],
    cdi_library: Optional[str],
    engines: tuple[str, ...],
    containerd_config: Optional[str],
    crio_config: Optional[str],
    crio_config_dir: Optional[str],
    kubernetes_version: Optional[str],
    runtime_handler: Optional[str],
    gpu_operator_version: Optional[str],
) -> None:
    """Lint container specs and the documents that shape them; '-' reads standard input.

    Kinds: OCI runtime configs (config.json) and states, CDI specs, hooks.d files, cri-o and containerd
    configurations, CRI container configs, Kubernetes manifests (a file, a stream such as `helm template`
    output, `kubectl get -o yaml`, a directory of them); a directory is read as the engine reads it (CDI spec directory,
    hooks directory, crio.conf.d). Exit status: 0 nothing at or above --fail-on, 1 findings, 2 usage or read
    error.
    """
    from nvidia_oci_hook.kinds.cdi.codes import CDI, CDI_DIRS
    from nvidia_oci_hook.lint import LintOptions, lint_paths
    from nvidia_oci_hook.report import REPORTERS

    settings = _settings(ctx)
    if not paths and not node:
        raise click.UsageError("give at least one PATH, '-', or --node")
    if node and offline:
        raise click.UsageError("--node reads the node: it cannot be --offline")
    judges, reads_no_cdi = _cdi_judges(cdi_library, engines)
    if not node and (containerd_config or crio_config or crio_config_dir):
        raise click.UsageError("--containerd-config, --crio-config and --crio-config-dir go with --node")
    options = LintOptions(
        kind=kind,
        host_root=host_root,
        driver_roots=driver_roots or settings.driver_roots,
        offline=offline,
        schema_only=schema_only,
        select=_split_codes(select) if select else settings.select,
        ignore=_split_codes(ignore) if ignore else settings.ignore,
        node=node,
        settings=settings,
        cdi_judges=judges,
        containerd_release=_containerd_release(engines),
        cri_engine=_cri_engine(engines),
        containerd_config=containerd_config,
        crio_config=crio_config,
        crio_config_dir=crio_config_dir,
        kubernetes_version=_kubernetes_version(kubernetes_version),
        runtime_handler=runtime_handler,
        toolkit_release=_toolkit_release(engines),
        gpu_operator_version=_gpu_operator_version(gpu_operator_version),
    )
    if runtime_handler and not node:
        raise click.UsageError("--runtime-handler goes with --node")
    if not offline and not _is_directory(host_root):
        raise Fatal(f"--host-root {host_root}: not a directory")
    try:
        run = lint_paths(paths, options)
    except io.ReadError as exc:
        raise Fatal(str(exc)) from None
    if reads_no_cdi and not judges and any(result.kind in (CDI, CDI_DIRS) for result in run.files):
        raise click.UsageError(reads_no_cdi)
    color = output_format == "text" and sys.stdout.isatty()
    click.echo(
        REPORTERS[output_format](run.files, color=color, looked_at=run.looked_at, node_root=run.node_root), nl=False
    )
    threshold = Severity.parse(fail_on or settings.fail_on)
    failed = any(f.severity >= threshold for result in run.files for f in result.findings)
    ctx.exit(EXIT_FINDINGS if failed else EXIT_CLEAN)


def _engine_pairs(engines: tuple[str, ...]) -> list[tuple[str, str]]:
    """(engine key, version) of each --engine NAME=VERSION, or of a bare crio or containerd (version ""), which
    names the engine a CRI container config is judged for; a usage error for any other form."""
    from nvidia_oci_hook.kinds.cdi.releases import engine_key

    pairs = []
    for text in engines:
        name, equals, version = text.partition("=")
        key = TOOLKIT if name.lower() in TOOLKIT_NAMES else engine_key(name)
        bare = not equals and key in ("crio", "containerd")
        if key is None or not (bare or version):
            raise click.UsageError(
                f"--engine {text}: expected NAME=VERSION, NAME one of crio, containerd, podman, {TOOLKIT}"
            )
        pairs.append((key, version))
    return pairs


# --engine's names for NVIDIA Container Toolkit: its package, and the names users call it by.
TOOLKIT = "nvidia-container-toolkit"
TOOLKIT_NAMES = (TOOLKIT, "toolkit", "nvidia-ctk")


def _toolkit_release(engines: tuple[str, ...]) -> Optional[str]:
    """The toolkit release named by --engine (the last one), which judges the toolkit's config.toml; a usage
    error for one no model has."""
    from nvidia_oci_hook.kinds.toolkit.releases import UnknownToolkitRelease, release_for

    named = [version for key, version in _engine_pairs(engines) if key == TOOLKIT]
    if not named:
        return None
    try:
        return release_for(named[-1]).version
    except UnknownToolkitRelease as exc:
        raise click.UsageError(str(exc)) from None


def _kubernetes_version(text: Optional[str]) -> Optional[str]:
    """MAJOR.MINOR of --kubernetes-version (`v1.32.4` and `1.32` alike)."""
    if text is None:
        return None
    match = re.fullmatch(r"v?(1)\.(\d+)(?:\.\d+)?(?:[-+].*)?", text.strip())
    if match is None:
        raise click.BadParameter(
            f"{text!r} is not a Kubernetes release such as 1.32", param_hint="--kubernetes-version"
        )
    return f"{match.group(1)}.{int(match.group(2))}"


def _gpu_operator_version(text: Optional[str]) -> Optional[str]:
    """The modelled GPU Operator release --gpu-operator-version names (`v24.9.2` and `24.9` alike)."""
    if text is None:
        return None
    from nvidia_oci_hook.kinds.kubernetes.gpu_operator import RELEASES, release_named

    release = release_named(text)
    if release is None:
        raise click.BadParameter(
            f"{text!r} is not a GPU Operator release this tool models ({', '.join(RELEASES)})",
            param_hint="--gpu-operator-version",
        )
    return release


def _cri_engine(engines: tuple[str, ...]) -> Optional[str]:
    """The engine CRI container configs are judged for: the last crio or containerd named by --engine."""
    named = [key for key, _ in _engine_pairs(engines) if key in ("crio", "containerd")]
    return named[-1] if named else None


def _containerd_release(engines: tuple[str, ...]) -> Optional[str]:
    """The containerd release named by --engine (the last one), which judges containerd configurations."""
    releases = [version for key, version in _engine_pairs(engines) if key == "containerd" and version]
    return releases[-1] if releases else None


def _cdi_judges(cdi_library: Optional[str], engines: tuple[str, ...]) -> tuple[tuple[Any, ...], Optional[str]]:
    """The judges of CDI specs the options name, and what is said of a named release that reads no CDI specs
    (containerd 1.6: it judges containerd configurations only); a usage error for a release no model has."""
    from nvidia_oci_hook.kinds.cdi.releases import Judge, ReadsNoCdi, UnknownRelease, engine_judges, library

    if cdi_library and engines:
        raise click.UsageError("give --cdi-library or --engine, not both: an engine release names its library")
    try:
        if cdi_library:
            return (Judge(library(cdi_library)),), None
        pairs, reads_no_cdi = [], None
        for key, version in _engine_pairs(engines):
            if not version or key == TOOLKIT:
                continue  # an engine named for CRI container configs only, or the toolkit
            try:
                engine_judges([(key, version)])
            except ReadsNoCdi as exc:
                if key != "containerd":
                    raise
                reads_no_cdi = reads_no_cdi or str(exc)
                continue
            pairs.append((key, version))
        return engine_judges(pairs), reads_no_cdi
    except UnknownRelease as exc:
        raise click.UsageError(str(exc)) from None


def _is_directory(path: str) -> bool:
    return os.path.isdir(path)


def _writable(host_root: str) -> None:
    """A command about to change the node stops before it changes anything where the node is mounted read-only
    (the DaemonSet mounts it so)."""
    from nvidia_oci_hook.host import HostView

    if HostView(host_root).read_only():
        raise Fatal(f"--host-root {host_root}: read-only file system: nothing was changed")


@cli.command("rules")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True)
def list_rules(output_format: str) -> None:
    """List every rule: code, severity, name and summary."""
    rules = all_rules()
    if output_format == "json":
        payload: list[dict[str, Any]] = [
            {
                "code": r.code,
                "name": r.name,
                "severity": r.severity.label,
                "kinds": sorted(r.kinds),
                "needs_host": r.needs_host,
                "schema_only": r.schema_level,
                "summary": r.summary,
            }
            for r in rules
        ]
        click.echo(json.dumps(payload, indent=2))
        return
    width = max(len(r.name) for r in rules)
    for r in rules:
        click.echo(f"{r.code:<8} {r.severity.label:<8} {r.name:<{width}}  {r.summary}")


@cli.command()
@click.argument("code")
def explain(code: str) -> None:
    """Explain a rule: what it checks, why it matters, an example and the fix."""
    try:
        rule = get_rule(code)
    except KeyError:
        raise Fatal(f"unknown rule code {code!r} (see 'nvidia-oci-hook rules')") from None
    host = ", needs the host" if rule.needs_host else ""
    click.echo(f"{rule.code} {rule.name} ({rule.severity.label}{host})\n\n{rule.summary}\n\n{rule.explanation}")


@cli.command()
@click.argument("config_file", metavar="CONFIG")
@click.option("--in-place", is_flag=True, help="Rewrite CONFIG (atomically; untouched when nothing changes).")
@click.option("-o", "--output", metavar="OUT", help="Write the reconciled config to OUT instead of stdout.")
@click.option("--diff", is_flag=True, help="Print a unified diff of the changes; write nothing.")
@_host_root_option
@_driver_roots_option
@click.pass_context
def reconcile(
    ctx: click.Context,
    config_file: str,
    in_place: bool,
    output: Optional[str],
    diff: bool,
    host_root: str,
    driver_roots: tuple[str, ...],
) -> None:
    """Reconcile a config.json as the runtime wrapper would, without running anything.

    Prints the reconciled config (or writes it with --in-place / -o, or shows --diff); each edit and each
    problem left goes to stderr. Exit status: 0 nothing left at error level, 1 errors left, 2 usage or read
    error.
    """
    from nvidia_oci_hook.reconcile import reconcile_file

    if sum((in_place, output is not None, diff)) > 1:
        raise click.UsageError("--in-place, -o and --diff exclude each other")
    if in_place and config_file == "-":
        raise click.UsageError("--in-place needs a file, not standard input")
    settings = _node_settings(ctx, host_root, driver_roots)
    try:
        status = reconcile_file(config_file, settings, host_root, in_place=in_place, output=output, diff=diff)
    except (io.ReadError, ValueError, OSError) as exc:
        raise Fatal(str(exc)) from None
    ctx.exit(status)


@cli.command("log")
@click.argument("log_file", metavar="[FILE]", required=False)
@click.option("--container", metavar="ID", help="Only entries about this container.")
@click.option("--last", type=click.IntRange(min=1), metavar="N", help="Only the last N entries.")
@click.pass_context
def show_log(ctx: click.Context, log_file: Optional[str], container: Optional[str], last: Optional[int]) -> None:
    """Show what the runtime wrapper and the hooks did: each container's edits and findings, readably.

    FILE defaults to log.file in the configuration (/var/log/nvidia-oci-hook.log). Its rotated files are read
    too, oldest first: FILE.1, FILE.2.gz, ... and FILE-DATE[.gz] (logrotate's dateext); --last and --container
    apply to all of them together.
    """
    from nvidia_oci_hook.runtime.logbook import format_entries, read_all_entries

    path = log_file or _settings(ctx).log_file
    if not path:
        raise Fatal("no log file: log.file is empty in the configuration; give FILE")
    try:
        entries = read_all_entries(path)
    except OSError as exc:  # gzip's BadGzipFile among them: a rotated file that is not gzip at all
        raise Fatal(f"{exc.filename or path}: cannot read: {exc.strerror or exc}") from None
    if container:
        entries = [entry for entry in entries if entry.get("container") == container]
    if last:
        entries = entries[-last:]
    click.echo(format_entries(entries), nl=False)


@cli.command()
@_host_root_option
@_driver_roots_option
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json", "npd", "prometheus"]),
    default="text",
    show_default=True,
    help="prometheus: the text exposition format, for node_exporter's textfile collector.",
)
@click.option(
    "-o",
    "--output",
    metavar="FILE",
    help="Write the report to FILE (atomically: a reader sees the old file or the new one) instead of stdout.",
)
@click.option("--fix", is_flag=True, help="Perform the safe repairs, then check again.")
@click.option("--dry-run", is_flag=True, help="With --fix: print the repairs, perform none.")
@click.option(
    "--restore-device-access",
    is_flag=True,
    help="With --fix: re-add the spec's own device rules of running containers that lost their GPUs (cgroup v1).",
)
@click.option(
    "--check",
    "only",
    multiple=True,
    metavar="NAME",
    help="Report only these checks, e.g. gpu-access (repeatable; the exit status follows them).",
)
@click.option(
    "--runtime-root",
    "runtime_roots",
    multiple=True,
    metavar="DIR",
    help="A runc or crun state root to find running containers in, besides the engines' standard ones (repeatable).",
)
@click.option(
    "--nvml-library",
    metavar="FILE",
    help="The libnvidia-ml.so.1 to read NVML through [default: the system's; NVML is read only when --host-root is /].",
)
@click.pass_context
def doctor(
    ctx: click.Context,
    host_root: str,
    driver_roots: tuple[str, ...],
    output_format: str,
    output: Optional[str],
    fix: bool,
    dry_run: bool,
    restore_device_access: bool,
    only: tuple[str, ...],
    runtime_roots: tuple[str, ...],
    nvml_library: Optional[str],
) -> None:
    """Check the node: driver and dev roots, validation markers, stray device nodes, NVML, CDI specs, running
    GPU containers' device access, engines.

    Problems come first, each with its evidence and fix. Exit status: 0 no error, 1 errors (npd format: 0 OK,
    1 problem, 2 unknown), 2 usage error or a report that cannot be written; --output changes none of these.
    """
    import time

    from nvidia_oci_hook.node import doctor as mode
    from nvidia_oci_hook.node.checks.base import ERROR

    started = time.monotonic()

    if dry_run and not fix:
        raise click.UsageError("--dry-run previews --fix: give both")
    if restore_device_access and not fix:
        raise click.UsageError("--restore-device-access is a repair: give --fix too")
    settings = _node_settings(ctx, host_root, driver_roots)
    use_nvml = host_root == "/" or nvml_library is not None
    unknown = sorted(set(only) - set(mode.CHECK_NAMES))
    if unknown:
        raise click.UsageError(f"no check {', '.join(unknown)} (checks: {', '.join(mode.CHECK_NAMES)})")

    def selected(found: list[Any]) -> list[Any]:
        return [check for check in found if not only or check.name in only]

    if fix and not dry_run:
        _writable(host_root)
    checks = selected(
        mode.run_checks(host_root, settings, use_nvml, nvml_library, restore_device_access, runtime_roots)
    )
    performed: list[str] = []
    if fix:
        for check in checks:
            for repair in check.repairs:
                if dry_run:
                    performed.append(f"would {repair.description}")
                    continue
                try:
                    repair.perform()
                    performed.append(f"fixed: {repair.description}")
                except OSError as exc:
                    performed.append(f"failed: {repair.description}: {exc.strerror}")
        if performed and not dry_run:
            checks = selected(mode.run_checks(host_root, settings, use_nvml, nvml_library, runtime_roots=runtime_roots))
        if not performed:
            performed.append("nothing to repair")
    status = EXIT_FINDINGS if mode.overall(checks) == ERROR else EXIT_CLEAN
    node_root = host_root if os.path.abspath(host_root) != "/" else ""
    if output_format == "npd":
        text, status = mode.render_npd(checks)
        text += "\n"
    elif output_format == "prometheus":
        from nvidia_oci_hook.host import HostView
        from nvidia_oci_hook.node import metrics

        # The log is the node's, like everything doctor reads: under --host-root.
        log = metrics.read_log(settings.log_file, HostView(host_root))
        text = metrics.render_prometheus(checks, __version__, time.time(), time.monotonic() - started, log)
    elif output_format == "json":
        payload = {
            "version": 1,
            "status": mode.overall(checks),
            "repairs": performed,
            "checks": [check.as_dict() for check in mode.ordered(checks)],
        }
        if node_root:
            payload["host_root"] = node_root
        text = json.dumps(payload, indent=2) + "\n"
    else:
        text = ("\n".join(performed) + "\n\n" if performed else "") + mode.render_text(checks, node_root)
    if output is None:
        click.echo(text, nl=False)
    else:
        try:
            io.write_atomic(output, text.encode("utf-8"))
        except OSError as exc:
            raise Fatal(f"{output}: cannot write: {exc.strerror or exc}") from None
    ctx.exit(status)


@cli.command()
@click.argument("text", metavar="[TEXT|-]", required=False)
@click.option("--file", "text_file", metavar="FILE", help="Read the error text from FILE.")
@_host_root_option
@_driver_roots_option
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@_engine_config_options
@click.pass_context
def why(
    ctx: click.Context,
    text: Optional[str],
    text_file: Optional[str],
    host_root: str,
    driver_roots: tuple[str, ...],
    output_format: str,
    containerd_config: Optional[str],
    crio_config: Optional[str],
    crio_config_dir: Optional[str],
) -> None:
    """From an error text (a pod event, kubectl describe, a crictl or podman error, a journal excerpt, a hook's
    stderr) to its cause on this node: each error recognised, the causes that can produce it, each decided on the
    node (holds, ruled out, not decidable here) with its evidence and fix.

    Exit status: 0 a cause holds, 1 recognised but no cause shown to hold, 2 usage error, 3 nothing recognised.
    """
    from nvidia_oci_hook.node import why as mode
    from nvidia_oci_hook.node.locations import ByHand

    if (text is None) == (text_file is None):
        raise click.UsageError("give the error text: TEXT, - for stdin, or --file FILE (one of them)")
    if not _is_directory(host_root):
        raise Fatal(f"--host-root {host_root}: not a directory")
    source = "-" if text == "-" else text_file
    if source is not None:
        try:
            data = io.read_bounded(source, mode.TEXT_LIMIT)
        except io.TooLarge as exc:
            raise Fatal(f"{source}: {exc}") from None
        except (io.ReadError, OSError) as exc:
            raise Fatal(str(exc)) from None
        text = data.decode("utf-8", "replace")
    assert text is not None
    by_hand = ByHand(containerd_config, crio_config, crio_config_dir)
    report = mode.explain_text(text, host_root, _node_settings(ctx, host_root, driver_roots), by_hand)
    if output_format == "json":
        click.echo(json.dumps(report.as_dict(), indent=2))
    else:
        node_root = host_root if os.path.abspath(host_root) != "/" else ""
        click.echo(mode.render_text(report, node_root), nl=False)
    ctx.exit(EXIT_CLEAN if report.holds else EXIT_FINDINGS if report.recognized else EXIT_UNRECOGNISED)


@cli.command()
@click.option("--runtime", "engine", type=click.Choice(["crio", "containerd", "podman"]), required=True)
@click.option("--dry-run", is_flag=True, help="Print the changes as a diff; write nothing.")
@click.option("--undo", is_flag=True, help="Remove exactly what configure added.")
@click.option("--host-root", default="/", show_default=True, metavar="DIR", help="Where the node's / is.")
def configure(engine: str, dry_run: bool, undo: bool, host_root: str) -> None:
    """Register nvidia-oci-runtime as the engine's runtime handler 'nvidia', and the hooks directories.

    cri-o: a crio.conf.d drop-in (with /etc/containers/oci/hooks.d added to hooks_dir); containerd: a conf.d
    drop-in and, if missing, the imports line in config.toml; podman: a containers.conf.d drop-in. Existing
    files keep their comments and formatting; running it again changes nothing.
    """
    from nvidia_oci_hook.node.configure import ConfigureError
    from nvidia_oci_hook.node.configure import run as configure_run

    if not _is_directory(host_root):
        raise Fatal(f"--host-root {host_root}: not a directory")
    if not dry_run:
        _writable(host_root)
    try:
        configure_run(engine, host_root, dry_run, undo)
    except ConfigureError as exc:
        raise Fatal(str(exc)) from None
    except OSError as exc:
        raise Fatal(f"{exc.filename}: {exc.strerror}") from None


@cli.group()
def cdi() -> None:
    """CDI spec files on this node."""


@cdi.command("reconcile")
@click.option(
    "--spec-dir",
    "spec_dirs",
    multiple=True,
    metavar="DIR",
    callback=_absolute_paths,
    help="A spec directory (repeatable) [default: cdi.spec_dirs in the configuration].",
)
@_host_root_option
@_driver_roots_option
@click.option("--dry-run", is_flag=True, help="Print the changes; write nothing.")
@click.option("--diff", is_flag=True, help="Print a unified diff of the changes; write nothing.")
@click.pass_context
def cdi_reconcile(
    ctx: click.Context,
    spec_dirs: tuple[str, ...],
    host_root: str,
    driver_roots: tuple[str, ...],
    dry_run: bool,
    diff: bool,
) -> None:
    """Rewrite CDI specs so that injection succeeds on this node: host paths moved to the driver root that holds
    them, device nodes given the host path that is the same device. Exit status: 0 nothing left to reconcile,
    1 a spec could not be reconciled, 2 usage error."""
    from nvidia_oci_hook.node.cdi_reconcile import command as mode

    if not _is_directory(host_root):
        raise Fatal(f"--host-root {host_root}: not a directory")
    settings = _settings(ctx)
    status = mode.run(
        spec_dirs or settings.cdi_spec_dirs,
        host_root,
        driver_roots or settings.driver_roots,
        dry_run,
        diff,
        sys.stdout,
        sys.stderr,
    )
    ctx.exit(status)


@cdi.command("resolve")
@click.argument("names", nargs=-1, required=True, metavar="NAME...")
@click.option(
    "--engine",
    metavar="NAME[=VERSION]",
    help="Only this engine: crio, containerd or podman; =VERSION judges as that release [default: every engine "
    "found, at its release].",
)
@_host_root_option
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@_engine_config_options
@click.pass_context
def cdi_resolve(
    ctx: click.Context,
    names: tuple[str, ...],
    engine: Optional[str],
    host_root: str,
    output_format: str,
    containerd_config: Optional[str],
    crio_config: Optional[str],
    crio_config_dir: Optional[str],
) -> None:
    """Whether each CDI device NAME (vendor/class=name, or vendor/class=* for all of a kind) resolves for each
    engine on the node: from which spec and with which edits, or the one reason it does not, the file, the
    engine's error and the fix. Exit status: 0 every name resolves for every engine, 1 one does not, 2 usage
    error."""
    from nvidia_oci_hook.host import HostView
    from nvidia_oci_hook.kinds.cdi.releases import engine_key
    from nvidia_oci_hook.lint import LintOptions, load_file
    from nvidia_oci_hook.node import cdi_resolve as mode
    from nvidia_oci_hook.node.locations import ByHand

    for name in names:
        try:
            mode.check_name(name)
        except mode.BadName as exc:
            raise click.UsageError(f"{exc}: expected vendor/class=name or vendor/class=*") from None
    key, release = None, None
    if engine:
        text, _, release_text = engine.partition("=")
        key = engine_key(text)
        if key is None:
            raise click.UsageError(f"--engine {engine}: expected crio, containerd or podman, with =VERSION or not")
        try:
            release = mode.known_release(key, release_text) if release_text else None
        except mode.UnknownRelease as exc:
            raise click.UsageError(str(exc)) from None
    if not _is_directory(host_root):
        raise Fatal(f"--host-root {host_root}: not a directory")
    options = LintOptions(host_root=host_root)
    by_hand = ByHand(containerd_config, crio_config, crio_config_dir)
    try:
        results = mode.resolve(
            HostView(host_root),
            lambda path, kind, files: load_file(path, kind, options, files),
            list(names),
            key,
            release,
            by_hand,
        )
    except mode.NoEngine as exc:
        raise Fatal(str(exc)) from None
    except mode.UnknownRelease as exc:
        raise Fatal(f"{exc}; name a release with --engine NAME=VERSION") from None
    if output_format == "json":
        click.echo(json.dumps({"version": 1, "engines": [result.as_json() for result in results]}, indent=2))
    else:
        click.echo(mode.render_text(results), nl=False)
    ctx.exit(EXIT_CLEAN if all(result.resolved for result in results) else EXIT_FINDINGS)


@cli.command()
@click.argument("paths", nargs=-1, required=True, metavar="PATH|-...")
@_host_root_option
@_driver_roots_option
@click.option("--runtime-handler", metavar="NAME", help="The runtime handler the pods' sandboxes are asked of.")
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json", "cri"]),
    default="text",
    show_default=True,
    help="cri: the CRI container configs the kubelet would hand the engine, as crictl takes them.",
)
@click.pass_context
def pod(
    ctx: click.Context,
    paths: tuple[str, ...],
    host_root: str,
    driver_roots: tuple[str, ...],
    runtime_handler: Optional[str],
    output_format: str,
) -> None:
    """What each container of the pods in PATH (manifests: a Pod, a workload, a stream) gets on this node: the
    CRI config the kubelet hands the engine (with the device plugins' answers the node's kubelet checkpoint
    holds), and what the engine does with it: refuses it, runs it without its GPU, with every GPU, or with what
    it asked. Exit status: 0 none refused or left without its GPU, 1 one is, 2 usage or read error."""
    from nvidia_oci_hook.lint import LintOptions
    from nvidia_oci_hook.node import pods

    settings = _node_settings(ctx, host_root, driver_roots)
    options = LintOptions(
        host_root=host_root, driver_roots=settings.driver_roots, settings=settings, runtime_handler=runtime_handler
    )
    try:
        report = pods.judge_paths(paths, options)
    except (io.ReadError, ValueError) as exc:
        raise Fatal(str(exc)) from None
    if output_format == "json":
        click.echo(json.dumps(pods.report_json(report), indent=2))
    elif output_format == "cri":
        configs = [
            {"object": obj.label, "container": judgement.container.name, "config": judgement.derived.config}
            for _, obj, judgements, _ in report.judged
            for judgement in judgements
        ]
        click.echo(json.dumps(configs, indent=2))
    else:
        click.echo(pods.render_text(report), nl=False)
    ctx.exit(EXIT_FINDINGS if pods.failed(report) else EXIT_CLEAN)


_PASS_THROUGH = {"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []}


@cli.command(context_settings=_PASS_THROUGH, add_help_option=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def runtime(ctx: click.Context, args: tuple[str, ...]) -> None:
    """Run as runc: reconcile config.json on create, then exec runc or crun (also `nvidia-oci-runtime`)."""
    from nvidia_oci_hook.runtime import wrapper as mode

    ctx.exit(mode.main(list(args), ctx.parent.params.get("config_path") if ctx.parent else None))


@cli.command(context_settings=_PASS_THROUGH, add_help_option=False)
@click.argument("stage", metavar="precreate|prestart|createRuntime", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def hook(ctx: click.Context, stage: tuple[str, ...]) -> None:
    """OCI hook: podman's precreate filter, or the prestart/createRuntime guard (input on stdin)."""
    from nvidia_oci_hook.runtime import hooks as mode

    ctx.exit(mode.main(list(stage), ctx.parent.params.get("config_path") if ctx.parent else None))


def main(argv: Optional[list[str]] = None) -> int:
    """Entry point: every failure ends as one line on stderr and exit status 2, never a traceback."""
    debug = "--debug" in (sys.argv[1:] if argv is None else argv)
    try:
        # Without standalone mode click returns the status that ctx.exit() set instead of raising.
        status = cli.main(args=argv, prog_name="nvidia-oci-hook", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("nvidia-oci-hook: interrupted", err=True)
        return EXIT_ERROR
    except click.ClickException as exc:
        exc.show()
        return EXIT_ERROR
    except Fatal as exc:
        click.echo(f"nvidia-oci-hook: {exc}", err=True)
        return EXIT_ERROR
    except BrokenPipeError:
        return EXIT_ERROR
    except Exception as exc:  # the one place an unexpected error becomes a single line
        if debug:
            traceback.print_exc()
        click.echo(f"nvidia-oci-hook: internal error: {type(exc).__name__}: {exc} (rerun with --debug)", err=True)
        return EXIT_ERROR
    return status if isinstance(status, int) else EXIT_CLEAN


def run() -> None:
    sys.exit(main())
