"""CTD: containerd config.toml (config versions 1 to 4) that containerd refuses, or reads otherwise than it looks.

- cri_plugin: every CTD rule, with the helpers they share.
"""
