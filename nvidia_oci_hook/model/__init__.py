"""Documents: formats, kinds and directory kinds, one module each.

Nothing is imported here, so that code needing one module (the runtime-facing modes need `oci` and `devices`)
does not pay for all of them; `document.load_all_kinds()` imports every module when a linter needs them all.
"""
