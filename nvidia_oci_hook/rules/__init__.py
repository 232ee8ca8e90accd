"""Every rule, one module per family; `rules.base.all_rules()` imports them all (each registers its rules)."""
