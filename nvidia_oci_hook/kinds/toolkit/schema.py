"""The release's `Config` struct as a table for the decoder: its fields in declaration order, each with the shape
a value must have and the name go-toml v1 gives its type when it refuses one (releases.py's keys, per release)."""

from __future__ import annotations

import functools
from typing import Union

from nvidia_oci_hook.kinds.toolkit.decode import Scalar, Table
from nvidia_oci_hook.kinds.toolkit.releases import TABLE, ToolkitRelease, release_for


def table_for(release: ToolkitRelease) -> Table:
    return _table_for(release.version)


@functools.cache
def _table_for(version: str) -> Table:
    keys = release_for(version).keys

    def build(prefix: str, go_type: str) -> Table:
        fields: list[tuple[str, Union[Scalar, Table]]] = []
        for name in keys.children(prefix):
            dotted = f"{prefix}.{name}" if prefix else name
            key_type = keys.type_of(dotted)
            if key_type.shape == TABLE:
                fields.append((name, build(dotted, key_type.decoder_name)))
            else:
                element = key_type.element or "string"
                fields.append((name, Scalar(key_type.shape, key_type.decoder_name, element, key_type.pointer)))
        return Table(go_type, tuple(fields))

    return build("", "config.Config")
