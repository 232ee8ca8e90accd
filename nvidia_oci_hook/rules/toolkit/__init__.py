"""NCT: NVIDIA Container Toolkit's config.toml, judged as the toolkit release on the node reads it.

NCT001: the release refuses the file (syntax, a value of the wrong type, a value it validates): the runtime and
the hook stop before they touch a container, so every GPU container through them fails.
NCT0xx: the file loads, but a key is dropped, a value falls back, or a setting makes GPU containers fail when
they are created.
NCT1xx: the file against the node: the driver root, the paths and runtimes it names, the CDI specs its modes
need, the engines' handlers and hooks.

- view: the file decoded for the release that judges it.
- load: NCT001 to NCT006.
- node: NCT101 to NCT109.
"""
