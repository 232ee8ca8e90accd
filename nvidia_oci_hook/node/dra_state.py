"""What the kubelet's DRA manager prepared on this node, read from its checkpoint.

The kubelet keeps every ResourceClaim it prepared in `<root-dir>/dra_manager_state` (`--root-dir`, default
/var/lib/kubelet; kubernetes pkg/kubelet/cm/dra/manager.go and its state package). Two shapes exist:

- Kubelet 1.31 and later (the shape of 1.32 to 1.35): `{"Data": TEXT, "Checksum": N}` (state/checkpoint.go), where
  N is the CRC-32 (IEEE) of TEXT's bytes and TEXT is itself JSON: `{"kind": "DRACheckpoint", "apiVersion":
  "checkpoint.dra.kubelet.k8s.io/v1", "ClaimInfoStateList": [CLAIM, ...]}` (null while nothing is prepared). A
  CLAIM (state/state.go) is `{"ClaimUID", "ClaimName", "Namespace", "PodUIDs": {UID: {}}, "DriverState": {DRIVER:
  {"Devices": [{"PoolName", "DeviceName", "RequestNames": [...], "CDIDeviceIDs": [...]}]}}}`; the lists are null
  when empty, and kubelets that carry the share of a device allocated more than once (consumable capacity; the
  kubelet plugin API's share_id, kubernetes #134520) add `"ShareID"` (null or the share's UID) after "DeviceName".
- Kubelet 1.27 to 1.30 (DRA alpha): `{"version": "v1", "entries": [{"DriverName", "ClassName", "ClaimUID",
  "ClaimName", "Namespace", "PodUIDs", "ResourceHandles", "CDIDevices": {DRIVER: [names]}}], "checksum": N}`,
  N an FNV-32a over go-spew's dump of the Go structs, which is not checked here (node/device_plugins.py says why).
  A kubelet of 1.31 or later reads that file as an empty Data whose checksum does not match, calls it corrupted
  and does not start until the file is removed (kubernetes #127653).

Go's JSON decoder matches these names case-insensitively and the kubelet refuses the whole file on any value of
the wrong type: such a file is reported in `problem`, with the claims that are well formed still listed. Nothing
here raises on what the node holds; every read goes through the HostView.
"""

from __future__ import annotations

import json
import posixpath
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, Optional

from nvidia_oci_hook import io
from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.node.device_plugins import KUBELET_ROOT_DIR, running_kubelet

CHECKPOINT_NAME = "dra_manager_state"
CHECKPOINT_KIND = "DRACheckpoint"
CHECKPOINT_API_VERSION = "checkpoint.dra.kubelet.k8s.io/v1"
# A prepared claim takes a few hundred bytes; a node prepares at most a few hundred claims.
CHECKPOINT_MAX_BYTES = 16 << 20

FORMAT_DATA = "kubelet 1.31 and later"
FORMAT_ALPHA = "kubelet 1.27 to 1.30"

_ABSENT = object()
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class PreparedDevice:
    """One device a DRA driver prepared for a claim, as it described the device to the kubelet."""

    driver: str
    pool: str
    device: str
    request_names: tuple[str, ...] = ()  # none: the device serves every request of the claim
    cdi_device_ids: tuple[str, ...] = ()
    share_id: Optional[str] = None  # the share of a device allocated more than once (consumable capacity)

    def serves(self, request: Optional[str]) -> bool:
        return not request or not self.request_names or request in self.request_names


@dataclass(frozen=True)
class PreparedClaim:
    claim_uid: str
    claim_name: str
    namespace: str
    pod_uids: tuple[str, ...]
    devices: tuple[PreparedDevice, ...]

    def cdi_device_ids(self, request: Optional[str] = None) -> list[str]:
        """The CDI names the kubelet gives a container for this claim: for `resources.claims[].request`, those
        of the devices prepared for that request and of the devices that name no request (cm/dra/claiminfo.go
        `cdiDevicesAsList`). Drivers in name order, as Go's encoder sorts them; the kubelet's own order across
        drivers is that of a Go map."""
        return [name for device in self.devices if device.serves(request) for name in device.cdi_device_ids]


@dataclass(frozen=True)
class DraState:
    path: str  # the node path of the checkpoint
    found: bool  # whether anything is at that path
    problem: Optional[str] = None  # one line: unreadable, not JSON, not the kubelet's shape, or one it refuses
    claims: tuple[PreparedClaim, ...] = ()
    format: Optional[str] = None  # FORMAT_DATA or FORMAT_ALPHA: which kubelets write the shape found

    def for_pod(self, uid: str) -> list[PreparedClaim]:
        return [claim for claim in self.claims if uid and uid in claim.pod_uids]


class ClaimDevices(NamedTuple):
    """claim_cdi_devices' answer: CDI names by pod claim name, and one line for each claim left out, and why."""

    devices: dict[str, list[str]]
    notes: list[str]


class _Shape(Exception):
    pass


def checkpoint_path(host: HostView) -> str:
    kubelet = running_kubelet(host)
    root = kubelet.root_dir if kubelet is not None and kubelet.root_dir else KUBELET_ROOT_DIR
    return posixpath.join(root, CHECKPOINT_NAME)


def read_dra_state(host: HostView) -> DraState:
    path = checkpoint_path(host)
    if not host.lexists(path):
        return DraState(path, False)
    try:
        raw = host.read_bytes(path, CHECKPOINT_MAX_BYTES)
    except (io.ReadError, io.TooLarge) as exc:
        return DraState(path, True, f"cannot be read: {exc}")
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return DraState(path, True, f"not JSON: {exc}")
    if not isinstance(value, dict):
        return DraState(path, True, f"not the kubelet's checkpoint: the JSON is {_kind(value)}, not an object")
    alpha = _field(value, "entries") is not _ABSENT or _field(value, "version") is not _ABSENT
    if _field(value, "Data") is _ABSENT and alpha:
        claims, problem = _alpha_claims(value)
        refused = (
            "written by a kubelet of 1.27 to 1.30 (DRA alpha): kubelets of 1.31 and later call it corrupted and do "
            "not start until it is removed"
        )
        return DraState(path, True, problem or refused, tuple(claims), FORMAT_ALPHA)
    claims, problem = _data_claims(value)
    return DraState(path, True, problem, tuple(claims), FORMAT_DATA)


def claim_cdi_devices(
    state: DraState,
    pod_uid: str,
    pod_claims: Mapping[str, tuple[Optional[str], Optional[str]]],
    *,
    namespace: Optional[str] = None,
    generated: Optional[Mapping[str, Optional[str]]] = None,
) -> ClaimDevices:
    """The CDI names of each claim of a pod as the kubelet prepared them on this node.

    pod_claims maps each `spec.resourceClaims[].name` to its (resourceClaimName, resourceClaimTemplateName).
    A claim named directly is the prepared claim of that name (in `namespace` when given; the one prepared for
    this pod where several share the name). The checkpoint does not record which template a claim came from: the
    pod's claims from templates take the pod's prepared claims that no direct claim took, and only when that
    leaves one claim for one template (the claim the scheduler makes for extended resources served by DRA is
    one of the pod's prepared claims too, and then leaves two). `generated` (the pod's
    `status.resourceClaimStatuses`: pod claim name to the ResourceClaim made for it, None where none was made)
    names them exactly. The names are those of every device of the claim (`PreparedClaim.cdi_device_ids`
    narrows them to one request). A claim not answered is left out of `devices` and said in `notes`.
    """
    devices: dict[str, list[str]] = {}
    notes: list[str] = []
    if not state.found:
        notes.append(f"{state.path}: not found: the kubelet has prepared no DRA claim on this node")
    elif state.problem:
        notes.append(f"{state.path}: {state.problem}")
    mine = state.for_pod(pod_uid)
    taken: set[str] = set()
    from_templates: list[str] = []
    for name, (claim_name, template) in pod_claims.items():
        target = claim_name
        if target is None and template is not None and generated is not None and name in generated:
            target = generated[name]
            if target is None:
                notes.append(f"claim {name}: no ResourceClaim was made from its template: the kubelet injects nothing")
                continue
        if target is None:
            if template is not None:
                from_templates.append(name)
            else:
                notes.append(f"claim {name}: names neither a ResourceClaim nor a template")
            continue
        claim, note = _named(state, target, namespace, pod_uid)
        if note:
            notes.append(f"claim {name}: {note}")
        if claim is not None:
            devices[name] = claim.cdi_device_ids()
            taken.add(claim.claim_uid)
    left = [claim for claim in mine if claim.claim_uid not in taken and _in(claim, namespace)]
    if len(from_templates) == 1 and len(left) == 1:
        devices[from_templates[0]] = left[0].cdi_device_ids()
    elif from_templates:
        for name in from_templates:
            notes.append(f"claim {name}: {_unmatched(pod_uid, len(from_templates), left)}")
    return ClaimDevices(devices, notes)


def _named(
    state: DraState, target: str, namespace: Optional[str], pod_uid: str
) -> tuple[Optional[PreparedClaim], Optional[str]]:
    found = [claim for claim in state.claims if claim.claim_name == target and _in(claim, namespace)]
    ours = [claim for claim in found if pod_uid and pod_uid in claim.pod_uids]
    chosen = ours or found
    if not chosen:
        return None, f"ResourceClaim {target} is not prepared on this node"
    if len(chosen) > 1:
        spaces = ", ".join(sorted(claim.namespace for claim in chosen))
        return None, f"ResourceClaim {target} is prepared in several namespaces ({spaces}): which one is the pod's"
    claim = chosen[0]
    if pod_uid and not ours:
        return claim, f"ResourceClaim {target} is prepared for other pods, not yet for this one"
    return claim, None


def _unmatched(pod_uid: str, templates: int, left: list[PreparedClaim]) -> str:
    if not pod_uid:
        return "made from a template, and without the pod's UID its claim cannot be told from the node"
    if not left:
        return "made from a template, and no claim prepared for this pod is left for it"
    names = ", ".join(sorted(claim.claim_name for claim in left))
    return (
        f"made from a template; {templates} such claims and {len(left)} prepared claims left ({names}), and the "
        "node does not record which template made which (the pod's status.resourceClaimStatuses does)"
    )


def _in(claim: PreparedClaim, namespace: Optional[str]) -> bool:
    return namespace is None or claim.namespace == namespace


# ---------------------------------------------------------------------------------------------------------------
# The shapes, read as Go's encoding/json reads them into the kubelet's structs


def _data_claims(value: dict[str, Any]) -> tuple[list[PreparedClaim], Optional[str]]:
    problem: Optional[str] = None
    try:
        text = _string(_field(value, "Data"), "Data")
        if not text:
            raise _Shape("it has no Data")
        checksum = _field(value, "Checksum")
        if checksum is _ABSENT or checksum is None:
            checksum = 0
        if isinstance(checksum, bool) or not isinstance(checksum, int) or not 0 <= checksum < 1 << 32:
            raise _Shape(f"its Checksum is {checksum!r}, not an unsigned 32-bit integer")
    except _Shape as exc:
        return [], f"not the kubelet's checkpoint: {exc}"
    # Go decodes an unpaired surrogate escape as U+FFFD, and checksums and reads those bytes.
    text = _SURROGATE.sub("\ufffd", text)
    actual = zlib.crc32(text.encode())
    if actual != checksum:
        problem = (
            f"its Checksum {checksum} is not the CRC-32 of its Data ({actual}): the kubelet calls it corrupted and "
            "does not start until it is removed"
        )
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return [], problem or f"its Data is not JSON ({exc}): the kubelet cannot read it and does not start"
    if not isinstance(data, dict):
        return [], problem or f"not the kubelet's checkpoint: its Data is {_kind(data)}, not an object"
    # The kubelet reads any kind and apiVersion as its own; another one is a shape this reader may not know.
    kind, api_version = _field(data, "kind"), _field(data, "apiVersion")
    if (kind, api_version) != (CHECKPOINT_KIND, CHECKPOINT_API_VERSION):
        problem = problem or (
            f"its Data is kind {_shown(kind)}, apiVersion {_shown(api_version)}, not {CHECKPOINT_KIND} "
            f"{CHECKPOINT_API_VERSION}"
        )
    entries = _field(data, "ClaimInfoStateList")
    if entries is _ABSENT or entries is None:
        return [], problem
    if not isinstance(entries, list):
        return [], problem or f"not the kubelet's checkpoint: its ClaimInfoStateList is {_kind(entries)}, not a list"
    claims: list[PreparedClaim] = []
    for index, entry in enumerate(entries):
        where = f"ClaimInfoStateList[{index}]"
        try:
            claims.append(_data_claim(entry, where))
        except _Shape as exc:
            problem = problem or f"not the kubelet's checkpoint: {exc}"
    return claims, problem


def _data_claim(entry: Any, where: str) -> PreparedClaim:
    entry = _object(entry, where)
    devices: list[PreparedDevice] = []
    drivers = _object(_field(entry, "DriverState"), f"{where}.DriverState")
    for driver, driver_state in drivers.items():
        at = f"{where}.DriverState[{driver}]"
        for index, device in enumerate(_list(_field(_object(driver_state, at), "Devices"), f"{at}.Devices")):
            here = f"{at}.Devices[{index}]"
            device = _object(device, here)
            share = _field(device, "ShareID")
            devices.append(
                PreparedDevice(
                    driver,
                    _string(_field(device, "PoolName"), f"{here}.PoolName"),
                    _string(_field(device, "DeviceName"), f"{here}.DeviceName"),
                    _strings(_field(device, "RequestNames"), f"{here}.RequestNames"),
                    _strings(_field(device, "CDIDeviceIDs"), f"{here}.CDIDeviceIDs"),
                    None if share is _ABSENT or share is None else _string(share, f"{here}.ShareID"),
                )
            )
    return _claim(entry, where, devices)


def _alpha_claims(value: dict[str, Any]) -> tuple[list[PreparedClaim], Optional[str]]:
    problem: Optional[str] = None
    try:
        entries = _list(_field(value, "entries"), "entries")
    except _Shape as exc:
        return [], f"not the kubelet's checkpoint: {exc}"
    claims: list[PreparedClaim] = []
    for index, entry in enumerate(entries):
        where = f"entries[{index}]"
        try:
            entry = _object(entry, where)
            cdi = _object(_field(entry, "CDIDevices"), f"{where}.CDIDevices")
            devices = [
                PreparedDevice(driver, "", "", (), _strings(names, f"{where}.CDIDevices[{driver}]"))
                for driver, names in cdi.items()
            ]
            claims.append(_claim(entry, where, devices))
        except _Shape as exc:
            problem = problem or f"not the kubelet's checkpoint: {exc}"
    return claims, problem


def _claim(entry: dict[str, Any], where: str, devices: list[PreparedDevice]) -> PreparedClaim:
    pods = _object(_field(entry, "PodUIDs"), f"{where}.PodUIDs")
    for uid, member in pods.items():
        if member is not None and not isinstance(member, dict):
            raise _Shape(f"{where}.PodUIDs[{uid}] is {_kind(member)}, not an object")
    return PreparedClaim(
        _string(_field(entry, "ClaimUID"), f"{where}.ClaimUID"),
        _string(_field(entry, "ClaimName"), f"{where}.ClaimName"),
        _string(_field(entry, "Namespace"), f"{where}.Namespace"),
        tuple(sorted(pods)),
        tuple(devices),
    )


def _field(value: dict[str, Any], name: str) -> Any:
    """A struct field as Go's decoder fills it: from every key equal to the name but for case, the last one."""
    found: Any = _ABSENT
    folded = name.casefold()
    for key, item in value.items():
        if key.casefold() == folded:
            found = item
    return found


def _object(value: Any, where: str) -> dict[str, Any]:
    if value is _ABSENT or value is None:
        return {}
    if not isinstance(value, dict):
        raise _Shape(f"{where} is {_kind(value)}, not an object")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if value is _ABSENT or value is None:
        return []
    if not isinstance(value, list):
        raise _Shape(f"{where} is {_kind(value)}, not a list")
    return value


def _string(value: Any, where: str) -> str:
    if value is _ABSENT or value is None:
        return ""
    if not isinstance(value, str):
        raise _Shape(f"{where} is {_kind(value)}, not a string")
    return value


def _strings(value: Any, where: str) -> tuple[str, ...]:
    return tuple(_string(item, f"{where}[{index}]") for index, item in enumerate(_list(value, where)))


def _shown(value: Any) -> str:
    return "none" if value is _ABSENT else json.dumps(value)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"
