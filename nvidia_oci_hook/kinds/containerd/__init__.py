"""containerd's config.toml: detection, and what containerd 1.6 to 2.3 read from it.

- versions: the containerd series, which of them read each config version, the CRI plugin names.
- structs: containerd's Go structs (server, CRI plugins, runc options) and the TOML types their fields accept.
- walk: key lookup as containerd's TOML decoders match keys, and the walk that finds wrong types and unknown keys.
- config: the config as containerd reads it (its CRI plugin and runtimes), and where a program it names is found.
- pathmatch: Go's path.Match, which containerd applies to pod_annotations and container_annotations.
- kind: the document kind: which files are containerd configs, and the not-UTF-8 load problem.
- toml_syntax: a byte-order mark and a lone carriage return, which containerd 1.x reads and 2.x refuses.
- reading: the root file and the files its imports name, read and merged as containerd does.
"""
