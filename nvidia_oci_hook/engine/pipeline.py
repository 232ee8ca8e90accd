"""One plan for every mode: CDI requests applied, driver-root paths moved, devices made unique and allowed, and
GPUs the container could not use found.

The order matters: CDI edits bring mounts and hooks whose paths may sit under a stale driver root, and device
entries that may duplicate the engine's, or the control node a GPU needs; the allow rules come last, for the
devices that remain.
"""

from __future__ import annotations

from nvidia_oci_hook.engine import jsoncodec, transforms
from nvidia_oci_hook.engine.records import Plan
from nvidia_oci_hook.engine.requests import requested_names
from nvidia_oci_hook.kinds.oci import OCIConfig

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from nvidia_oci_hook.config import Settings
    from nvidia_oci_hook.host import HostView


def plan(config: Any, host: HostView, settings: Settings) -> Plan:
    """What the engine does to config on this host under settings; config itself is left as it is."""
    if not isinstance(config, dict):
        # Not a config runc accepts either: runc reports it in its own words.
        return Plan(config, [], [])
    working = jsoncodec.loads(jsoncodec.dumps(config))
    if requested_names(working, settings):
        from nvidia_oci_hook.engine import cdi

        edits, findings, cdi_paths = cdi.inject(working, host, settings)
    else:
        edits, findings, cdi_paths = [], [], set()
    more_edits, more_findings = transforms.rewrite_driver_roots(working, host, settings)
    edits += more_edits
    findings += more_findings
    # Before the duplicates go, so that the pointers are those of the config as given wherever CDI added nothing;
    # removing duplicates leaves every path listed.
    findings += transforms.gpus_without_control_node(OCIConfig(working).devices)
    more_edits, more_findings = transforms.deduplicate_devices(working, settings, cdi_paths)
    edits += more_edits
    findings += more_findings
    edits += transforms.allow_devices(working)
    return Plan(working if edits else config, edits, findings)
