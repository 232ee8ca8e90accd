"""The node as a whole: where the driver really is, what the engines read, and the tools that repair it.

Evidence, read only through a `HostView`; these modules import nothing but `host`, `kinds` and `formats`, so the
rules that judge the node (NODE, cri-o's stray nodes) and `lint --node` build on them:
- `driver`: per driver-root candidate, the driver's files, dev root, GPU nodes and module version; stray nodes.
- `markers`: the GPU Operator's validation markers judged against that evidence.
- `nvml`: the NVML view through pynvml, with every `/dev/nvidia*` it creates accounted for.
- `engines`: where each engine (cri-o, containerd, podman) reads its documents, for `lint --node`.

Tools, the `nvidia-oci-hook` commands that act on the node; they sit above `lint`, which doctor runs:
- `doctor`: the node checked as a whole, with safe repairs (`--fix`).
- `cdi_reconcile/`: CDI specs moved to the driver root that holds their paths, edited in place.
- `configure`: the wrapper registered as an engine's runtime handler and the hooks directories.
"""
