"""Every rule, one module per family, or a package per concern for a large family (`cdi`, `crio`, `containerd`,
`hooksd`); `rules.base` keeps the registry and `all_rules()` imports them all (each registers its rules)."""
