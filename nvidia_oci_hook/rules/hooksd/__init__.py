"""HKD: hooks.d files and directories, as podman and cri-o load them (containers/common pkg/hooks).

`silent_failures`: every HKD rule, for now.
"""
