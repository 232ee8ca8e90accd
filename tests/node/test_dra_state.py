"""The kubelet's DRA checkpoint on fake node roots, in each shape kubelets write, and the CDI names of a pod's
claims derived from it.

The checkpoints are written as Go's encoding/json writes the kubelet's structs: fields in declaration order,
map keys sorted, nil slices and maps as null, no spaces, <, > and & escaped, and the Data's CRC-32 computed
here, not by the reader under test."""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any, Optional

import pytest

from nvidia_oci_hook.host import HostView
from nvidia_oci_hook.node.dra_state import (
    FORMAT_ALPHA,
    FORMAT_DATA,
    ClaimDevices,
    PreparedClaim,
    PreparedDevice,
    claim_cdi_devices,
    read_dra_state,
)
from tests.helpers import FakeHost

CHECKPOINT = "/var/lib/kubelet/dra_manager_state"
GPU_DRIVER = "gpu.nvidia.com"
NIC_DRIVER = "dra.net"
POD = "5b0e9d3c-8f1a-4c2e-9d7b-1a2b3c4d5e6f"
OTHER_POD = "0f9e8d7c-6b5a-4938-8271-605f4e3d2c1b"
CLAIM_UID = "a1a1a1a1-0000-4000-8000-000000000001"
TEMPLATE_UID = "b2b2b2b2-0000-4000-8000-000000000002"
SECOND_UID = "c3c3c3c3-0000-4000-8000-000000000003"


def go_json(value: Any) -> str:
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    for character, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(character, escaped)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def device(
    pool: str,
    name: str,
    cdi: Optional[list[str]],
    requests: Optional[list[str]] = None,
    share: Any = "absent",
) -> dict[str, Any]:
    """A state.Device; share: None or a UID for kubelets that write ShareID, "absent" for those that do not."""
    value: dict[str, Any] = {"PoolName": pool, "DeviceName": name}
    if share != "absent":
        value["ShareID"] = share
    value["RequestNames"] = requests
    value["CDIDeviceIDs"] = cdi
    return value


def claim(
    uid: str, name: str, pods: list[str], drivers: dict[str, list[dict[str, Any]]], namespace: str = "ml"
) -> dict[str, Any]:
    """A state.ClaimInfoState."""
    return {
        "ClaimUID": uid,
        "ClaimName": name,
        "Namespace": namespace,
        "PodUIDs": {pod: {} for pod in sorted(pods)} if pods else None,
        "DriverState": {driver: {"Devices": drivers[driver]} for driver in sorted(drivers)} if drivers else None,
    }


def data_text(claims: Optional[list[dict[str, Any]]]) -> str:
    return go_json(
        {"kind": "DRACheckpoint", "apiVersion": "checkpoint.dra.kubelet.k8s.io/v1", "ClaimInfoStateList": claims}
    )


def data_checkpoint(claims: Optional[list[dict[str, Any]]], checksum: Optional[int] = None) -> str:
    text = data_text(claims)
    return go_json({"Data": text, "Checksum": zlib.crc32(text.encode()) if checksum is None else checksum})


def gpu(index: int, claim_uid: str = CLAIM_UID, **extra: Any) -> dict[str, Any]:
    return device("node-a", f"gpu-{index}", [f"k8s.gpu.nvidia.com/claim={claim_uid}-gpu-{index}"], **extra)


def node_with(host: FakeHost, text: str, path: str = CHECKPOINT) -> HostView:
    host.text(path, text)
    return HostView(str(host.root))


# -- reading the checkpoint ---------------------------------------------------------------------------------------


def test_no_checkpoint_is_no_claim(fake_host: FakeHost) -> None:
    state = read_dra_state(HostView(str(fake_host.root)))
    assert (state.path, state.found, state.problem, state.claims) == (CHECKPOINT, False, None, ())


def test_a_fresh_kubelet_writes_an_empty_list(fake_host: FakeHost) -> None:
    state = read_dra_state(node_with(fake_host, data_checkpoint(None)))
    assert (state.found, state.problem, state.claims, state.format) == (True, None, (), FORMAT_DATA)


def test_the_shape_of_kubelet_1_31_and_later(fake_host: FakeHost) -> None:
    claims = [
        claim(
            CLAIM_UID,
            "shared-gpus",
            [POD, OTHER_POD],
            {
                GPU_DRIVER: [gpu(0, requests=["gpus"]), gpu(1, requests=["gpus"])],
                NIC_DRIVER: [device("node-a", "eth1", None, requests=["nic"])],
            },
        ),
        claim(TEMPLATE_UID, "trainer-7d9f-gpu-x2k4q", [POD], {GPU_DRIVER: [gpu(2, TEMPLATE_UID)]}),
    ]
    state = read_dra_state(node_with(fake_host, data_checkpoint(claims)))
    assert state.problem is None
    assert state.format == FORMAT_DATA
    shared = state.claims[0]
    assert (shared.claim_uid, shared.claim_name, shared.namespace) == (CLAIM_UID, "shared-gpus", "ml")
    assert shared.pod_uids == tuple(sorted([POD, OTHER_POD]))
    assert shared.devices == (  # drivers in the order Go's encoder sorts them
        PreparedDevice(NIC_DRIVER, "node-a", "eth1", ("nic",), ()),
        PreparedDevice(GPU_DRIVER, "node-a", "gpu-0", ("gpus",), (f"k8s.gpu.nvidia.com/claim={CLAIM_UID}-gpu-0",)),
        PreparedDevice(GPU_DRIVER, "node-a", "gpu-1", ("gpus",), (f"k8s.gpu.nvidia.com/claim={CLAIM_UID}-gpu-1",)),
    )
    assert [claim.claim_name for claim in state.for_pod(POD)] == ["shared-gpus", "trainer-7d9f-gpu-x2k4q"]
    assert [claim.claim_name for claim in state.for_pod(OTHER_POD)] == ["shared-gpus"]
    assert state.for_pod("") == []
    # A container that names the request gets its devices and those that serve every request.
    assert shared.cdi_device_ids("nic") == []
    assert (
        shared.cdi_device_ids("gpus")
        == shared.cdi_device_ids()
        == [
            f"k8s.gpu.nvidia.com/claim={CLAIM_UID}-gpu-0",
            f"k8s.gpu.nvidia.com/claim={CLAIM_UID}-gpu-1",
        ]
    )


def test_share_ids_of_kubelets_that_know_consumable_capacity(fake_host: FakeHost) -> None:
    share = "d4d4d4d4-0000-4000-8000-000000000004"
    claims = [claim(CLAIM_UID, "slice", [POD], {GPU_DRIVER: [gpu(0, share=None), gpu(1, share=share)]})]
    state = read_dra_state(node_with(fake_host, data_checkpoint(claims)))
    assert state.problem is None
    assert [device.share_id for device in state.claims[0].devices] == [None, share]


def test_escaped_characters_are_checksummed_as_go_wrote_them(fake_host: FakeHost) -> None:
    """Go escapes <, > and & inside Data; the checksum is over Data as decoded."""
    claims = [claim(CLAIM_UID, "a<b>&c", [POD], {GPU_DRIVER: [gpu(0)]}, namespace="ns\u2028x")]
    state = read_dra_state(node_with(fake_host, data_checkpoint(claims)))
    assert state.problem is None
    assert (state.claims[0].claim_name, state.claims[0].namespace) == ("a<b>&c", "ns\u2028x")


def test_an_unpaired_surrogate_is_read_as_go_reads_it(fake_host: FakeHost) -> None:
    text = data_text([claim(CLAIM_UID, "gpus\ufffd", [POD], {GPU_DRIVER: [gpu(0)]})])
    checkpoint = go_json({"Data": text, "Checksum": zlib.crc32(text.encode())}).replace("\ufffd", "\\ud800")
    state = read_dra_state(node_with(fake_host, checkpoint))
    assert state.problem is None
    assert state.claims[0].claim_name == "gpus\ufffd"


def test_names_are_matched_as_go_matches_them(fake_host: FakeHost) -> None:
    text = data_text([claim(CLAIM_UID, "gpus", [POD], {GPU_DRIVER: [gpu(0)]})]).replace(
        "ClaimInfoStateList", "claiminfostatelist"
    )
    state = read_dra_state(node_with(fake_host, go_json({"data": text, "checksum": zlib.crc32(text.encode())})))
    assert state.problem is None
    assert [claim.claim_name for claim in state.claims] == ["gpus"]


def test_a_checksum_that_does_not_match_is_refused_by_the_kubelet(fake_host: FakeHost) -> None:
    claims = [claim(CLAIM_UID, "gpus", [POD], {GPU_DRIVER: [gpu(0)]})]
    state = read_dra_state(node_with(fake_host, data_checkpoint(claims, checksum=12345)))
    assert state.problem is not None
    assert "12345" in state.problem and "corrupted" in state.problem
    assert [claim.claim_name for claim in state.claims] == ["gpus"]


def test_the_alpha_shape_of_kubelet_1_27_to_1_30(fake_host: FakeHost) -> None:
    entry = {
        "DriverName": GPU_DRIVER,
        "ClassName": "gpu.nvidia.com",
        "ClaimUID": CLAIM_UID,
        "ClaimName": "gpus",
        "Namespace": "ml",
        "PodUIDs": {POD: {}},
        "ResourceHandles": [{"driverName": GPU_DRIVER, "data": "{}"}],
        "CDIDevices": {GPU_DRIVER: [f"k8s.gpu.nvidia.com/claim={CLAIM_UID}-gpu-0"]},
    }
    state = read_dra_state(node_with(fake_host, go_json({"version": "v1", "entries": [entry], "checksum": 2849306012})))
    assert state.format == FORMAT_ALPHA
    assert state.problem is not None and "1.31" in state.problem and "corrupted" in state.problem
    assert state.claims == (
        PreparedClaim(
            CLAIM_UID,
            "gpus",
            "ml",
            (POD,),
            (PreparedDevice(GPU_DRIVER, "", "", (), (f"k8s.gpu.nvidia.com/claim={CLAIM_UID}-gpu-0",)),),
        ),
    )


def test_a_checkpoint_that_is_not_json(fake_host: FakeHost) -> None:
    state = read_dra_state(node_with(fake_host, '{"Data": "{'))
    assert state.found and state.claims == ()
    assert state.problem is not None and state.problem.startswith("not JSON:")
    assert "\n" not in state.problem


def test_data_that_is_not_json(fake_host: FakeHost) -> None:
    text = '{"kind":"DRACheckpoint",'
    state = read_dra_state(node_with(fake_host, go_json({"Data": text, "Checksum": zlib.crc32(text.encode())})))
    assert state.problem is not None and state.problem.startswith("its Data is not JSON")
    assert state.claims == ()


@pytest.mark.parametrize(
    ("checkpoint", "where"),
    [
        ("[]", "the JSON is a list"),
        ('{"Data":17,"Checksum":0}', "Data is a number"),
        ('{"Checksum":0}', "no Data"),
        (go_json({"Data": data_text(None), "Checksum": -1}), "Checksum is -1"),
        (go_json({"Data": data_text(None), "Checksum": "7"}), "Checksum is '7'"),
        (go_json({"Data": "[]", "Checksum": zlib.crc32(b"[]")}), "its Data is a list"),
        (
            go_json({"Data": '{"kind":"DRACheckpoint","apiVersion":"v2"}', "Checksum": 755827418}),
            'its Data is kind "DRACheckpoint", apiVersion "v2", not DRACheckpoint checkpoint.dra.kubelet.k8s.io/v1',
        ),
    ],
)
def test_a_checkpoint_of_the_wrong_shape(fake_host: FakeHost, checkpoint: str, where: str) -> None:
    state = read_dra_state(node_with(fake_host, checkpoint))
    assert state.found and state.claims == ()
    assert state.problem is not None and where in state.problem and "\n" not in state.problem


@pytest.mark.parametrize(
    ("bad", "where"),
    [
        ({"DriverState": [1]}, "ClaimInfoStateList[1].DriverState is a list"),
        ({"PodUIDs": [POD]}, "ClaimInfoStateList[1].PodUIDs is a list"),
        ({"ClaimName": 7}, "ClaimInfoStateList[1].ClaimName is a number"),
        (
            {"DriverState": {GPU_DRIVER: {"Devices": [{"CDIDeviceIDs": "k8s.gpu.nvidia.com/claim=x"}]}}},
            f"ClaimInfoStateList[1].DriverState[{GPU_DRIVER}].Devices[0].CDIDeviceIDs is a string",
        ),
    ],
)
def test_a_claim_of_the_wrong_shape_is_named_and_the_others_kept(
    fake_host: FakeHost, bad: dict[str, Any], where: str
) -> None:
    claims = [
        claim(CLAIM_UID, "gpus", [POD], {GPU_DRIVER: [gpu(0)]}),
        {**claim(SECOND_UID, "broken", [POD], {}), **bad},
    ]
    state = read_dra_state(node_with(fake_host, data_checkpoint(claims)))
    assert state.problem is not None and state.problem.startswith(f"not the kubelet's checkpoint: {where}, not ")
    assert [claim.claim_name for claim in state.claims] == ["gpus"]


def test_a_directory_in_its_place(fake_host: FakeHost) -> None:
    fake_host.directory(CHECKPOINT)
    state = read_dra_state(HostView(str(fake_host.root)))
    assert state.found and state.claims == ()
    assert state.problem is not None and state.problem.startswith("cannot be read:")


def test_the_root_dir_of_the_running_kubelet(fake_host: FakeHost) -> None:
    fake_host.text("/proc/31/cmdline", "/usr/bin/kubelet\0--root-dir=/data/kubelet\0")
    claims = [claim(CLAIM_UID, "gpus", [POD], {GPU_DRIVER: [gpu(0)]})]
    fake_host.text(CHECKPOINT, data_checkpoint([]))
    state = read_dra_state(node_with(fake_host, data_checkpoint(claims), "/data/kubelet/dra_manager_state"))
    assert state.path == "/data/kubelet/dra_manager_state"
    assert [claim.claim_name for claim in state.claims] == ["gpus"]


@pytest.mark.parametrize("how", ["absolute", "climbing"])
def test_a_link_out_of_the_host_root_is_not_followed(fake_host: FakeHost, tmp_path: Path, how: str) -> None:
    outside = tmp_path / "outside" / "dra_manager_state"
    outside.parent.mkdir()
    outside.write_text(data_checkpoint([claim(CLAIM_UID, "from-outside", [POD], {GPU_DRIVER: [gpu(0)]})]))
    # From <root>/var/lib/kubelet, four steps up leave the root; inside it the fourth stops at the root.
    target = str(outside) if how == "absolute" else "../../../../outside/dra_manager_state"
    fake_host.symlink(CHECKPOINT, target)
    assert "from-outside" in (fake_host.root / CHECKPOINT.lstrip("/")).read_text()  # where the kernel goes
    fake_host.text("/outside/dra_manager_state", data_checkpoint([claim(SECOND_UID, "inside", [POD], {})]))
    state = read_dra_state(HostView(str(fake_host.root)))
    assert state.found
    if how == "absolute":
        assert state.claims == () and state.problem is not None and state.problem.startswith("cannot be read:")
    else:
        assert state.problem is None
        assert [claim.claim_name for claim in state.claims] == ["inside"]


# -- the CDI names of a pod's claims ------------------------------------------------------------------------------


def prepared(host: FakeHost, *claims: dict[str, Any]) -> Any:
    return read_dra_state(node_with(host, data_checkpoint(list(claims))))


def test_a_claim_named_directly(fake_host: FakeHost) -> None:
    state = prepared(
        fake_host,
        claim(CLAIM_UID, "shared-gpus", [POD, OTHER_POD], {GPU_DRIVER: [gpu(0), gpu(1)]}),
        claim(SECOND_UID, "shared-gpus", [OTHER_POD], {GPU_DRIVER: [gpu(2, SECOND_UID)]}, namespace="other"),
    )
    answer = claim_cdi_devices(state, POD, {"gpus": ("shared-gpus", None)})
    assert answer == ClaimDevices(
        {
            "gpus": [
                f"k8s.gpu.nvidia.com/claim={CLAIM_UID}-gpu-0",
                f"k8s.gpu.nvidia.com/claim={CLAIM_UID}-gpu-1",
            ]
        },
        [],
    )
    devices, notes = claim_cdi_devices(state, "", {"gpus": ("shared-gpus", None)}, namespace="other")
    assert devices == {"gpus": [f"k8s.gpu.nvidia.com/claim={SECOND_UID}-gpu-2"]} and notes == []


def test_a_claim_named_directly_that_is_not_prepared_here(fake_host: FakeHost) -> None:
    state = prepared(fake_host, claim(CLAIM_UID, "gpus", [OTHER_POD], {GPU_DRIVER: [gpu(0)]}))
    devices, notes = claim_cdi_devices(state, POD, {"a": ("missing", None), "b": ("gpus", None)})
    assert devices == {"b": [f"k8s.gpu.nvidia.com/claim={CLAIM_UID}-gpu-0"]}
    assert notes == [
        "claim a: ResourceClaim missing is not prepared on this node",
        "claim b: ResourceClaim gpus is prepared for other pods, not yet for this one",
    ]


def test_a_name_in_two_namespaces_is_left_out(fake_host: FakeHost) -> None:
    state = prepared(
        fake_host,
        claim(CLAIM_UID, "gpus", [OTHER_POD], {GPU_DRIVER: [gpu(0)]}, namespace="a"),
        claim(SECOND_UID, "gpus", [OTHER_POD], {GPU_DRIVER: [gpu(1, SECOND_UID)]}, namespace="b"),
    )
    devices, notes = claim_cdi_devices(state, POD, {"gpus": ("gpus", None)})
    assert devices == {}
    assert notes == ["claim gpus: ResourceClaim gpus is prepared in several namespaces (a, b): which one is the pod's"]


def test_a_claim_from_a_template(fake_host: FakeHost) -> None:
    state = prepared(
        fake_host,
        claim(CLAIM_UID, "shared-gpus", [POD], {GPU_DRIVER: [gpu(0)]}),
        claim(TEMPLATE_UID, "trainer-7d9f-gpu-x2k4q", [POD], {GPU_DRIVER: [gpu(1, TEMPLATE_UID)]}),
        claim(SECOND_UID, "trainer-11aa-gpu-zz9pq", [OTHER_POD], {GPU_DRIVER: [gpu(2, SECOND_UID)]}),
    )
    pod_claims = {"shared": ("shared-gpus", None), "gpu": (None, "one-gpu")}
    devices, notes = claim_cdi_devices(state, POD, pod_claims, namespace="ml")
    assert notes == []
    assert devices == {
        "shared": [f"k8s.gpu.nvidia.com/claim={CLAIM_UID}-gpu-0"],
        "gpu": [f"k8s.gpu.nvidia.com/claim={TEMPLATE_UID}-gpu-1"],
    }


def test_two_claims_from_templates_are_ambiguous(fake_host: FakeHost) -> None:
    state = prepared(
        fake_host,
        claim(TEMPLATE_UID, "trainer-7d9f-gpu-x2k4q", [POD], {GPU_DRIVER: [gpu(1, TEMPLATE_UID)]}),
        claim(
            SECOND_UID, "trainer-7d9f-nic-b7m2c", [POD], {NIC_DRIVER: [device("node-a", "eth1", ["dra.net/nic=eth1"])]}
        ),
    )
    pod_claims = {"gpu": (None, "one-gpu"), "nic": (None, "one-nic")}
    devices, notes = claim_cdi_devices(state, POD, pod_claims)
    assert devices == {}
    assert len(notes) == 2
    assert notes[0].startswith("claim gpu: made from a template; 2 such claims and 2 prepared claims left")
    assert "status.resourceClaimStatuses" in notes[0]
    # The pod's status names the claim made from each template.
    generated = {"gpu": "trainer-7d9f-gpu-x2k4q", "nic": "trainer-7d9f-nic-b7m2c"}
    devices, notes = claim_cdi_devices(state, POD, pod_claims, generated=generated)
    assert notes == []
    assert devices == {"gpu": [f"k8s.gpu.nvidia.com/claim={TEMPLATE_UID}-gpu-1"], "nic": ["dra.net/nic=eth1"]}


def test_a_template_left_without_a_claim(fake_host: FakeHost) -> None:
    state = prepared(fake_host, claim(CLAIM_UID, "shared-gpus", [POD], {GPU_DRIVER: [gpu(0)]}))
    pod_claims = {"shared": ("shared-gpus", None), "gpu": (None, "one-gpu")}
    devices, notes = claim_cdi_devices(state, POD, pod_claims)
    assert list(devices) == ["shared"]
    assert notes == ["claim gpu: made from a template, and no claim prepared for this pod is left for it"]
    devices, notes = claim_cdi_devices(state, POD, pod_claims, generated={"gpu": None})
    assert notes == ["claim gpu: no ResourceClaim was made from its template: the kubelet injects nothing"]
    devices, notes = claim_cdi_devices(state, "", {"gpu": (None, "one-gpu")})
    assert devices == {} and notes[0].endswith("without the pod's UID its claim cannot be told from the node")


def test_the_checkpoint_is_said_when_it_answers_nothing(fake_host: FakeHost) -> None:
    missing = read_dra_state(HostView(str(fake_host.root)))
    devices, notes = claim_cdi_devices(missing, POD, {"gpus": ("gpus", None)})
    assert devices == {}
    assert notes == [
        f"{CHECKPOINT}: not found: the kubelet has prepared no DRA claim on this node",
        "claim gpus: ResourceClaim gpus is not prepared on this node",
    ]
    broken = read_dra_state(node_with(fake_host, "not json"))
    assert claim_cdi_devices(broken, POD, {})[1][0].startswith(f"{CHECKPOINT}: not JSON:")
