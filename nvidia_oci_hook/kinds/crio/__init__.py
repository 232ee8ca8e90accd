"""cri-o configuration: `crio.conf` plus the `crio.conf.d` drop-ins, merged into the config cri-o really runs with.

Followed: cri-o 1.37 (the main branch at v1.36.0-191-gf954a17, `Version = "1.37.0"`) and the TOML decoder it
vendors, BurntSushi/toml v1.6.0.

- key_table: every table and key cri-o decodes, the Go type of each field, and cri-o's defaults.
- go_values: Go type names, key paths and the decoder's complaint about a value, as BurntSushi/toml prints them.
- merge: the merged configuration, where each value was set, and how each file merges over the earlier ones.
- toml_syntax: TOML as cri-o's decoder reads it where tomllib differs (a byte-order mark, TOML 1.1, not UTF-8).
- reading: crio.conf and crio.conf.d read the way cri-o walks them; the crio and crio-config kinds.
"""
