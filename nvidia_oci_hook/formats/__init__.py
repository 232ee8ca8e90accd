"""Text formats with positions: JSON, YAML and TOML parsed with every value's JSON pointer and line, and Go's
RE2 syntax (hooks.d `when` patterns are Go regular expressions).

- `parsing`: what every parser returns (value, DOC problems, locator), the registry by format, JSON's parser.
- `jsontext`, `yamltext`, `tomltext`: pointers to lines for each format; `positions`: the shared line index.
- `leanyaml`: the YAML subset reader the runtime path uses instead of PyYAML; `re2`: the Go RE2 syntax check.

Nothing here knows a document kind (`nvidia_oci_hook.kinds` builds on these). Nothing is imported here either:
the runtime path imports `leanyaml` alone.
"""
