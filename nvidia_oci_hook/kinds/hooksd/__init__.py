"""hooks.d files and directories, as podman and cri-o read them (containers/common `pkg/hooks`).

`reading`: one file read the way the loader reads it, and hooks directories read the way `hooks.New` does.
"""
