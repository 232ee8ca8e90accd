# Shortcuts for developers; the quick start in README.md uses scripts/ directly (make is not on a bare Debian).
.PHONY: demo test check bench docs

demo:
	sh scripts/demo

test:
	sh scripts/test

check:
	.venv-newest/bin/ruff check . && .venv-newest/bin/ruff format --check . && .venv-newest/bin/mypy

bench:
	.venv/bin/python benchmarks/bench_lint.py

docs:
	.venv/bin/python scripts/docs.py && NO_MKDOCS_2_WARNING=1 .venv-newest/bin/mkdocs build --strict
