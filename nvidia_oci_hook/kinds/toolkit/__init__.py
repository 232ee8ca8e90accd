"""NVIDIA Container Toolkit's `config.toml`, read as the toolkit release on the node reads it.

One file decides, for every GPU container that goes through `nvidia-container-runtime` or the legacy
`nvidia-container-runtime-hook`: the mode that injects the GPUs, the driver root of the legacy path
(`nvidia-container-cli.root`), the low-level runtimes tried, the hook's and `nvidia-ctk`'s paths, and whether an
unprivileged container may ask for GPUs with `NVIDIA_VISIBLE_DEVICES`.

- releases: each release's keys, Go types, defaults, modes and load-time validation (1.14.0 to 1.20.0).
- decode: the file as the release's decoder (pelletier/go-toml v1) unmarshals it: the settings in effect, the
  keys it drops without a word, and what makes it refuse the file.
- kind: detection by name and content, and the bytes go-toml v1 reads where tomllib differs.
"""

from __future__ import annotations

TOOLKIT = "nvidia-container-toolkit"
