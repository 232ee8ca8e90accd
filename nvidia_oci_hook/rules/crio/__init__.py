"""CRO: cri-o configurations, checked as cri-o 1.37 merges and validates them.

CRO0xx: cri-o refuses to load the configuration on any node (the `crio config` command and the daemon both stop):
the decoder's errors and what `Config.Validate(false)` rejects. These are the `--schema-only` checks.
CRO1xx: cri-o loads the configuration, but ignores part of it, refuses it only when the daemon starts, or runs
with something other than what the operator meant.

- config_view: the view every check works on (one file over cri-o's defaults, or a merged configuration).
- known_names: the names cri-o accepts (capabilities, ulimits, pod metrics, TLS settings, annotations).
- values: values cri-o refuses while loading (not UTF-8 CRO006, wrong type CRO001, invalid value CRO004).
- runtimes: the runtime tables and handlers (CRO002, CRO103, CRO108, CRO109, CRO110).
- devices: additional_devices, allowed_devices, stray GPU nodes for privileged containers (CRO003, CRO105-CRO107).
- hooks_and_cdi_dirs: hooks_dir and cdi_spec_dirs (CRO102, CRO104).
- keys: keys cri-o ignores, and keys it reads twice into one setting (CRO101, CRO111).
- dropins: drop-in entries cri-o cannot read, and leftovers it reads anyway (CRO005, CRO112).
"""
