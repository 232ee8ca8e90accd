"""A device plugin of the tests' own: a gRPC server on a unix socket speaking the kubelet's v1beta1 device-plugin API
(nvidia_oci_hook.kinds.kubernetes.deviceplugin's messages), as NVIDIA's plugin does in each of its strategies.

It registers one resource with the kubelet (`v1beta1.Registration/Register` on kubelet.sock), lists a fixed set of
healthy devices in ListAndWatch and keeps the stream open until it stops, proposes the lowest free device IDs in
GetPreferredAllocation (so that a test knows which device a pod will get), and answers Allocate from its
configuration file, read again on every call so that a test can change the answer between pods without a restart.
When the kubelet restarts it removes every socket in its plugin directory and makes kubelet.sock again: the plugin
then serves on a new socket and registers again, as real plugins do.

The configuration (JSON):

    {"resource": "nvidia.com/gpu", "devices": ["gpu0", "gpu1"], "endpoint": "nvoh.sock",
     "answers": {"*": {...}, "gpu1": {...}}, "calls": "/tmp/.../calls.jsonl",
     "pre_start_required": false, "preferred_allocation": true}

Each answer is a ContainerAllocateResponse as a dict (`envs`, `mounts` [{container_path, host_path, read_only}],
`devices` [{container_path, host_path, permissions}], `annotations`, `cdi_devices` [{name}]); a container asking for
several devices gets their answers merged (maps by key, lists in device order), a device without an answer of its
own gets "*"'s. Every call the kubelet makes is appended to `calls` as one JSON line {"method", "request",
"response"}.

Run it as `python -m tests.kubelet.device_plugin --config answer.json` in the kubelet's mount namespace: the
kubelet's socket directory is hard-coded (/var/lib/kubelet/device-plugins).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from concurrent import futures
from pathlib import Path
from typing import Any, Callable, Optional

# The harness that starts this program imports tests.e2e.cri, which insists that gRPC's fork support be off
# before gRPC loads (see there); a test that imports this module first must not break that.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

import grpc

from nvidia_oci_hook.kinds.kubernetes import deviceplugin as api

SERVICE = "v1beta1.DevicePlugin"
REGISTER = "/v1beta1.Registration/Register"
HEALTHY = "Healthy"
DEFAULT_ANSWER = "*"


def merged_answer(answers: Mapping[str, Mapping[str, Any]], device_ids: Sequence[str]) -> dict[str, Any]:
    """One container's ContainerAllocateResponse for device_ids, from each device's answer (or the default's)."""
    response: dict[str, Any] = {"envs": {}, "mounts": [], "devices": [], "annotations": {}, "cdi_devices": []}
    for device_id in device_ids:
        answer = answers.get(device_id, answers.get(DEFAULT_ANSWER, {}))
        for key in ("envs", "annotations"):
            response[key].update(answer.get(key) or {})
        for key in ("mounts", "devices", "cdi_devices"):
            response[key].extend(answer.get(key) or [])
    return response


def preferred(request: Mapping[str, Any]) -> list[str]:
    """The devices that must be in, then the lowest others (by ID), up to the size asked for."""
    chosen = list(request["must_include_deviceIDs"])
    for device_id in sorted(request["available_deviceIDs"]):
        if len(chosen) >= request["allocation_size"]:
            break
        if device_id not in chosen:
            chosen.append(device_id)
    return chosen


class DevicePlugin:
    """The plugin's server and its registration; run() until stop()."""

    def __init__(self, config_path: Path, plugin_dir: Path = Path(api.DEVICE_PLUGIN_DIR)) -> None:
        self.config_path = config_path
        config = self.config()
        self.resource: str = config["resource"]
        self.devices: list[str] = list(config["devices"])
        self.plugin_dir = plugin_dir
        self.endpoint = plugin_dir / config.get("endpoint", "nvoh-test.sock")
        self.kubelet_socket = plugin_dir / Path(api.KUBELET_SOCKET).name
        self.options = {
            "pre_start_required": bool(config.get("pre_start_required", False)),
            "get_preferred_allocation_available": bool(config.get("preferred_allocation", True)),
        }
        calls = config.get("calls")
        self.calls = Path(calls) if calls else None
        self.stopped = threading.Event()
        self.server: Optional[grpc.Server] = None
        self._lock = threading.Lock()

    def config(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(self.config_path.read_text())
        return loaded

    def _record(self, method: str, request: Any, response: Any) -> None:
        if self.calls is None:
            return
        line = json.dumps({"method": method, "request": request, "response": response}, sort_keys=True)
        with self._lock, self.calls.open("a") as out:
            out.write(line + "\n")

    # The DevicePlugin service.

    def get_options(self, request: dict[str, Any], context: grpc.ServicerContext) -> dict[str, Any]:
        self._record("GetDevicePluginOptions", request, self.options)
        return self.options

    def list_and_watch(self, request: dict[str, Any], context: grpc.ServicerContext) -> Iterator[dict[str, Any]]:
        response = {"devices": [{"ID": device, "health": HEALTHY} for device in self.devices]}
        self._record("ListAndWatch", request, response)
        yield response
        # The kubelet reads a closed stream as the plugin gone: keep it open while both ends are there.
        while context.is_active() and not self.stopped.wait(0.5):
            pass

    def allocate(self, request: dict[str, Any], context: grpc.ServicerContext) -> dict[str, Any]:
        answers = self.config().get("answers", {})
        response = {
            "container_responses": [
                merged_answer(answers, container["devices_ids"]) for container in request["container_requests"]
            ]
        }
        self._record("Allocate", request, response)
        return response

    def get_preferred_allocation(self, request: dict[str, Any], context: grpc.ServicerContext) -> dict[str, Any]:
        response = {"container_responses": [{"deviceIDs": preferred(c)} for c in request["container_requests"]]}
        self._record("GetPreferredAllocation", request, response)
        return response

    def pre_start_container(self, request: dict[str, Any], context: grpc.ServicerContext) -> dict[str, Any]:
        self._record("PreStartContainer", request, {})
        return {}

    def handler(self) -> grpc.GenericRpcHandler:
        def unary(
            method: Callable[[dict[str, Any], grpc.ServicerContext], Any], request: Any, response: Any
        ) -> grpc.RpcMethodHandler:
            return grpc.unary_unary_rpc_method_handler(
                method, request_deserializer=request.decode, response_serializer=response.encode
            )

        return grpc.method_handlers_generic_handler(
            SERVICE,
            {
                "GetDevicePluginOptions": unary(self.get_options, api.EMPTY, api.DEVICE_PLUGIN_OPTIONS),
                "ListAndWatch": grpc.unary_stream_rpc_method_handler(
                    self.list_and_watch,
                    request_deserializer=api.EMPTY.decode,
                    response_serializer=api.LIST_AND_WATCH_RESPONSE.encode,
                ),
                "GetPreferredAllocation": unary(
                    self.get_preferred_allocation, api.PREFERRED_ALLOCATION_REQUEST, api.PREFERRED_ALLOCATION_RESPONSE
                ),
                "Allocate": unary(self.allocate, api.ALLOCATE_REQUEST, api.ALLOCATE_RESPONSE),
                "PreStartContainer": unary(self.pre_start_container, api.PRE_START_CONTAINER_REQUEST, api.EMPTY),
            },
        )

    # Serving and registering.

    def serve(self) -> None:
        if self.server is not None:
            self.server.stop(grace=None)
        self.endpoint.unlink(missing_ok=True)
        # Each ListAndWatch stream holds a worker while it is open: a kubelet that reconnects opens another.
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
        server.add_generic_rpc_handlers((self.handler(),))
        server.add_insecure_port(f"unix://{self.endpoint}")
        server.start()
        self.server = server

    def register(self, timeout: float = 10) -> None:
        request = {
            "version": api.API_VERSION,
            "endpoint": self.endpoint.name,
            "resource_name": self.resource,
            "options": self.options,
        }
        with grpc.insecure_channel(f"unix://{self.kubelet_socket}") as channel:
            call = channel.unary_unary(
                REGISTER, request_serializer=api.REGISTER_REQUEST.encode, response_deserializer=api.EMPTY.decode
            )
            call(request, timeout=timeout, wait_for_ready=True)
        self._record("Register", request, {})

    def _kubelet_identity(self) -> Optional[int]:
        try:
            return self.kubelet_socket.stat().st_ino
        except FileNotFoundError:
            return None

    def run(self, poll: float = 0.2) -> None:
        """Serve and register whenever a kubelet socket appears that this plugin has not registered with, or its own
        socket is gone (a starting kubelet removes every socket in its directory), until stop()."""
        registered: Optional[int] = None
        while not self.stopped.is_set():
            current = self._kubelet_identity()
            if current is not None and (current != registered or not self.endpoint.exists()):
                try:
                    self.serve()
                    self.register()
                    registered = current
                except grpc.RpcError as error:
                    sys.stderr.write(f"device plugin: registration failed, retrying: {error}\n")
            self.stopped.wait(poll)
        if self.server is not None:
            self.server.stop(grace=None)
        self.endpoint.unlink(missing_ok=True)

    def stop(self) -> None:
        self.stopped.set()


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.kubelet.device_plugin")
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--plugin-dir", type=Path, default=Path(api.DEVICE_PLUGIN_DIR))
    arguments = parser.parse_args(argv)
    plugin = DevicePlugin(arguments.config, arguments.plugin_dir)
    signal.signal(signal.SIGTERM, lambda *_: plugin.stop())
    signal.signal(signal.SIGINT, lambda *_: plugin.stop())
    plugin.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
