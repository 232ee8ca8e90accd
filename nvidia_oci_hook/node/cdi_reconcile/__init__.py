"""`cdi reconcile`: rewrite CDI spec files so that injecting their devices succeeds on this node.

- `command`: the command itself: the driver root resolved, the spec files planned, written or shown, the report.
- `plans`: one spec file's plan (read, planned, edited, read back, checked against the library) and its writing.
- `path_moves`: which host paths move to the resolved driver root, and which device nodes get a hostPath.
- `text_edits`: where each value is in a spec's YAML or JSON text, and the text edited there in place.
"""
