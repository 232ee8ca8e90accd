"""doctor's checks, one module each: its evidence, verdict, fix and counts (`doctor.run_checks` runs and orders
them; `base` holds what they share). A new check is a module here and its entry in `doctor.CHECKS`.

- `base`: the statuses, `Check` and `Repair`, the inputs of one doctor run, and the helpers several checks use.
- `driver_root`: which driver-root candidate holds the driver, and where its device nodes are.
- `kernel_module`: whether the NVIDIA kernel module is loaded.
- `driver_versions`: the loaded module's version against each driver root's user space.
- `validation_markers`: the GPU Operator's validation markers against where the driver really is.
- `stray_device_nodes`: NVIDIA nodes in the host's /dev while the driver's are under another root.
- `modify_device_files`: NVML's ModifyDeviceFiles against where the driver is.
- `dev_char_links`: the /dev/char links the systemd cgroup driver needs for each NVIDIA node.
- `nvml`: what NVML says of the driver and GPUs, against the GPUs the CDI specs name.
- `cdi_specs`: the CDI specs against the driver root that holds their paths (`cdi reconcile`'s plan).
- `toolkit`: NVIDIA Container Toolkit's config.toml as the release on the node reads it, against the node.
- `device_plugins`: what the kubelet's device plugins handed this node's pods (its checkpoint), against the node.
- `gpu_access`: whether every running container can still open the NVIDIA nodes its spec gave it.
- `reload_risk`: which engine loses its GPU containers' devices when systemd applies their cgroups again.
- `engines`: the engines installed, their releases and CDI libraries, and the CDI names each cannot resolve.
- `engine_configs`: `lint --node`'s errors on the engines' configurations, hooks and CDI spec directories.
"""
