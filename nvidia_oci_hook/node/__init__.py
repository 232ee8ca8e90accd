"""The node as a whole: where the driver really is, what the engines read, and the tools that repair it.

Evidence, read only through a `HostView` (so rules and `lint --node` use it too):
- `driver`: per driver-root candidate, the driver's files, dev root, GPU nodes and module version; stray nodes.
- `markers`: the GPU Operator's validation markers judged against that evidence.
- `nvml`: the NVML view through pynvml, with every `/dev/nvidia*` it creates accounted for.
- `engines`: where each engine (cri-o, containerd, podman) reads its documents, for `lint --node`.

Tools, the `nvidia-oci-hook` commands that act on the node:
- `doctor`: the node checked as a whole, with safe repairs (`--fix`).
- `cdi_reconcile`: CDI specs moved to the driver root that holds their paths.
- `configure`: the wrapper registered as an engine's runtime handler and the hooks directories.
"""
