"""containerd's config.toml: detection, and what containerd 1.6 to 2.3 read from it.

- structs: the whole model: versions, the Go structs, the walk, the config as containerd reads it, the kind.
"""
