"""The kubelet's device-plugin API, v1beta1 (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1/api.proto), as wire
messages: what a device plugin answers to Allocate is what the kubelet stores in its checkpoint and turns into
the container's devices, mounts, environment, annotations and CDI names."""

from __future__ import annotations

from nvidia_oci_hook.formats.protowire import BOOL, INT, MAP, MESSAGE, STRING, Field, Message

API_VERSION = "v1beta1"
# Where the kubelet listens for registrations, and where plugins put their own sockets (hard-coded in the kubelet).
DEVICE_PLUGIN_DIR = "/var/lib/kubelet/device-plugins"
KUBELET_SOCKET = f"{DEVICE_PLUGIN_DIR}/kubelet.sock"
CHECKPOINT = f"{DEVICE_PLUGIN_DIR}/kubelet_internal_checkpoint"

EMPTY = Message("Empty")
DEVICE_PLUGIN_OPTIONS = Message(
    "DevicePluginOptions", {1: Field("pre_start_required", BOOL), 2: Field("get_preferred_allocation_available", BOOL)}
)
REGISTER_REQUEST = Message(
    "RegisterRequest",
    {
        1: Field("version", STRING),
        2: Field("endpoint", STRING),
        3: Field("resource_name", STRING),
        4: Field("options", MESSAGE, message=DEVICE_PLUGIN_OPTIONS),
    },
)
NUMA_NODE = Message("NUMANode", {1: Field("ID", INT)})
TOPOLOGY_INFO = Message("TopologyInfo", {1: Field("nodes", MESSAGE, repeated=True, message=NUMA_NODE)})
DEVICE = Message(
    "Device",
    {1: Field("ID", STRING), 2: Field("health", STRING), 3: Field("topology", MESSAGE, message=TOPOLOGY_INFO)},
)
LIST_AND_WATCH_RESPONSE = Message("ListAndWatchResponse", {1: Field("devices", MESSAGE, repeated=True, message=DEVICE)})
CONTAINER_ALLOCATE_REQUEST = Message("ContainerAllocateRequest", {1: Field("devices_ids", STRING, repeated=True)})
ALLOCATE_REQUEST = Message(
    "AllocateRequest",
    {1: Field("container_requests", MESSAGE, repeated=True, message=CONTAINER_ALLOCATE_REQUEST)},
)
MOUNT = Message(
    "Mount", {1: Field("container_path", STRING), 2: Field("host_path", STRING), 3: Field("read_only", BOOL)}
)
DEVICE_SPEC = Message(
    "DeviceSpec", {1: Field("container_path", STRING), 2: Field("host_path", STRING), 3: Field("permissions", STRING)}
)
CDI_DEVICE = Message("CDIDevice", {1: Field("name", STRING)})
CONTAINER_ALLOCATE_RESPONSE = Message(
    "ContainerAllocateResponse",
    {
        1: Field("envs", MAP),
        2: Field("mounts", MESSAGE, repeated=True, message=MOUNT),
        3: Field("devices", MESSAGE, repeated=True, message=DEVICE_SPEC),
        4: Field("annotations", MAP),
        5: Field("cdi_devices", MESSAGE, repeated=True, message=CDI_DEVICE),
    },
)
ALLOCATE_RESPONSE = Message(
    "AllocateResponse",
    {1: Field("container_responses", MESSAGE, repeated=True, message=CONTAINER_ALLOCATE_RESPONSE)},
)
PRE_START_CONTAINER_REQUEST = Message("PreStartContainerRequest", {1: Field("devices_ids", STRING, repeated=True)})
CONTAINER_PREFERRED_ALLOCATION_REQUEST = Message(
    "ContainerPreferredAllocationRequest",
    {
        1: Field("available_deviceIDs", STRING, repeated=True),
        2: Field("must_include_deviceIDs", STRING, repeated=True),
        3: Field("allocation_size", INT),
    },
)
PREFERRED_ALLOCATION_REQUEST = Message(
    "PreferredAllocationRequest",
    {1: Field("container_requests", MESSAGE, repeated=True, message=CONTAINER_PREFERRED_ALLOCATION_REQUEST)},
)
CONTAINER_PREFERRED_ALLOCATION_RESPONSE = Message(
    "ContainerPreferredAllocationResponse", {1: Field("deviceIDs", STRING, repeated=True)}
)
PREFERRED_ALLOCATION_RESPONSE = Message(
    "PreferredAllocationResponse",
    {1: Field("container_responses", MESSAGE, repeated=True, message=CONTAINER_PREFERRED_ALLOCATION_RESPONSE)},
)
