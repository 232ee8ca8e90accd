"""The runtime-facing path: what a container engine runs on every container start.

- `wrapper`: `nvidia-oci-runtime`, in front of runc or crun; reconciles config.json on `create`, execs the rest.
- `hooks`: podman's precreate filter (edits the config) and the prestart/createRuntime guard (checks only).
- `dispatch`: the record of settings that the sh fronts (`nvidia_oci_hook.launcher`) read instead of Python.
- `logbook`: what they did, as JSON lines and syslog messages; `messages`: the one-line refusal and the log entry.
- `codecache`: the compiled code of the modules these import, kept beside the record as one file, which the
  fronts' Python programs import from.

Import rule: these modules, and everything they import, use only the standard library's cheap modules and
`nvidia_oci_hook.engine` (with `config`, `host`, `io` and the lean `kinds.oci`, `kinds.devices`,
`kinds.cdinames` and `formats.leanyaml` it builds on). No click, PyYAML, jsonschema, `re`, `typing`,
`dataclasses`, not even `os` (`nvidia_oci_hook.leanos` hands out the same calls): each costs milliseconds of every
container start. `tests/runtime/test_imports.py` holds this in a fresh interpreter started as the launchers start
it (`python3 -I -S`).
"""
