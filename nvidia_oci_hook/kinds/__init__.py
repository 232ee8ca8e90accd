"""Document kinds: OCI config and state, CDI specs, hooks.d files, cri-o and containerd configurations, CRI
container configs; their directory kinds, device facts and JSON Schemas. Text formats are `nvidia_oci_hook.formats`.

Nothing is imported here, so that code needing one module (the runtime path needs `oci`, `devices` and
`cdinames`) does not pay for all of them; `document.load_all_kinds()` imports every kind and format when a
linter needs them all. A kind too large for one module is a package (`cdi`, `crio`, `containerd`, `hooksd`)
whose `__init__` names its parts.
"""
