"""doctor's checks, one module each: its evidence, verdict, fix and counts (`doctor.run_checks` runs and orders
them).

- `device_plugins`: what the kubelet's device plugins handed this node's pods (the kubelet's checkpoint) against
  the node: device paths it lacks, CDI names no spec defines, static pods asking for a resource no plugin
  registered, allocations of pods that are gone.
"""
