"""`cdi reconcile`: rewrite CDI spec files so that injecting their devices succeeds on this node.

- `text_edits`: where each value is in a spec's YAML or JSON text, and the text edited in place.
"""
