"""CTD: containerd config.toml (config versions 1 to 4) that containerd refuses, or reads otherwise than it looks.

- config_view: what every CTD rule shares: the kind, the config and its walks made once, how messages name releases.
- values: values containerd cannot decode or parse (CTD001, CTD004, CTD006, CTD114).
- versions: config versions and plugin names (CTD002, CTD003, CTD104, CTD105, CTD106).
- keys: keys containerd ignores, in the wrong table, unknown, or read by some releases only (CTD101-CTD103).
- host_files: imported files and runtime programs looked for on the node (CTD005, CTD111).
- cri_plugin: settings with which the CRI plugin fails to load (CTD110, CTD115).
- runtimes: runtimes whose pods fail or lose their GPUs (CTD112, CTD113, CTD116).
- dropins: files named by imports that containerd reads otherwise than they look (CTD117, CTD118, CTD119).
"""
